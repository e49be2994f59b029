"""One timing run of a TAMSI speed-target scene (issue 18: the papers' C++ figures), in a fresh process, for
``benchmarks/peers/run.py`` to interleave with the Drake rows of the same run.

    scripts/venv_run.sh python benchmarks/peers/targets_case.py --scene gripper     # or allegro

The scenes and the timing loop are those of ``benchmarks/tamsi/speed.py`` (gripper shaking the mug, h = 3 ms, 5 s;
Allegro reorienting the mug, h = 0.7 ms, 3 s): a ``sim.step()`` loop, first step untimed. Prints one JSON line:
CPU and wall time (s), steps, simulated seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TAMSI = Path(__file__).resolve().parents[1] / "tamsi"
sys.path.insert(0, str(TAMSI))
import speed  # noqa: E402

# scene: (target real-time factor, source of the target)
TARGETS = {"gripper": (40.0, "paper VI-A, C++"), "allegro": (2.14, "paper VI-B, C++")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scene", choices=sorted(TARGETS), required=True)
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds (default: speed.py's)")
    a = ap.parse_args()
    duration = a.duration or speed.SCENES[a.scene][2]
    r = speed.time_simulation(a.scene, duration)
    print(json.dumps({"scene": a.scene, "cpu_s": r["cpu"], "wall_s": r["wall"], "steps": r["steps"],
                      "sim_s": duration, "dt": speed.SCENES[a.scene][1]}))


if __name__ == "__main__":
    main()
