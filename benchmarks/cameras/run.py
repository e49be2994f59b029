"""Benchmark: the simulated RGB-D cameras (contact_sim_ros/cameras, ros/camera_publisher.py).

    python benchmarks/cameras/run.py [--frames 60] [--duration 20] [--warmup 5] [--engine tamsi] [--no-node] [--setups 0,1] [--thread-priority N]

1. Render time per frame, in this process (CameraRig on scenes/iiwa_wsg_cameras.yaml: iiwa + WSG, table, bottle,
   box; the wrist camera while joint 1 and 6 move every frame), at 640x480 and 1280x720: the render alone (GL
   pass + read-back, kinematics included), the D435 depth model, the messages the node builds (color, depth,
   aligned depth, labels, point cloud); median and p95 of wall time over ``--frames`` frames.
2. The node's real-time factor (time step 1 ms, real_time_factor 1, ``--engine``) with no camera, with the
   wrist camera (D435 depth) at 640x480 15 and 30 Hz and at 1280x720 15 Hz, and with the wrist and the table
   camera at 640x480 15 Hz, a subscriber on each camera's color image, depth image and point cloud (so that it
   renders); the /joint_states period jitter at the subscriber and the node's step-period jitter (diagnostics), as
   benchmarks/node/run.py measures them, the frames (color + depth pairs) received per second, the CPU of the node
   process and of its camera process (ros/camera_process.py). Two controls without a camera: a process of one
   thread at idle priority (as the camera process) looping over integers, or streaming memory: the jitter any work
   on the other core adds.

Prints a Markdown table (docs/benchmarks.md, "Cameras"). The machine's load average is printed beside it: the
2-core machine is shared, and llvmpipe's raster threads compete with the stepping thread for the same cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ROS_DOMAIN_ID", str(101 + os.getpid() % 100))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCENE = REPO / "scenes" / "iiwa_wsg_cameras.yaml"


def render_times(frames: int) -> list[dict]:
    from contact_sim_ros.cameras.depth_models import measured_depth
    from contact_sim_ros.cameras.rig import CameraRig
    try:
        from contact_sim_ros.ros.camera_topics import depth_mm, image_message, point_cloud_message
    except ImportError:     # before ros/camera_topics.py (an older checkout, for before/after runs)
        from contact_sim_ros.ros.camera_publisher import depth_mm, image_message, point_cloud_message
    from contact_sim_ros.sim.scene import load_scene
    rows = []
    for width, height in ((640, 480), (1280, 720)):
        data = yaml.safe_load(SCENE.read_text())
        data["cameras"] = [{**data["cameras"][0], "width": width, "height": height}]
        scene = load_scene(data, source=str(SCENE))
        rig = CameraRig(scene, 1e-3)
        spec = rig.camera("wrist_camera")
        m = scene.model
        j1 = m.joint_q_index[m.joint_index("iiwa_joint_1")]
        j6 = m.joint_q_index[m.joint_index("iiwa_joint_6")]
        t_render, t_depth, t_msgs, t_total, cpu_total = [], [], [], [], []
        for k in range(frames + 3):
            q = scene.q0.copy()
            q[j1] += 0.3 * np.sin(0.1 * k)
            q[j6] += 0.2 * np.sin(0.07 * k)
            c0 = time.process_time()          # this process's CPU: llvmpipe's raster threads included
            t0 = time.perf_counter()
            images, T = rig.renderer.render_q(spec, q)
            t1 = time.perf_counter()
            depth = measured_depth(spec, images.depth, 1e-3 * k)
            t2 = time.perf_counter()
            mm = depth_mm(depth)
            image_message(images.color, "rgb8", "c")
            image_message(mm, "16UC1", "d")
            image_message(mm, "16UC1", "c")
            image_message(images.labels, "16UC1", "c")
            point_cloud_message(spec, mm.astype(np.float32) * np.float32(1e-3), images.color, "d")
            t3 = time.perf_counter()
            c3 = time.process_time()
            if k >= 3:                 # the first frames compile shaders and allocate
                t_render.append(t1 - t0)
                t_depth.append(t2 - t1)
                t_msgs.append(t3 - t2)
                t_total.append(t3 - t0)
                cpu_total.append(c3 - c0)
        rig.release()

        def stats(ts):
            a = 1e3 * np.array(ts)
            return float(np.median(a)), float(np.percentile(a, 95))
        rows.append({"size": f"{width}x{height}", "render": stats(t_render), "depth": stats(t_depth),
                     "msgs": stats(t_msgs), "total": stats(t_total), "cpu": stats(cpu_total),
                     "triangles": rig.visual.triangles,
                     "gl": rig.renderer.gl.renderer})
    return rows


# Controls for the camera set-ups: one process of one thread under SCHED_IDLE, as the camera process runs, doing
# no rendering and no DDS. "compute": a Python integer loop (registers and L1 only); "memory": numpy copies of
# 64 MB arrays (memory bandwidth and the shared caches, as llvmpipe's rasteriser and read-back stream them). The
# jitter these add is what any work on the other core adds at idle priority on this machine.
BURNERS = {
    "compute": "x = 0\nwhile True:\n    x += 1\n",
    "memory": "import numpy as np\na = np.ones(8 << 20)\nb = np.empty_like(a)\nwhile True:\n    np.copyto(b, a)\n",
}


def start_burner(kind: str):
    import subprocess
    code = "import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n" + BURNERS[kind]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def node_runs(engine: str, duration: float, warmup: float, only=None, thread_priority=None) -> list[dict]:
    sys.path.insert(0, str(REPO / "benchmarks" / "node"))
    import rclpy
    import run as node_bench      # benchmarks/node/run.py: Probe, measure
    from sensor_msgs.msg import Image, PointCloud2
    node_bench.OUT.mkdir(exist_ok=True)
    rclpy.init()
    probe = node_bench.Probe()
    images = []
    for topic in ("color/image_raw", "depth/image_rect_raw"):
        probe.node.create_subscription(Image, f"/wrist_camera/wrist_camera/{topic}",
                                       lambda m: images.append(time.monotonic()), 10)
    probe.node.create_subscription(PointCloud2, "/wrist_camera/wrist_camera/depth/color/points",
                                   lambda m: None, 10)
    for topic in ("color/image_raw", "depth/image_rect_raw"):
        probe.node.create_subscription(Image, f"/table_camera/table_camera/{topic}",
                                       lambda m: images.append(time.monotonic()), 10)
    probe.node.create_subscription(PointCloud2, "/table_camera/table_camera/depth/color/points",
                                   lambda m: None, 10)
    tmp = Path(tempfile.mkdtemp(prefix="camera_bench_"))
    rows = []
    # (label, [(camera index in the scene, rate Hz, width, height)], BURNERS key or None)
    setups = [("none", [], None), ("640x480 at 15 Hz", [(0, 15.0, 640, 480)], None),
              ("640x480 at 30 Hz", [(0, 30.0, 640, 480)], None), ("1280x720 at 15 Hz", [(0, 15.0, 1280, 720)], None),
              ("two: wrist + table, 640x480 at 15 Hz", [(0, 15.0, 640, 480), (1, 15.0, 640, 480)], None),
              ("none; a compute loop at idle priority beside it", [], "compute"),
              ("none; a memory-streaming loop at idle priority beside it", [], "memory")]
    if only:
        setups = [setups[k] for k in only]
    try:
        for k, (label, cams, burner) in enumerate(setups):
            data = yaml.safe_load(SCENE.read_text())
            data["cameras"] = [{**data["cameras"][i], "rate": rate, "width": w, "height": h} for i, rate, w, h in cams]
            if not data["cameras"]:
                del data["cameras"]
            path = tmp / f"cameras_{k}.yaml"
            for env in data["environment"]:
                if "urdf" in env:
                    env["urdf"] = str(REPO / "urdf" / env["urdf"])
            for obj in data["objects"]:
                if "urdf" in obj:
                    obj["urdf"] = str(REPO / "urdf" / obj["urdf"])
            path.write_text(yaml.safe_dump(data))
            images.clear()
            other = start_burner(burner) if burner else None
            try:
                r = node_bench.measure(probe, engine, 1.0, str(path), 1e-3, duration, warmup, tag=f"_camera{k}",
                                       ros_args=() if thread_priority is None
                                       else ("-p", f"thread_priority:={thread_priority}"))
            finally:
                if other is not None:
                    other.kill()
                    other.wait()
            n_images = sum(1 for t in images if t > time.monotonic() - duration - 5)
            r["camera"] = label
            r["images_hz"] = n_images / 2 / (duration + 5)      # color + depth per frame, over the last duration + 5 s
            rows.append(r)
    finally:
        probe.close()
        rclpy.shutdown()
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--engine", default="tamsi")
    ap.add_argument("--no-node", action="store_true", help="only the in-process render times")
    ap.add_argument("--setups", default="", help="comma-separated indices of the node set-ups to run (default all: "
                    "0 none, 1 640x480 at 15 Hz, 2 at 30 Hz, 3 1280x720 at 15 Hz, 4 two cameras, 5 no camera and a "
                    "compute loop at idle priority, 6 no camera and a memory-streaming loop at idle priority)")
    ap.add_argument("--thread-priority", type=int, default=None, help="the node's thread_priority (default: "
                    "the node's, 0: normal scheduling; 50: SCHED_FIFO while on time)")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    rows = render_times(args.frames)
    print(f"\nRender time per frame (ms, median / p95 of {args.frames} frames; {rows[0]['triangles']} triangles; "
          f"{rows[0]['gl']}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f})\n")
    print("| image | render (GL pass + read-back) | D435 depth model | messages (4 images + cloud) | total | "
          "total CPU (all threads) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['size']} | " + " | ".join(f"{r[k][0]:.1f} / {r[k][1]:.1f}"
                                              for k in ("render", "depth", "msgs", "total", "cpu")) + " |")
    if args.no_node:
        return 0
    load0 = os.getloadavg()[0]
    runs = node_runs(args.engine, args.duration, args.warmup,
                     [int(k) for k in args.setups.split(",")] if args.setups else None, args.thread_priority)
    print(f"\nNode (iiwa_wsg_cameras scene, {args.engine}, 1 ms steps, real time, thread_priority "
          f"{'default' if args.thread_priority is None else args.thread_priority}; {args.duration:g} s after "
          f"{args.warmup:g} s; load average {load0:.1f} -> {os.getloadavg()[0]:.1f})\n")
    print("| cameras | real-time factor | frames received /s | joint_states jitter at subscriber (ms) | "
          "node step-period jitter (ms) | node CPU % | camera process CPU % | node CPU ms per step | "
          "stepping thread CPU ms per step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r['camera']} | {r['rtf']:.3f} | {r['images_hz']:.1f} | {r['jitter_sub_ms']:.2f} | "
              f"{r['jitter_node_ms']:.3f} | {r['cpu_pct']:.0f} | {r['children_cpu_pct']:.0f} | "
              f"{r['cpu_ms_per_step']:.3f} | {r['thread_ms_per_step']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
