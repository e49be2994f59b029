"""A simulation node's claim on its ROS namespace on this host: one locked file per (user, ROS_DOMAIN_ID,
namespace) that the kernel releases when the process ends, however it ends (SIGKILL included).

Two simulation nodes in one namespace would publish the same topics and serve the same services. On one host the
claim decides at once and for certain which one runs (``flock``: atomic, no stale entry after a crash, no waiting
for DDS discovery); the ROS-graph look in sim_node.py stays for a node on another host. The file holds the
holder's record (JSON: node, robot, engine, pid) so that the refused node can name it.
"""
from __future__ import annotations

import fcntl
import json
import os
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
        process on this host holds it; None (no claim, the graph look alone decides) if the lock directory
        cannot be written."""
        path = claim_path(namespace)
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_record(fd)
            os.close(fd)
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
            return json.loads(raw)
        except ValueError:
            if time.monotonic() > end:
                return {}
            time.sleep(0.01)


def describe_holder(record: dict) -> str:
    """``/ns/contact_sim (robot 'iiwa_wsg', engine 'tamsi'), process 1234 on this host``."""
    what = ", ".join(f"{k} {record[k]!r}" for k in ("robot", "engine") if record.get(k))
    text = record.get("node", "a simulation node") + (f" ({what})" if what else "")
    return text + (f", process {record['pid']} on this host" if record.get("pid") else " on this host")
