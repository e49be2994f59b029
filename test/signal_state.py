"""What a process does with SIGINT, read from /proc/<pid>/status (SigBlk, SigIgn, SigCgt: the signal masks of its
main thread and of the process), for the messages of the Ctrl-C tests: beside CPU hogs a SIGINT sent while a
command was starting was twice lost (the command ran to its end, exit 0) as if the process ignored or blocked it."""

from __future__ import annotations

import os
import signal


def sigint_state(pid: int | None = None) -> str:
    """``"pid P: SIGINT blocked/ignored/caught/default"`` (several words when several masks have it), or why not
    known (the process is gone)."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError as exc:
        return f"pid {pid}: {exc.strerror}"
    bit = 1 << (signal.SIGINT - 1)
    words = [word for key, word in (("SigBlk", "blocked"), ("SigIgn", "ignored"), ("SigCgt", "caught"))
             if int(fields.get(key, "0").strip(), 16) & bit]
    return f"pid {pid}: SIGINT {'/'.join(words) or 'default'}"
