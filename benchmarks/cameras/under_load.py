"""Camera frames per simulated second under CPU hogs (issue 43 item 5; docs/cameras.md, "Frames hold in sim time").

    scripts/venv_run.sh --isolated python benchmarks/cameras/under_load.py --hogs 2 --wall 20 [--best-effort]
        [-- node arguments, e.g. --ros-args -p camera_sync:=false -p camera_priority:=idle]

Starts sim_node with scenes/iiwa_wsg_cameras.yaml (two 640x480 cameras at 15 Hz), subscribes to color, depth,
color camera_info and points of both (reliable, keep last 10; --best-effort: qos_profile_sensor_data), starts
``--hogs`` ``yes`` processes once every stream has delivered, and after 2 s counts, for ``--wall`` s of wall time,
the distinct header stamps per stream inside the sim-time window that /clock covered; prints them per simulated
second, the real-time factor and the node's camera diagnostics (rendered / dropped / skipped, sync waits).
"""

import argparse
import collections
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test" / "ros"))
from ros_testing import NodeProcess, RosProbe, wait_until  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, PointCloud2  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--wall", type=float, default=20.0, help="s of wall time counted")
    ap.add_argument("--best-effort", action="store_true")
    ap.add_argument("node_args", nargs="*")
    a = ap.parse_args()
    node = NodeProcess(["--scene", "iiwa_wsg_cameras.yaml", "--engine", "tamsi", "--time-step", "0.001",
                        *a.node_args])
    ros = RosProbe()
    stamps = collections.defaultdict(set)
    qos = qos_profile_sensor_data if a.best_effort else 10
    for cam in ("wrist_camera", "table_camera"):
        ns = f"/{cam}/{cam}"
        for kind, topic in ((Image, "color/image_raw"), (Image, "depth/image_rect_raw"),
                            (CameraInfo, "color/camera_info"), (PointCloud2, "depth/color/points")):
            ros.node.create_subscription(kind, f"{ns}/{topic}", lambda m, k=f"{ns}/{topic}": stamps[k].add(
                m.header.stamp.sec * 10**9 + m.header.stamp.nanosec), qos)
    clock, diag = [], []
    ros.node.create_subscription(Clock, "/clock", lambda m: clock.append(m.clock.sec + m.clock.nanosec * 1e-9), 10)
    ros.node.create_subscription(DiagnosticArray, "/diagnostics", diag.append, 10)
    hogs = []
    try:
        wait_until(lambda: len(stamps) == 8, 300, what=lambda: node.output()[-2000:])
        hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(a.hogs)]
        time.sleep(2.0)
        c0, w0 = clock[-1], time.monotonic()
        time.sleep(a.wall)
        c1, w1 = clock[-1], time.monotonic()
        time.sleep(1.0)
        print(f"hogs {a.hogs}: sim {c0:.2f}..{c1:.2f} s over {w1 - w0:.1f} s wall: real-time factor "
              f"{(c1 - c0) / (w1 - w0):.2f}; load {os.getloadavg()[0]:.1f}")
        lo, hi = int(c0 * 1e9), int(c1 * 1e9)
        for topic, got in sorted(stamps.items()):
            n = sum(lo <= s < hi for s in got)
            print(f"  {topic:50s} {n / (c1 - c0):5.1f} frames per simulated second ({n})")
        for status in (diag[-1].status if diag else ()):
            if status.name.endswith(": cameras"):
                print("  ", {kv.key: kv.value for kv in status.values})
    finally:
        for p in hogs:
            p.kill()
            p.wait()
        ros.close()
        node.stop()


if __name__ == "__main__":
    main()
