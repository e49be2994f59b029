"""Benchmark: the ROS 2 simulation node as a user sees it, measured by a subscriber in another process.

    python benchmarks/node/run.py [--engines tamsi lagged] [--duration 20] [--warmup 3]
                                  [--scene test/ros/scenes/iiwa_wsg_bottle_hold.yaml]
                                  [--memory-minutes 10] [--startup [--startup-repeats 3]]
                                  [--record [--record-repeats 3]] [--parts] [--swaps 3]
                                  [--sigint [--sigint-repeats 5]]

For each engine, starts ``sim_node`` (iiwa_wsg, time step 1 ms) in a subprocess, twice: paced to the wall clock
(real_time_factor 1) and as fast as possible (real_time_factor 0). This process subscribes to /joint_states,
/tf and /diagnostics and reports, over ``--duration`` s after ``--warmup`` s:

* real-time factor: sim time advanced (joint_states stamps) / wall time (targets: >= 1.0 in real-time mode);
* /joint_states and /tf rates received (targets: >= 500 Hz and >= 100 Hz), and the share of the /joint_states
  publications received (their stamps: one every 1 / joint_states_rate of sim time; as fast as possible beyond
  ~4 kHz this Python subscriber falls behind and loses some);
* step jitter: the node's standard deviation of the step-start period (diagnostics, ms) and the inter-arrival
  standard deviation of /joint_states at the subscriber (ms);
* CPU use of the node process (utime + stime from /proc, % of one core), CPU time per simulated step and the
  real-time factor that implies with one free core, the stepping thread's own CPU time per step (diagnostics
  ``step_cpu_mean_ms``), and step overruns per second;
* resident memory of the node at the start and end of the window (MB).

``--startup`` measures instead the time from starting the ``sim_node`` process to the first /joint_states
this process receives, per engine: once with an empty compiled-kernel cache (``NUMBA_CACHE_DIR`` a new
temporary folder: the kernels compile on the first step, as on a machine where ``make venv`` never filled the
cache) and ``--startup-repeats`` times with the shared cache filled (``python -m contact_sim_ros.kernel_cache`` first;
target <= 3 s), and whether the node's log announced the compilation ("compiling kernels, first start only").

``--record`` measures instead what recording (``record:=PATH``, contact_sim_ros/ros/bag_recorder.py) costs:
the time per message of ``publish(msg)``, of ``serialize_message(msg)``, of ``publish(bytes)`` and of a tapped
publisher's ``publish(msg)`` (serialize + publish the bytes + enqueue; the publishing thread's CPU time) for the
messages the node publishes (iiwa_wsg sizes, no subscriber), and the node's CPU time per step without and with
recording (first engine, real time, ``--record-repeats`` pairs, the two interleaved so the machine's load hits
both alike; the bag is deleted after each run).

``--parts`` measures instead, in this process, what each part of a step costs the stepping thread (iiwa_wsg, first
engine, a ``SimNode`` paused, this thread's CPU time per call, best of 3 runs of 2000 calls, a subscription on
/joint_states and /tf as in the other modes: the node builds and writes only the messages of topics someone reads):
the physics step, commands + controllers + gravity compensation, each publish hook, and per step with the hooks'
rates. Parts timed alone, hot in the caches: the running loop costs more (see docs/benchmarks/earlier.md).

``--swaps N`` measures instead what swapping the model costs afterwards (issue 16; this was a timed assertion in
test_simulation_interfaces before): the Franka node (first engine, real time, ``MALLOC_ARENA_MAX=1``), its
stepping thread's CPU per step (median of ``--duration`` one-second diagnostics windows) fresh, then after each of
N cycles of 20 boxes spawned one by one through simulation_interfaces and deleted again (40 model swaps per
cycle), with the node's resident size after each cycle. Target: after the swaps within 10 % of after the first
cycle (the first cycle's one-time costs: executor, action and service paths run once).

``--sigint`` measures instead how long the node takes to exit after one SIGINT (issue 31: within 2 s at any
moment; ``ros2 launch`` escalates to SIGTERM after 5 s), ``--sigint-repeats`` times for each moment: during the
imports (0.3 s after the start), while the Simulator and the controllers are built (at the first line the node
logs), and while it simulates (after the first /joint_states); the exit code and whether a traceback was printed.

``--memory-minutes M`` adds a paced run of M minutes sampling the node's resident size every 5 s (target:
growth < 5 MB after the first minute of warm-up). Plots go to benchmarks/node/out/*.png (matplotlib Agg).
ROS_DOMAIN_ID is set to a value unique to this run unless already set.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("ROS_DOMAIN_ID", str(101 + os.getpid() % 100))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

try:
    from tf2_msgs.msg import TFMessage  # noqa: E402
except ImportError:
    TFMessage = None

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "out"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK   # utime + stime


def descendants(pid: int) -> list[int]:
    """The process's children, grandchildren, ... (the camera process, the viewer process)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def children_cpu_s(pid: int) -> dict[int, float]:
    out = {}
    for child in descendants(pid):
        try:
            out[child] = proc_cpu_s(child)
        except OSError:
            pass
    return out


def proc_rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of a process (MB); ``field`` "VmHWM": its peak since it started."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


class Probe:
    def __init__(self):
        self.node = Node("contact_sim_node_benchmark")
        self.js_wall, self.js_sim = [], []
        self.tf_wall = []
        self.diag = []
        self.node.create_subscription(JointState, "/joint_states", self._js, 100)
        if TFMessage is not None:
            self.node.create_subscription(TFMessage, "/tf", lambda m: self.tf_wall.append(time.monotonic()), 100)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diag, 10)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _js(self, msg):
        self.js_wall.append(time.monotonic())
        self.js_sim.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)

    def _diag(self, msg):
        self.diag.append((time.monotonic(), {kv.key: kv.value for kv in msg.status[0].values}))

    def _spin(self):
        while not self.stop:
            self.executor.spin_once(timeout_sec=0.05)

    def reset(self):
        self.js_wall, self.js_sim, self.tf_wall, self.diag = [], [], [], []

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.node.destroy_node()


def start_node(engine, rtf, scene, dt, env=None, tag="", ros_args=(), robot="iiwa_wsg"):
    args = [sys.executable, "-m", "contact_sim_ros.ros.sim_node", "--engine", engine, "--time-step", str(dt),
            "--real-time-factor", str(rtf)]
    args += ["--scene", scene] if scene else ["--robot", robot]
    args += ["--ros-args", *ros_args] if ros_args else []
    log = open(OUT / f"node_{engine}_rtf{rtf}{tag}.log", "w")
    return subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}), log


def stop_node(proc, log):
    from contact_sim_ros.scenarios.runner import stop_node_process
    stop_node_process(proc)
    log.close()


def wait_for(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def measure(probe, engine, rtf, scene, dt, duration, warmup, ros_args=(), tag=""):
    probe.reset()   # messages of the previous node must not count as this one's start
    proc, log = start_node(engine, rtf, scene, dt, tag=tag, ros_args=ros_args)
    try:
        if not wait_for(lambda: len(probe.js_wall) > 10 or proc.poll() is not None, 120) or proc.poll() is not None:
            raise RuntimeError(f"node did not start: see {log.name}")
        time.sleep(warmup)
        probe.reset()
        cpu0, rss0, w0 = proc_cpu_s(proc.pid), proc_rss_mb(proc.pid), time.monotonic()
        kids0 = children_cpu_s(proc.pid)
        time.sleep(duration)
        cpu1, rss1, w1 = proc_cpu_s(proc.pid), proc_rss_mb(proc.pid), time.monotonic()
        kids1 = children_cpu_s(proc.pid)
        peak = proc_rss_mb(proc.pid, "VmHWM")
        js_wall, js_sim, tf_wall, diag = (list(probe.js_wall), list(probe.js_sim), list(probe.tf_wall),
                                          list(probe.diag))
    finally:
        stop_node(proc, log)
    wall = w1 - w0
    rtf_meas = (js_sim[-1] - js_sim[0]) / (js_wall[-1] - js_wall[0]) if len(js_sim) > 1 else float("nan")
    gaps = np.diff(js_wall) * 1e3

    def diag_mean(key):
        vals = [float(d[key]) for _, d in diag if key in d and d[key] not in ("nan", "")]
        return float(np.nanmean(vals)) if vals else float("nan")
    overruns = [int(d["step_overruns"]) for _, d in diag if "step_overruns" in d]
    sim_advance = js_sim[-1] - js_sim[0] if len(js_sim) > 1 else float("nan")
    # CPU per simulated step: independent of how much CPU the machine's other load leaves the node
    cpu_per_step = (cpu1 - cpu0) / (sim_advance / dt) if sim_advance > 0 else float("nan")
    return {
        "engine": engine, "mode": "real time" if rtf > 0 else "as fast as possible",
        "rtf": rtf_meas, "js_hz": len(js_wall) / wall, "tf_hz": len(tf_wall) / wall,
        "js_received": (len(js_sim) - 1) / max(round(sim_advance / float(np.median(np.diff(js_sim)))), 1)
        if len(js_sim) > 2 else float("nan"),
        "jitter_node_ms": diag_mean("step_period_jitter_ms"), "step_ms": diag_mean("step_time_mean_ms"),
        "jitter_sub_ms": float(np.std(gaps)) if len(gaps) else float("nan"),
        "cpu_pct": 100.0 * (cpu1 - cpu0) / wall,
        # its child processes (camera, viewer) over the same interval
        "children_cpu_pct": 100.0 * sum(kids1[k] - kids0[k] for k in kids1 if k in kids0) / wall,
        "cpu_ms_per_step": 1e3 * cpu_per_step, "rtf_one_core": dt / cpu_per_step,
        "thread_ms_per_step": diag_mean("step_cpu_mean_ms"),
        "overruns_per_s": (overruns[-1] - overruns[0]) / max(diag[-1][0] - diag[0][0], 1e-9) if len(overruns) > 1
        else float("nan"),
        "rss0": rss0, "rss1": rss1, "peak": peak, "gaps": gaps, "js_wall": np.array(js_wall) - w0,
        "js_sim": np.array(js_sim),
    }


def startup(probe, engine, scene, dt, cache=None):
    """Seconds from starting the node process to the first /joint_states received; ``cache``: NUMBA_CACHE_DIR
    for the node (None: the shared cache). Returns (seconds, CPU seconds of the node by then, announced estimate
    in s or None)."""
    probe.reset()
    env = {"NUMBA_CACHE_DIR": cache} if cache else None
    t0 = time.monotonic()
    proc, log = start_node(engine, 1.0, scene, dt, env=env, tag="_cold" if cache else "_warm")
    try:
        if not wait_for(lambda: probe.js_wall or proc.poll() is not None, 300) or not probe.js_wall:
            raise RuntimeError(f"node did not publish joint states: see {log.name}")
        first = probe.js_wall[0] - t0
        cpu = proc_cpu_s(proc.pid)     # CPU the node used until then (+ <= 50 ms of polling): load-independent
    finally:
        stop_node(proc, log)
    match = re.search(r"compiling kernels, first start only: ~(\d+) s", Path(log.name).read_text())
    return first, cpu, (float(match.group(1)) if match else None)


def startup_table(probe, engines, scene, dt, repeats):
    rows = []
    for engine in engines:
        subprocess.run([sys.executable, "-m", "contact_sim_ros.kernel_cache", "--engines", engine], cwd=REPO,
                       check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)    # the shared cache filled
        with tempfile.TemporaryDirectory(prefix="numba_cold_") as empty:
            load = os.getloadavg()[0]
            seconds, cpu, note = startup(probe, engine, scene, dt, cache=empty)
            rows.append((engine, "empty (cold)", [seconds], [cpu], note, load))
        load = os.getloadavg()[0]
        warm = [startup(probe, engine, scene, dt) for _ in range(repeats)]
        rows.append((engine, "filled (warm)", [w[0] for w in warm], [w[1] for w in warm], warm[0][2], load))
    print(f"\nsim_node start -> first /joint_states (iiwa_wsg{' + ' + scene if scene else ''}, time step "
          f"{dt * 1e3:g} ms, real time), {os.cpu_count()} CPUs")
    head = f"{'engine':8} {'kernel cache':14} {'median s':>9} {'min s':>6} {'max s':>6} {'CPU s':>6} {'runs':>4} " \
           f"{'announced':>10} {'load':>5}"
    print(head)
    print("-" * len(head))
    for engine, cache, times, cpus, note, load in rows:
        print(f"{engine:8} {cache:14} {np.median(times):9.2f} {min(times):6.2f} {max(times):6.2f} "
              f"{np.median(cpus):6.2f} {len(times):4d} {'~%g s' % note if note is not None else 'no':>10} {load:5.1f}")
    print("target: <= 3 s with the cache filled (make venv); CPU s: the node's CPU time until its first "
          "/joint_states (median; independent of the machine's other load); 'announced': the node's log line "
          "'compiling kernels, first start only: ~N s' (N its estimate); load: 1-min load average before the runs")
    return rows


def _node_messages():
    """The messages sim_node publishes, with iiwa_wsg's sizes: (name, publisher topic, message)."""
    from builtin_interfaces.msg import Time
    from control_msgs.msg import DynamicJointState, InterfaceValue
    from geometry_msgs.msg import TransformStamped, WrenchStamped
    from rosgraph_msgs.msg import Clock

    from contact_sim_msgs.msg import Contact, ContactArray
    names = [f"iiwa_joint_{i}" for i in range(1, 8)] + ["wsg_finger_left_joint", "wsg_finger_right_joint"]
    js = JointState(name=names, position=[0.1] * 9, velocity=[0.2] * 9, effort=[0.3] * 9)
    js.header.stamp = Time(sec=12, nanosec=345_000_000)
    tf = TFMessage(transforms=[TransformStamped() for _ in range(11)])
    for k, t in enumerate(tf.transforms):
        t.header.frame_id, t.child_frame_id = f"iiwa_link_{k}", f"iiwa_link_{k + 1}"
        t.transform.rotation.w = 1.0
    wrench = WrenchStamped()
    wrench.header.frame_id = "ft_sensor"
    dyn = DynamicJointState(joint_names=names, interface_values=[
        InterfaceValue(interface_names=["position", "velocity", "effort"], values=[0.1, 0.2, 0.3]) for _ in names])
    contacts = ContactArray(contacts=[Contact(body_a="wsg_finger_left", body_b="bottle", geometry_a="g_a",
                                              geometry_b="g_b", normal_force=5.0) for _ in range(4)])
    return [("JointState (9 joints)", JointState, js), ("TFMessage (11 transforms)", TFMessage, tf),
            ("WrenchStamped", WrenchStamped, wrench), ("Clock", Clock, Clock()),
            ("DynamicJointState (9 joints)", DynamicJointState, dyn), ("ContactArray (4 contacts)", ContactArray,
                                                                       contacts)]


def record_costs(n=5000):
    """us of the calling thread's CPU per message: publish(msg), serialize_message(msg), publish(bytes), a tapped
    publisher's publish(msg); and the writer thread's share (process CPU of the tapped run minus the caller's)."""
    from rclpy.serialization import serialize_message

    from contact_sim_ros.ros.bag_recorder import BagRecorder
    node = Node("contact_sim_record_benchmark")
    rows = []
    with tempfile.TemporaryDirectory(prefix="record_bench_") as tmp:
        recorder = BagRecorder(Path(tmp) / "bag")
        for k, (label, cls, msg) in enumerate(_node_messages()):
            plain = node.create_publisher(cls, f"bench_plain_{k}", 10)
            tapped = node.create_publisher(cls, f"bench_tapped_{k}", 10)
            recorder.tap(tapped)
            data = serialize_message(msg)

            def per_msg(fn, arg):
                fn(arg)
                while recorder.queued:                 # the writer idle: its CPU counts for this run only
                    time.sleep(0.01)
                t0, c0 = time.thread_time(), time.process_time()
                for _ in range(n):
                    fn(arg)
                t1 = time.thread_time()
                while recorder.queued:
                    time.sleep(0.01)
                c1 = time.process_time()
                return 1e6 * (t1 - t0) / n, 1e6 * (c1 - c0) / n
            pub_us = per_msg(plain.publish, msg)[0]
            ser_us = per_msg(serialize_message, msg)[0]
            raw_us = per_msg(plain.publish, data)[0]
            tap_us, tap_proc_us = per_msg(tapped.publish, msg)
            rows.append((label, len(data), pub_us, ser_us, raw_us, tap_us, tap_proc_us - tap_us))
        recorder.close()
    node.destroy_node()
    return rows


def record_table(probe, engine, scene, dt, duration, warmup, repeats):
    load0 = os.getloadavg()[0]
    costs = record_costs()
    print(f"\nper message, us of CPU of the publishing thread (no subscriber; load average {load0:.1f})")
    head = f"{'message':30} {'CDR B':>6} {'publish':>8} {'serialize':>9} {'pub bytes':>9} {'tapped':>7} {'writer':>7}"
    print(head)
    print("-" * len(head))
    for label, size, pub_us, ser_us, raw_us, tap_us, writer_us in costs:
        print(f"{label:30} {size:6d} {pub_us:8.1f} {ser_us:9.1f} {raw_us:9.1f} {tap_us:7.1f} {writer_us:7.1f}")
    print("tapped = serialize + publish(bytes) + enqueue (what a recorded publish costs the stepping thread); writer "
          "= the writer thread's CPU per message (stamp, MCAP write), on the other core when there is one")
    rows = []
    with tempfile.TemporaryDirectory(prefix="record_bench_") as tmp:
        for k in range(repeats):
            for record in (False, True):
                ros_args = ["-p", f"record:={Path(tmp) / f'bag{k}'}"] if record else []
                load = os.getloadavg()[0]
                r = measure(probe, engine, 1.0, scene, dt, duration, warmup, ros_args=ros_args,
                            tag="_record" if record else "")
                rows.append((k, record, r["cpu_ms_per_step"], r["rtf"], r["js_hz"], load))
    print(f"\nsim_node CPU per step without and with record:=PATH ({engine}, iiwa_wsg, real time, {duration:g} s "
          f"windows, interleaved)")
    head = f"{'pair':>4} {'record':>6} {'CPU ms/step':>11} {'RTF':>6} {'js Hz':>7} {'load':>5}"
    print(head)
    print("-" * len(head))
    for k, record, cpu, rtf, hz, load in rows:
        print(f"{k:4d} {'yes' if record else 'no':>6} {cpu:11.3f} {rtf:6.3f} {hz:7.1f} {load:5.1f}")
    off = [r[2] for r in rows if not r[1]]
    on = [r[2] for r in rows if r[1]]
    print(f"median CPU ms/step: without {np.median(off):.3f}, with {np.median(on):.3f} "
          f"({100.0 * (np.median(on) / np.median(off) - 1.0):+.1f} %)")
    return costs, rows


def memory_run(probe, engine, scene, dt, minutes):
    probe.reset()
    proc, log = start_node(engine, 1.0, scene, dt)
    samples = []
    try:
        if not wait_for(lambda: len(probe.js_wall) > 10 or proc.poll() is not None, 120) or proc.poll() is not None:
            raise RuntimeError(f"node did not start: see {log.name}")
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60.0 * minutes:
            samples.append((time.monotonic() - t0, proc_rss_mb(proc.pid)))
            probe.reset()   # the probe's own lists must not grow either
            time.sleep(5.0)
    finally:
        stop_node(proc, log)
    return np.array(samples)


def parts_table(engine, scene, dt, n=2000):
    """In-process CPU time per call of each part of a step (module docstring, ``--parts``)."""
    from contact_sim_ros.driver.node_config import default_param_files, read_param_files
    from contact_sim_ros.ros.sim_node import SimNode
    defaults = read_param_files(default_param_files("iiwa_wsg"), "contact_sim")
    defaults.update(engine=engine, time_step=dt, start_paused=True, real_time_factor=0.0)
    if scene:
        defaults["scene"] = str(Path(scene).resolve())
    node = SimNode(param_defaults=defaults)
    probe = Node("contact_sim_parts_probe")
    probe.create_subscription(JointState, "/joint_states", lambda m: None, 10)
    if TFMessage is not None:
        probe.create_subscription(TFMessage, "/tf", lambda m: None, 10)
    time.sleep(1.0)                                  # matched (same process)
    loop, sim = node.loop, node.sim
    for _ in range(300):
        loop.step_now()

    def per_call(fn, calls=n):
        best = float("inf")
        for _ in range(3):
            t0 = time.thread_time()
            for _ in range(calls):
                fn()
            best = min(best, (time.thread_time() - t0) / calls)
        return 1e6 * best
    rows = [("Simulator.step (physics)", 1.0, per_call(sim.step)),
            ("commands + controllers + gravity compensation", 1.0, per_call(loop._cycle))]
    rows += [(f"hook {h.name} (every {h.every})", 1.0 / h.every,
              per_call(lambda h=h: h.fn(sim), max(n // h.every, 200))) for h in loop.hooks]
    load = os.getloadavg()[0]
    loop.stop()
    probe.destroy_node()
    node.destroy_node()
    print(f"\nparts of a step, in-process (iiwa_wsg{' + ' + scene if scene else ''}, {engine}, dt {dt * 1e3:g} ms, "
          f"subscriptions on /joint_states and /tf; load average {load:.1f})")
    head = f"{'part':52} {'us per call':>11} {'us per step':>11}"
    print(head)
    print("-" * len(head))
    for name, rate, us in rows:
        print(f"{name:52} {us:11.2f} {us * rate:11.2f}")
    print(f"{'sum':52} {'':>11} {sum(us * rate for _, rate, us in rows):11.2f}")
    print("each part timed alone, 2000 calls in a row (best of 3, this thread's CPU time): hot in the caches; the "
          "running loop costs more per step")
    return rows


def swaps_table(probe, engine, dt, cycles, duration):
    """The stepping thread's CPU per step before and after model swaps (see the module docstring)."""
    from geometry_msgs.msg import PoseStamped
    from simulation_interfaces.srv import DeleteEntity, SpawnEntity

    def thread_ms(windows):
        k, windows = len(probe.diag), int(windows)
        if not wait_for(lambda: len(probe.diag) >= k + windows, 30 + 2 * windows):
            raise RuntimeError("no diagnostics from the node")
        return float(np.median([float(d["step_cpu_mean_ms"]) for _, d in probe.diag[k:k + windows]]))

    def call(client, request):
        future = client.call_async(request)
        if not wait_for(future.done, 60):
            raise RuntimeError(f"{client.srv_name} did not answer")
        return future.result()

    proc, log = start_node(engine, 1.0, "", dt, env={"MALLOC_ARENA_MAX": "1"}, tag="_swaps", robot="franka")
    spawn = probe.node.create_client(SpawnEntity, "/spawn_entity")
    delete = probe.node.create_client(DeleteEntity, "/delete_entity")
    rows = []
    try:
        if not wait_for(lambda: len(probe.js_wall) > 10 or proc.poll() is not None, 120) or proc.poll() is not None:
            raise RuntimeError(f"node did not start: see {log.name}")
        spawn.wait_for_service(timeout_sec=30)
        delete.wait_for_service(timeout_sec=30)
        rows.append(("fresh", thread_ms(duration), proc_rss_mb(proc.pid)))
        uri = "primitive://box?size=0.04,0.04,0.04&mass=0.1&friction=1.0"
        for cycle in range(cycles):
            for k in range(20):
                pose = PoseStamped()
                pose.pose.position.x, pose.pose.position.y = -0.45 - 0.12 * (k % 5), -0.25 + 0.15 * (k // 5)
                pose.pose.position.z = 0.02
                res = call(spawn, SpawnEntity.Request(name=f"box_{k}", uri=uri, initial_pose=pose))
                if res.result.result != 1:
                    raise RuntimeError(f"spawn box_{k}: {res.result.error_message}")
            for k in range(20):
                call(delete, DeleteEntity.Request(entity=f"box_{k}"))
            rows.append((f"after cycle {cycle + 1} ({40 * (cycle + 1)} swaps)", thread_ms(duration),
                         proc_rss_mb(proc.pid)))
    finally:
        stop_node(proc, log)
    print(f"\nsim_node (franka, {engine}, real time, time step {dt * 1e3:g} ms): the stepping thread's CPU per "
          f"step (median of {duration:g} one-second windows) around model swaps; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'state':28} {'thread ms/step':>14} {'vs cycle 1':>10} {'RSS MB':>7}")
    ref = rows[1][1] if len(rows) > 1 else rows[0][1]
    for name, ms, rss in rows:
        print(f"{name:28} {ms:14.3f} {100 * (ms / ref - 1):+9.1f}% {rss:7.1f}")
    print("target: after the swaps within 10 % of after the first cycle")


def sigint_table(probe, engine, dt, repeats):
    """Seconds from SIGINT to the node's exit at three moments of its life (see the module docstring)."""
    import signal
    rows = {"imports": [], "building": [], "simulating": []}
    bad = []
    for k in range(repeats):
        for moment in rows:
            probe.reset()
            proc, log = start_node(engine, 1.0, "", dt, tag=f"_sigint_{moment}")
            path = Path(log.name)
            try:
                if moment == "imports":
                    time.sleep(0.3)
                elif moment == "building":
                    wait_for(lambda: "[contact_sim]" in path.read_text() or proc.poll() is not None, 60)
                else:
                    wait_for(lambda: len(probe.js_wall) > 0 or proc.poll() is not None, 120)
                if proc.poll() is not None:
                    raise RuntimeError(f"the node ended before the signal: see {log.name}")
                t0 = time.monotonic()
                proc.send_signal(signal.SIGINT)
                proc.wait(30)
                rows[moment].append(time.monotonic() - t0)
            finally:
                stop_node(proc, log)
            out = path.read_text()
            if proc.returncode != 0 or "Traceback" in out:
                bad.append(f"{moment} #{k}: exit {proc.returncode}{', traceback' if 'Traceback' in out else ''}")
    print(f"\nsim_node (iiwa_wsg, {engine}, real time): seconds from one SIGINT to the exit, {repeats} runs per "
          f"moment; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'moment':12} {'median s':>9} {'max s':>7}")
    for moment, took in rows.items():
        print(f"{moment:12} {np.median(took):9.3f} {max(took):7.3f}")
    print("target: < 2 s at any moment (launch escalates at 5 s); exit 0 without a traceback: "
          + ("every run" if not bad else "NOT " + "; ".join(bad)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", nargs="+", default=["tamsi", "lagged"])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--time-step", type=float, default=1e-3)
    parser.add_argument("--scene", default="", help="scene YAML (default: iiwa_wsg on the ground)")
    parser.add_argument("--memory-minutes", type=float, default=0.0)
    parser.add_argument("--startup", action="store_true",
                        help="only measure start -> first /joint_states, kernel cache empty and filled")
    parser.add_argument("--startup-repeats", type=int, default=3, help="warm starts per engine (median)")
    parser.add_argument("--record", action="store_true",
                        help="only measure what record:=PATH costs: per message and the node's CPU per step")
    parser.add_argument("--record-repeats", type=int, default=3, help="interleaved pairs without/with record")
    parser.add_argument("--parts", action="store_true",
                        help="only measure in-process what each part of a step costs the stepping thread")
    parser.add_argument("--swaps", type=int, default=0, metavar="N",
                        help="only measure the CPU per step before and after N cycles of 20 spawns + 20 deletes")
    parser.add_argument("--sigint", action="store_true",
                        help="only measure SIGINT -> exit during the imports, the building and the simulation")
    parser.add_argument("--sigint-repeats", type=int, default=5)
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    if args.parts:
        from contact_sim_ros.driver.node_config import use_fastdds_writer_profile
        use_fastdds_writer_profile()                 # the node's writer profile, as sim_node's main() loads it
        rclpy.init()
        try:
            parts_table(args.engines[0], args.scene, args.time_step)
        finally:
            rclpy.shutdown()
        return
    rclpy.init()
    probe = Probe()
    rows = []
    if args.startup:
        try:
            startup_table(probe, args.engines, args.scene, args.time_step, args.startup_repeats)
        finally:
            probe.close()
            rclpy.shutdown()
        return
    if args.sigint:
        try:
            sigint_table(probe, args.engines[0], args.time_step, args.sigint_repeats)
        finally:
            probe.close()
            rclpy.shutdown()
        return
    if args.swaps:
        try:
            swaps_table(probe, args.engines[0], args.time_step, args.swaps, args.duration)
        finally:
            probe.close()
            rclpy.shutdown()
        return
    if args.record:
        try:
            record_table(probe, args.engines[0], args.scene, args.time_step, args.duration, args.warmup,
                         args.record_repeats)
        finally:
            probe.close()
            rclpy.shutdown()
        return
    try:
        for engine in args.engines:
            for rtf in (1.0, 0.0):
                rows.append(measure(probe, engine, rtf, args.scene, args.time_step, args.duration, args.warmup))
        mem = memory_run(probe, args.engines[0], args.scene, args.time_step, args.memory_minutes) \
            if args.memory_minutes > 0 else None
    finally:
        probe.close()
        rclpy.shutdown()

    print(f"\nsim_node, {args.scene or 'iiwa_wsg'}, time step {args.time_step * 1e3:g} ms, "
          f"{args.duration:g} s windows (subscriber in another process), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    head = (f"{'engine':8} {'mode':20} {'RTF':>6} {'js Hz':>7} {'js recv':>7} {'tf Hz':>6} {'step ms':>8} "
            f"{'jitter ms':>10} "
            f"{'sub jit ms':>10} {'CPU %':>6} {'CPU ms/step':>11} {'thread ms':>9} {'RTF 1 core':>10} {'overrun/s':>9} "
            f"{'RSS MB':>7} {'peak MB':>7}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['engine']:8} {r['mode']:20} {r['rtf']:6.3f} {r['js_hz']:7.1f} {100 * r['js_received']:6.1f}% "
              f"{r['tf_hz']:6.1f} "
              f"{r['step_ms']:8.3f} {r['jitter_node_ms']:10.3f} {r['jitter_sub_ms']:10.3f} {r['cpu_pct']:6.1f} "
              f"{r['cpu_ms_per_step']:11.3f} {r['thread_ms_per_step']:9.3f} {r['rtf_one_core']:10.2f} "
              f"{r['overruns_per_s']:9.1f} {r['rss1']:7.1f} {r['peak']:7.1f}")
    print("targets (real time): RTF >= 1.0, /joint_states >= 500 Hz, /tf >= 100 Hz. 'RTF 1 core' = time step / "
          "CPU time per step: the factor the node reaches with one free core (the measured RTF is lower when "
          "the machine's load leaves the node less than a core: compare CPU %); 'CPU ms/step' is the whole "
          "process's (every thread), 'thread ms' the stepping thread's alone (diagnostics step_cpu_mean_ms); "
          "'js recv': /joint_states messages received / published (from their stamps)")
    if mem is not None and len(mem):
        after = mem[mem[:, 0] >= 60.0]
        growth = after[-1, 1] - after[0, 1] if len(after) > 1 else float("nan")
        print(f"memory ({args.engines[0]}, real time, {args.memory_minutes:g} min): RSS {mem[0, 1]:.1f} -> "
              f"{mem[-1, 1]:.1f} MB; growth after the first minute {growth:+.2f} MB (target < 5 MB)")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for r in rows:
        if len(r["js_sim"]) < 2:
            continue
        label = f"{r['engine']}, {r['mode']}"
        axes[0].plot(r["js_wall"], r["js_sim"] - r["js_sim"][0], label=label)
        axes[1].hist(np.clip(r["gaps"], 0, 20), bins=80, histtype="step", label=label)
    axes[0].plot([0, args.duration], [0, args.duration], "k--", lw=0.8, label="real time")
    axes[0].set_xlabel("wall time (s)")
    axes[0].set_ylabel("sim time (s)")
    axes[0].legend(fontsize=7)
    axes[1].set_xlabel("/joint_states inter-arrival (ms, clipped at 20)")
    axes[1].set_yscale("log")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "node_realtime.png", dpi=120)
    print(f"plots: {OUT / 'node_realtime.png'}", end="")
    if mem is not None and len(mem):
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(mem[:, 0] / 60.0, mem[:, 1])
        ax.set_xlabel("minutes")
        ax.set_ylabel("node resident size (MB)")
        fig.tight_layout()
        fig.savefig(OUT / "node_memory.png", dpi=120)
        print(f", {OUT / 'node_memory.png'}", end="")
    print()


if __name__ == "__main__":
    main()
