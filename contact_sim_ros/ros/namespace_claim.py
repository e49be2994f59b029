"""A simulation node's claim on its ROS namespace on this host: one locked file per (user, ROS_DOMAIN_ID,
namespace) that the kernel releases when the process ends, however it ends (SIGKILL included).

Two simulation nodes in one namespace would publish the same topics and serve the same services. On one host the
claim decides at once and for certain which one runs (``flock``: atomic, no stale entry after a crash, no waiting
for DDS discovery); the ROS-graph look in sim_node.py stays for a node on another host. The file holds the
holder's record (JSON: node, robot, engine, pid) so that the refused node can name it.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tempfile
import time
import urllib.parse
from pathlib import Path

from ..errors import ConfigError

RECORD_WAIT_S = 1.0     # s a refused node waits for the holder's record (written right after it took the lock)


def claim_path(namespace: str) -> Path:
    """``<tmp>/contact_sim_ros-<uid>/domain-<ROS_DOMAIN_ID>/<namespace, percent-encoded>.lock``."""
    domain = os.environ.get("ROS_DOMAIN_ID", "").strip() or "0"
    return (Path(tempfile.gettempdir()) / f"contact_sim_ros-{os.getuid()}" / f"domain-{domain}"
            / (urllib.parse.quote(namespace, safe="") + ".lock"))


class NamespaceClaim:
    """Held while the node lives; ``release()`` (or the end of the process) gives the namespace back."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, namespace: str, record: dict) -> NamespaceClaim | None:
        """The claim on ``namespace`` with ``record`` written into it; ConfigError naming the holder if another
        process on this host holds it, or naming the path if the lock file or its folder is not one this user
        made (a symbolic link, a hard link, not a regular file, another owner: never followed nor written); None
        (no claim, the graph look alone decides) if the lock directory cannot be written."""
        path = claim_path(namespace)
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            return None
        for folder in (path.parent.parent, path.parent):
            _check_own(folder, stat.S_ISDIR, "a folder")
        try:
            # O_NOFOLLOW: a symbolic link in its place is refused (ELOOP), not followed: the record would
            # overwrite the file it points to; O_NONBLOCK: a FIFO in its place does not block the open
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY,
                         0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                _check_own(path, stat.S_ISREG, "a regular file")      # raises, naming the link and its target
            return None
        try:
            _check_own(path, stat.S_ISREG, "a regular file", os.fstat(fd))
        except ConfigError:
            os.close(fd)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_record(fd)
            pid = _lock_holder_pid(os.fstat(fd))
            os.close(fd)
            if not holder.get("node"):        # not a simulation node's lock: say who holds it and where
                raise ConfigError(f"the namespace lock {path} of namespace {namespace!r} is held by "
                                  + _describe_process(pid) + ", which is not a simulation node (the file holds no "
                                  "simulation node's record); stop that process or start this node with another "
                                  "--namespace")
            raise ConfigError(f"another simulation node already runs in namespace {namespace!r}: "
                              + describe_holder(holder) + "; stop it or start this one with another --namespace")
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(record).encode())
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)      # closing the only descriptor of the file releases the lock
            self._fd = None

    def __del__(self):
        self.release()


def _read_record(fd: int) -> dict:
    """The holder's record; {} if it has not written one within RECORD_WAIT_S (it locks, then writes)."""
    end = time.monotonic() + RECORD_WAIT_S
    while True:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 65536)
        try:
            record = json.loads(raw)
            return record if isinstance(record, dict) else {}
        except ValueError:
            if time.monotonic() > end:
                return {}
            time.sleep(0.01)


def describe_holder(record: dict) -> str:
    """``/ns/contact_sim (robot 'iiwa_wsg', engine 'tamsi'), process 1234 on this host``."""
    what = ", ".join(f"{k} {record[k]!r}" for k in ("robot", "engine") if record.get(k))
    text = record.get("node", "a simulation node") + (f" ({what})" if what else "")
    return text + (f", process {record['pid']} on this host" if record.get("pid") else " on this host")


def _check_own(path: Path, is_kind, kind: str, st: os.stat_result | None = None) -> None:
    """ConfigError naming ``path`` unless it is ``kind`` (``is_kind`` of its mode), owned by this user, not a
    symbolic link and (a file) not a hard link of another file: the claim writes into it."""
    st = os.lstat(path) if st is None else st
    problem = None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        problem = f"is a symbolic link (to {target}); it is not followed"
    elif not is_kind(st.st_mode):
        problem = f"is not {kind}"
    elif st.st_uid != os.getuid():
        problem = f"belongs to user id {st.st_uid}, not to this user ({os.getuid()})"
    elif kind == "a regular file" and st.st_nlink > 1:
        problem = f"has {st.st_nlink} hard links (another file shares its content); it is not written"
    if problem is not None:
        raise ConfigError(f"the namespace lock {'folder' if kind == 'a folder' else 'file'} {path} {problem}: "
                          f"remove it (the node makes it anew) or start this node with another --namespace")


def _lock_holder_pid(st: os.stat_result) -> int | None:
    """The process holding a flock on the file ``st`` (the kernel's /proc/locks), or None if not found."""
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:567 0 EOF" (a waiting request has "->" after the number)
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == dev:
                    return int(fields[4])
    except (OSError, ValueError):
        pass
    return None


def _describe_process(pid: int | None) -> str:
    """``process 1234 (python3 holder.py)``, or ``a process of unknown id``."""
    if pid is None:
        return "a process of unknown id"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    return f"process {pid}" + (f" ({command[:200]})" if command else "")
