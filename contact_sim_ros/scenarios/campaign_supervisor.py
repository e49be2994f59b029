"""``contact-sim campaign CAMPAIGN.yaml ...`` runs the campaign in a child process that this one supervises, so
that Ctrl-C at any moment ends the command within INTERRUPT_DEADLINE_S with ``contact-sim campaign: interrupted
...`` and exit status 130, whatever Ray does (issue 44: Ray's driver blocked for good in its GlobalStateAccessor's
destructor, holding the interpreter's lock, when interrupted while starting: no Python code of that process runs
again, a second SIGINT and a SIGTERM were ignored).

The child (``campaign.child_main``) handles the Ctrl-C itself: it saves the rows done, says so, gives Ray's
shutdown SHUTDOWN_TIMEOUT_S and ends with os._exit(130). This process, which imports neither Ray nor the
simulation, only waits: a terminal's Ctrl-C reaches both (one process group; a SIGINT sent to this process alone
is passed on), and when the child has not ended INTERRUPT_DEADLINE_S after the first Ctrl-C, or at a second
Ctrl-C, it and the processes it started (Ray's) are killed and this process says so and exits 130.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

INTERRUPTED_EXIT = 130
INTERRUPT_DEADLINE_S = 2.5      # from the first Ctrl-C to the child's end, else it is killed (s)

# the child's first lines: until campaign.main() installs its handler, a Ctrl-C (while the simulation's modules
# load) ends it at once: nothing is under way yet
_CHILD = """import os, signal, sys
def _early(signum, frame):
    os.write(2, b"contact-sim campaign: interrupted\\n")
    os._exit(130)
signal.signal(signal.SIGINT, _early)
from contact_sim_ros.scenarios.campaign import child_main
child_main(sys.argv[1:])
"""


def supervised(argv) -> bool:
    """Whether ``contact-sim campaign ARGV`` runs supervised: a campaign run (not ``report``, ``--trial`` or
    ``-h``)."""
    return bool(argv) and argv[0] != "report" and not any(
        a in ("-h", "--help") or a == "--trial" or a.startswith("--trial=") for a in argv)


def descendants(pid: int) -> list[int]:
    """The pids of every process below ``pid`` (from /proc: children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            ppid = int(text[text.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _kill(pids) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def run(argv) -> int:
    """Run ``contact-sim campaign ARGV`` in a child process; its exit status, or 130 when interrupted."""
    interrupts: list[float] = []

    def on_sigint(signum, frame):
        interrupts.append(time.monotonic())
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, *argv])
        passed_on = False
        below: list[int] = []
        while True:
            try:
                rc = child.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if not interrupts:
                continue
            below = descendants(child.pid) or below      # (known before the child ends: Ray's processes)
            if not passed_on:
                # a terminal's Ctrl-C reached the child as well (a repeat is ignored there); `kill -INT` of this
                # process alone did not
                passed_on = True
                try:
                    os.kill(child.pid, signal.SIGINT)
                except OSError:
                    pass
            if len(interrupts) > 1 or time.monotonic() - interrupts[0] > INTERRUPT_DEADLINE_S:
                _kill([child.pid, *descendants(child.pid)])
                child.wait()
                print(f"contact-sim campaign: interrupted: stopped "
                      f"{'at the second Ctrl-C' if len(interrupts) > 1 else f'{INTERRUPT_DEADLINE_S:g} s after Ctrl-C'}"
                      f" (the rows written so far are kept; run the same command again to resume)", file=sys.stderr,
                      flush=True)
                return INTERRUPTED_EXIT
        if interrupts:
            _kill([p for p in below if _alive(p)])      # Ray's processes the child's shutdown left behind
            if rc < 0:                                  # the child ended by the signal itself (Python starting)
                print("contact-sim campaign: interrupted", file=sys.stderr, flush=True)
                return INTERRUPTED_EXIT
        return rc if rc >= 0 else 128 - rc
    finally:
        signal.signal(signal.SIGINT, previous)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
