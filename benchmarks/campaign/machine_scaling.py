"""How well THIS machine runs two CPU-bound processes at once (the ceiling of any 1 -> 2 worker scaling here).

    scripts/venv_run.sh python benchmarks/campaign/machine_scaling.py [--rounds 3]

Two workloads, each first alone, then as two identical processes started together: (a) pure Python (an integer
loop: no memory traffic), (b) the iiwa + WSG simulation of benchmarks/peers (TAMSI, 1 ms steps: the campaign's own
kind of work). Per run: CPU seconds of the fixed work. The machine's two-process efficiency is
CPU(alone) / CPU(one of two at once), median over the rounds; a campaign's 1 -> 2 worker efficiency cannot exceed it
(the same work slows down when both vCPUs are busy: shared caches, memory bandwidth, or vCPUs that are siblings on
the host). Prints a table with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY_LOOP = ("import time, json\nc0 = time.process_time()\ns = 0\nfor i in range(30_000_000):\n    s += i * i % 7\n"
           "print(json.dumps({'cpu_s': time.process_time() - c0}))")


def command(work: str) -> list[str]:
    if work == "python":
        return [sys.executable, "-c", PY_LOOP]
    return [str(ROOT / "scripts" / "venv_run.sh"), "python", str(ROOT / "benchmarks" / "peers" / "ours_case.py"),
            "--case", "iiwa", "--engine", "tamsi", "--duration", "20"]


def cpu_of(out: str) -> float:
    return float(json.loads([x for x in out.splitlines() if x.startswith("{")][-1])["cpu_s"])


def run(work: str, n: int) -> list[float]:
    procs = [subprocess.Popen(command(work), stdout=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(n)]
    return [cpu_of(p.communicate()[0]) for p in procs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    loads = [os.getloadavg()[0]]
    rows = []
    for work in ("python", "iiwa_tamsi"):
        alone, pair = [], []
        for _ in range(a.rounds):
            alone += run(work, 1)
            pair += run(work, 2)
            loads.append(os.getloadavg()[0])
        ca, cp = statistics.median(alone), statistics.median(pair)
        rows.append((work, ca, cp, ca / cp))
    print(f"\nmachine scaling, {start}, {os.cpu_count()} CPUs, load average {min(loads):.1f} - {max(loads):.1f} "
          f"(other processes count: run it on a quiet machine), median of {a.rounds} rounds\n")
    print("| work | CPU s alone | CPU s each, two at once | two-process efficiency |")
    print("| --- | --- | --- | --- |")
    for work, ca, cp, eff in rows:
        print(f"| {work} | {ca:.3f} | {cp:.3f} | {eff:.3f} |")


if __name__ == "__main__":
    main()
