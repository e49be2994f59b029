"""Grasp-validation campaigns: many randomized trials of a scenario, run in process on Ray, streamed to Parquet.

A campaign file (YAML; example: ``scenes/campaigns/pick_shake_place.yaml``)::

    scenario: pick_shake_place          # contact_sim_ros.scenarios.runner.SCENARIOS
    engines: [tamsi, lagged]            # every trial runs on each engine (engine agreement in the report)
    trials: 200
    seed: 7                             # trial k's parameters come from numpy's default_rng([seed, k])
    time_step: 0.002                    # s (optional: the scenario's)
    controller: {motion_time: 0.5}      # fixed controller parameters (optional)
    parameters:                         # randomized, one distribution each
      object.bottle.x: {normal: {mean: 0.0, std: 0.005}}            # m, offset of the initial position
      object.bottle.yaw: {uniform: [-0.3, 0.3]}                     # rad about z
      object.bottle.mass_scale: {truncated_normal: {mean: 1.0, std: 0.1, low: 0.7, high: 1.3}}
      object.bottle.friction: {uniform: [0.6, 1.2]}                 # Coulomb coefficient of the object
      controller.grip_force: {choice: [15.0, 20.0, 25.0]}           # N (any field of the scenario's Params)
      sensor.ft_noise_std: {uniform: [0.0, 0.5]}                    # N, Gaussian noise on the wrist F/T

Parameter names: ``object.<name>.{x,y,z,yaw}`` (m, rad: offsets of the object's initial pose),
``object.<name>.{mass_scale,friction,size_scale}`` (size_scale: primitive shapes only), ``controller.<field>``,
``sensor.ft_noise_std``. Distributions: a number (constant), ``{uniform: [low, high]}``,
``{normal: {mean, std}}``, ``{truncated_normal: {mean, std, low, high}}``, ``{choice: [a, b, ...]}``.

Trial k is reproducible alone: its parameters depend only on (seed, k), and the physics is deterministic, so
``--trial K`` reruns it bit-identically. Results stream to ``<out>/results/part-*.parquet`` as trials finish
(one row per trial and engine: parameters, verdict, failure mode, phase, key numbers, wall time); an
interrupted campaign resumes from the rows already written.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from ..controllers.inprocess_link import InProcessLink
from ..controllers.pick_shake_place import run_controller
from ..engines.registry import engine_names
from ..errors import ConfigError
from ..model.loader import _resolve_urdf_path
from ..viewer.run_controls import pace, publish_if_due, serve_until_interrupted, viewer_controls
from ..viewer.scene_viewer import ViewerProcess
from ..yaml_files import check_keys, load_yaml, read_mapping
from .runner import REPO, SCENARIOS, _load

FAILURE_MODES = ("missed", "dropped_during_lift", "dropped_during_shake", "dropped_during_place",
                 "solver_failure", "other")
# phase of the pick_shake_place controller at a failure -> failure mode
_MODE_OF_PHASE = {"approach": "missed", "descend": "missed", "close": "missed", "grasp": "missed",
                  "lift": "dropped_during_lift", "hold": "dropped_during_lift",
                  "shake": "dropped_during_shake", "after_shake": "dropped_during_shake",
                  "transfer": "dropped_during_place", "lower": "dropped_during_place",
                  "place": "dropped_during_place", "release": "dropped_during_place",
                  "retreat": "dropped_during_place"}


# ------------------------------------------------------------------------------------------- distributions

@dataclass(frozen=True)
class Distribution:
    """One randomized parameter: kind in constant, uniform, normal, truncated_normal, choice."""

    kind: str
    args: tuple

    @classmethod
    def parse(cls, value, where: str) -> "Distribution":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls("constant", (float(value),))
        if not isinstance(value, dict) or len(value) != 1:
            raise ConfigError(f"{where}: expected a number or one of {{uniform: [low, high]}}, {{normal: {{mean, "
                              f"std}}}}, {{truncated_normal: {{mean, std, low, high}}}}, {{choice: [...]}}; got "
                              f"{value!r}")
        kind, arg = next(iter(value.items()))
        try:
            if kind == "uniform":
                low, high = (float(x) for x in arg)
                if not low <= high:
                    raise ValueError
                return cls(kind, (low, high))
            if kind == "normal":
                check_keys(arg, ("mean", "std"), where)
                mean, std = float(arg["mean"]), float(arg["std"])
                if not std >= 0:
                    raise ValueError
                return cls(kind, (mean, std))
            if kind == "truncated_normal":
                check_keys(arg, ("mean", "std", "low", "high"), where)
                mean, std, low, high = (float(arg[k]) for k in ("mean", "std", "low", "high"))
                if not (std > 0 and low < high):
                    raise ValueError
                return cls(kind, (mean, std, low, high))
            if kind == "choice":
                options = tuple(arg)
                if not options:
                    raise ValueError
                return cls(kind, options)
        except (TypeError, ValueError, AttributeError):
            raise ConfigError(f"{where}: invalid {kind} arguments {arg!r}") from None
        raise ConfigError(f"{where}: unknown distribution {kind!r}; valid: uniform, normal, truncated_normal, "
                          f"choice (or a number)")

    def sample(self, rng: np.random.Generator):
        a = self.args
        if self.kind == "constant":
            return a[0]
        if self.kind == "uniform":
            return float(rng.uniform(a[0], a[1]))
        if self.kind == "normal":
            return float(rng.normal(a[0], a[1]))
        if self.kind == "truncated_normal":
            for _ in range(10000):                      # rejection sampling (documented bounds, exact law)
                x = rng.normal(a[0], a[1])
                if a[2] <= x <= a[3]:
                    return float(x)
            raise ConfigError(f"truncated_normal{a}: the bounds hold almost no probability mass")
        return a[int(rng.integers(len(a)))]


# ------------------------------------------------------------------------------------------- campaign spec

_KEYS = ("scenario", "engines", "trials", "seed", "time_step", "period", "duration", "controller", "parameters",
         "description")


@dataclass(frozen=True)
class CampaignSpec:
    source: str
    scenario: str
    engines: tuple
    trials: int
    seed: int
    parameters: dict                     # name -> Distribution (sorted by name)
    controller: dict = field(default_factory=dict)
    time_step: float | None = None
    period: float | None = None
    duration: float | None = None

    def trial_parameters(self, k: int) -> dict:
        """The randomized values of trial k (depend only on seed and k)."""
        rng = np.random.default_rng([self.seed, int(k)])
        return {name: dist.sample(rng) for name, dist in self.parameters.items()}


def load_campaign(path: str | Path) -> CampaignSpec:
    """Read and validate a campaign file; ConfigError names the file and the problem."""
    data = read_mapping(path, "a campaign")
    where = str(path)
    check_keys(data, _KEYS, where)
    scenario = data.get("scenario")
    if scenario not in SCENARIOS:
        raise ConfigError(f"{where}: scenario {scenario!r}; valid scenarios: {', '.join(SCENARIOS)}")
    engines = data.get("engines", ["tamsi"])
    engines = [engines] if isinstance(engines, str) else list(engines)
    unknown = [e for e in engines if e not in engine_names()]
    if not engines or unknown:
        raise ConfigError(f"{where}: engines {unknown or engines}; valid engines: {', '.join(engine_names())}")
    trials, seed = data.get("trials", 10), data.get("seed", 0)
    if not (isinstance(trials, int) and trials >= 1 and isinstance(seed, int) and seed >= 0):
        raise ConfigError(f"{where}: trials must be an integer >= 1 and seed an integer >= 0")
    params = {}
    for name, value in sorted((data.get("parameters") or {}).items()):
        _check_parameter_name(name, where)
        params[name] = Distribution.parse(value, f"{where}: parameters.{name}")
    controller = dict(data.get("controller") or {})
    numbers = {}
    for key in ("time_step", "period", "duration"):
        if data.get(key) is not None:
            try:
                numbers[key] = float(data[key])
            except (TypeError, ValueError):
                numbers[key] = float("nan")
            if not (numbers[key] > 0 and math.isfinite(numbers[key])):
                raise ConfigError(f"{where}: {key} must be a finite number > 0 s, got {data[key]!r}")
    return CampaignSpec(where, scenario, tuple(engines), trials, seed, params, controller, **numbers)


def _check_parameter_name(name: str, where: str) -> None:
    parts = name.split(".")
    ok = (parts[0] == "controller" and len(parts) == 2) or name == "sensor.ft_noise_std" or \
        (parts[0] == "object" and len(parts) == 3 and
         parts[2] in ("x", "y", "z", "yaw", "mass_scale", "friction", "size_scale"))
    if not ok:
        raise ConfigError(f"{where}: parameter {name!r}; valid names: object.<name>.{{x,y,z,yaw,mass_scale,friction,"
                          f"size_scale}}, controller.<field>, sensor.ft_noise_std")


# ------------------------------------------------------------------------------------------- one trial

def _scaled_urdf(path: Path, mass_scale: float, out_dir: Path) -> Path:
    """A copy of an object URDF with every link's mass and inertia scaled (same density distribution)."""
    root = ET.parse(path).getroot()
    for inertial in root.iter("inertial"):
        m = inertial.find("mass")
        if m is not None:
            m.set("value", repr(float(m.get("value")) * mass_scale))
        inertia = inertial.find("inertia")
        if inertia is not None:
            for k, v in inertia.attrib.items():
                inertia.set(k, repr(float(v) * mass_scale))
    for mesh in root.iter("mesh"):          # keep mesh paths valid from the copy's folder
        fn = mesh.get("filename", "")
        if fn and not fn.startswith(("package://", "file://", "/")):
            mesh.set("filename", str((path.parent / fn).resolve()))
    out = out_dir / f"{path.stem}_mass{mass_scale:.6f}.urdf"
    ET.ElementTree(root).write(out)
    return out


def trial_scene(scene_file: Path, values: dict, out_dir: Path) -> Path:
    """The scenario's scene with the trial's object parameters applied, written to ``out_dir``."""
    scene = load_yaml(scene_file.read_text()) or {}
    objects = {o.get("name"): o for o in scene.get("objects", [])}
    for name, value in values.items():
        parts = name.split(".")
        if parts[0] != "object":
            continue
        obj = objects.get(parts[1])
        if obj is None:
            raise ConfigError(f"campaign parameter {name!r}: the scene {scene_file} has no object {parts[1]!r}; "
                              f"objects: {sorted(objects)}")
        attr = parts[2]
        pose = obj.setdefault("pose", {})
        xyz = list(map(float, pose.get("xyz", [0, 0, 0])))
        if attr in ("x", "y", "z"):
            xyz["xyz".index(attr)] += float(value)
            pose["xyz"] = xyz
        elif attr == "yaw":
            rpy = list(map(float, pose.get("rpy", [0, 0, 0])))
            R = pin.rpy.rpyToMatrix(np.array(rpy))
            pose["rpy"] = pin.rpy.matrixToRpy(pin.rpy.rpyToMatrix(0.0, 0.0, float(value)) @ R).tolist()
        elif attr == "friction":
            obj.setdefault("material", {})["friction"] = float(value)
        elif attr == "mass_scale":
            if "urdf" in obj:
                src = _resolve_urdf_path(obj["urdf"], scene_file.parent)
                obj["urdf"] = str(_scaled_urdf(Path(src), float(value), out_dir))
            else:
                obj["mass"] = float(obj["mass"]) * float(value)
        elif attr == "size_scale":
            shape = obj.get("shape")
            if not isinstance(shape, dict):
                raise ConfigError(f"campaign parameter {name!r}: only primitive shapes can be scaled "
                                  f"(object {parts[1]!r} is {obj.get('urdf') or shape!r})")
            kind, dims = next(iter(shape.items()))
            obj["shape"] = {kind: [float(d) * float(value) for d in np.atleast_1d(dims)]}
    for obj in scene.get("objects", []):      # relative URDFs resolve against the original scene's folder
        if "urdf" in obj and not Path(obj["urdf"]).is_absolute():
            src = _resolve_urdf_path(obj["urdf"], scene_file.parent)
            obj["urdf"] = str(src) if src is not None else obj["urdf"]
    out = out_dir / f"scene_{abs(hash(tuple(sorted(values.items())))) % 10**12}.yaml"
    out.write_text(yaml.safe_dump(scene, sort_keys=False))
    return out


class TrialViewer:
    """The browser view of a trial rerun (``contact-sim campaign FILE --trial K --viewer``), as ``run_trial``'s
    ``on_period``: on the first control period it starts the viewer (``ViewerProcess`` on ``port``); after every
    period it applies the page's Pause / Resume (a trial cannot be reset: its controller has moved on), paces the
    trial to ``real_time_factor`` x the wall clock (0: as fast as possible) and hands the viewer a frame once per
    viewer update; the next engine's trial is drawn on the same page. It only reads the simulation, so the
    trial's row is the one without it. ``finish()``: keep the page up with the final state until Ctrl-C
    (``wait``), then close the viewer."""

    def __init__(self, port: int = 8080, real_time_factor: float = 1.0, out=None):
        self.port, self.real_time_factor = int(port), float(real_time_factor)
        self.out = out or sys.stdout
        self.viewer = self.sim = None
        self._pace_origin = self._frame_clock = None

    def __call__(self, sim) -> None:
        if sim is not self.sim:           # the trial's first period (or the next engine's trial: the same page)
            if self.viewer is None:
                self.viewer = ViewerProcess(sim.model, port=self.port)
                print(f"viewer: {self.viewer.url}", file=self.out, flush=True)
            else:
                self.viewer.use_scene(self.viewer.send_scene(sim.model))
            self.sim = sim
            now = time.perf_counter()
            self._pace_origin = now - (sim.t / self.real_time_factor if self.real_time_factor > 0 else 0.0)
            self._frame_clock = (now, sim.t)
        self._pace_origin = viewer_controls(self.viewer, sim, self.out, self._pace_origin, self.real_time_factor,
                                            resettable=False)
        pace(sim.t, self._pace_origin, self.real_time_factor)
        self._frame_clock = publish_if_due(self.viewer, sim, self._frame_clock, time.perf_counter())

    def finish(self, wait: bool) -> None:
        """The final state on the page; with ``wait`` served until Ctrl-C (or SIGTERM); then the viewer closes."""
        if self.viewer is None:
            return
        try:
            self.viewer.publish_simulator(self.sim)
            if wait:
                serve_until_interrupted(self.viewer, self.sim, self.out, None)
        finally:
            self.close()

    def close(self) -> None:
        if self.viewer is not None:
            self.viewer.close()
            self.viewer = None


def resident_mb() -> float:
    """This process's resident set size now (MB, from /proc/self/statm; NaN where there is no /proc)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


def failure_mode(success: bool, phase: str, failures: list) -> str:
    if success:
        return ""
    if failures:
        return "solver_failure"
    return _MODE_OF_PHASE.get(phase, "other")


def run_trial(spec: CampaignSpec, k: int, engine: str, values: dict | None = None, on_period=None) -> dict:
    """Trial k on ``engine``, in process; one result row (parameters, verdict, failure mode, numbers).
    ``values``: parameter values to use instead of trial k's (same names; e.g. a held-apart "real" cell with
    other friction or mass: the test data of ``campaign compare``). ``on_period(sim)``: called after every
    control period (``TrialViewer``: the browser view of the trial; it only reads the simulation)."""
    sc = SCENARIOS[spec.scenario]
    values = spec.trial_parameters(k) if values is None else dict(values)
    controller_params = {**spec.controller, **{n.split(".", 1)[1]: v for n, v in values.items()
                                               if n.startswith("controller.")}}
    wall0, cpu0 = time.monotonic(), time.process_time()
    row = {"trial": int(k), "engine": engine, "seed": int(spec.seed), **{f"p.{n}": v for n, v in values.items()}}
    with tempfile.TemporaryDirectory(prefix="contact_sim_trial_") as tmp:
        scene = trial_scene(REPO / sc.scene, values, Path(tmp))
        controller = _load(sc.factory)(_load(sc.params)(**controller_params))
        dt = spec.time_step or sc.time_step
        T = spec.period or sc.period
        link = InProcessLink(scene, engine, dt, T, ft_topic=getattr(controller, "ft_topic", None),
                             trajectory_controllers=controller.trajectory_controllers,
                             wrench_topics=getattr(controller, "wrench_topics", ()),
                             inactive_controllers=sc.inactive_controllers, engine_options=sc.engine_options,
                             ft_noise_std=float(values.get("sensor.ft_noise_std", 0.0)),
                             noise_seed=(spec.seed, int(k)), on_period=on_period)
        error = ""
        try:
            verdict = run_controller(controller, link, duration=spec.duration or sc.duration)
            success, reason, numbers = verdict.success, verdict.reason, dict(verdict.numbers)
        except Exception as exc:     # noqa: BLE001 - a trial that raises is a failed trial with its cause
            success, reason, numbers, error = False, f"{type(exc).__name__}: {exc}", {}, type(exc).__name__
        finally:
            link.close()
    phase = getattr(controller, "phase", "")
    row.update(success=bool(success), failure_mode=failure_mode(success, phase, link.failures) or
               ("other" if error else ""), phase=str(phase), reason=str(reason)[:500],
               solver_failures=len(link.failures), wall_time_s=time.monotonic() - wall0,
               sim_time_s=float(link.sim.t), cpu_time_s=time.process_time() - cpu0,
               worker_pid=os.getpid(), worker_rss_mb=resident_mb())
    for key, value in numbers.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            row[f"n.{key}"] = float(value)
    return row


# ------------------------------------------------------------------------------------------- the campaign

def results_dir(out: str | Path) -> Path:
    return Path(out) / "results"


def finished_trials(out: str | Path) -> set:
    """(trial, engine) pairs already in ``<out>/results/*.parquet`` (resume)."""
    import pyarrow.parquet as pq  # deferred: optional, pip only (no rosdep key)
    done = set()
    for part in sorted(results_dir(out).glob("part-*.parquet")):
        table = pq.read_table(part, columns=["trial", "engine"])
        done.update(zip(table.column("trial").to_pylist(), table.column("engine").to_pylist()))
    return done


def read_results(out: str | Path):
    """Every result row of a campaign as a pyarrow Table (columns: trial, engine, p.*, success, ...)."""
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    import pyarrow.parquet as pq  # deferred: optional, pip only (no rosdep key)
    parts = sorted(results_dir(out).glob("part-*.parquet"))
    if not parts:
        raise ConfigError(f"{out}: no results (results/part-*.parquet)")
    return pa.concat_tables([pq.read_table(p) for p in parts], promote_options="default")


class _PartWriter:
    """Rows to ``part-<n>.parquet`` files, one small file per flush, so that a crash loses at most the rows not
    yet flushed and a resumed campaign appends new parts."""

    def __init__(self, out: Path, flush_every: int = 8):
        self.dir = results_dir(out)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = []
        self.flush_every = flush_every
        self.n = len(list(self.dir.glob("part-*.parquet")))

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
        import pyarrow.parquet as pq  # deferred: optional, pip only (no rosdep key)
        if not self.rows:
            return
        table = pa.Table.from_pylist(self.rows)
        tmp = self.dir / f".part-{self.n:06d}.parquet.tmp"
        pq.write_table(table, tmp)
        tmp.rename(self.dir / f"part-{self.n:06d}.parquet")     # atomic: a part is whole or absent
        self.n += 1
        self.rows = []


def run_campaign(spec: CampaignSpec, out: str | Path, *, address: str | None = None, workers: int | None = None,
                 trials: int | None = None, progress: bool = True, max_retries: int = 2,
                 trial_fn=None, on_row=None) -> dict:
    """Run every (trial, engine) not yet in ``out`` as Ray tasks (local Ray by default; ``address`` or
    RAY_ADDRESS: an existing cluster), streaming rows to Parquet as trials finish. Returns a summary.
    ``on_row(row, n)``: called in the driver after each of the n rows recorded so far (e.g. to sample memory)."""
    import ray  # deferred: optional, pip only (no rosdep key)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "campaign.yaml").write_text(Path(spec.source).read_text())
    n_trials = spec.trials if trials is None else int(trials)
    done = finished_trials(out)
    todo = [(k, e) for k in range(n_trials) for e in spec.engines if (k, e) not in done]
    summary = {"done_before": len(done), "run": 0, "failed_tasks": 0, "lost": 0, "wall_s": 0.0}
    if not todo:
        return summary
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = address or os.environ.get("RAY_ADDRESS")
    started = False
    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        if address:
            ray.init(address=address, **kwargs)
        else:
            _init_local_ray(ray, num_cpus=workers or os.cpu_count(), **kwargs)
        started = True
    # a worker process that dies (killed, out of memory) loses only its trial: Ray retries the task
    task = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(trial_fn or run_trial)
    writer = _PartWriter(out)
    wall0 = time.monotonic()
    pending = {task.remote(spec, k, e): (k, e) for k, e in todo}
    bar = None
    if progress:
        from tqdm import tqdm  # deferred: optional, pip only (no rosdep key)
        bar = tqdm(total=len(todo), unit="trial", desc=f"{spec.scenario} campaign", dynamic_ncols=True)
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                k, e = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except Exception as exc:   # noqa: BLE001 - the worker died more than max_retries times
                    if _lost_with_its_node(exc):
                        summary["lost"] += 1           # not a trial result: no row, a rerun runs it
                        if bar is not None:
                            bar.update(1)
                        continue
                    summary["failed_tasks"] += 1
                    row = {"trial": k, "engine": e, "seed": spec.seed, "success": False, "failure_mode": "other",
                           "phase": "", "reason": f"task failed: {type(exc).__name__}: {str(exc)[:300]}",
                           "solver_failures": 0, "wall_time_s": float("nan"), "sim_time_s": float("nan"),
                           "cpu_time_s": float("nan"), "worker_pid": -1, "worker_rss_mb": float("nan"),
                           **{f"p.{n}": v for n, v in spec.trial_parameters(k).items()}}
                writer.add(row)
                summary["run"] += 1
                if on_row is not None:
                    on_row(row, summary["run"])
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(success=row["success"])
    finally:
        writer.flush()
        if bar is not None:
            bar.close()
        if started:
            ray.shutdown()
    summary["wall_s"] = time.monotonic() - wall0
    return summary


def _init_local_ray(ray, attempts: int = 3, **kwargs) -> None:
    """``ray.init`` of a local node, retried: Ray waits a fixed 30 s for its raylet to register, which a
    heavily loaded machine (load average 20-40 on 2 cores, measured) exceeds ("The current node timed out during
    startup")."""
    for attempt in range(attempts):
        try:
            ray.init(**kwargs)
            return
        except Exception as exc:   # noqa: BLE001 - Ray raises a bare Exception for this
            if "timed out during startup" not in str(exc) or attempt == attempts - 1:
                raise
            ray.shutdown()


def _lost_with_its_node(exc) -> bool:
    """The task did not run to an outcome because the Ray node under it died (its raylet killed, e.g. by
    ``ray stop`` of another user on the machine, or the machine lost): such trials are not recorded, so the same
    command reruns them. A worker process that crashed (WorkerCrashedError) more than max_retries times is a
    result of the trial (recorded as failure mode 'other')."""
    import ray.exceptions as rx  # deferred: optional, pip only (no rosdep key)
    return isinstance(exc, (rx.LocalRayletDiedError, rx.NodeDiedError, rx.RaySystemError, rx.ObjectLostError,
                            rx.OwnerDiedError))


# ------------------------------------------------------------------------------------------- the report

def value_order(v):
    """Sort key of parameter values: numbers numerically (8 before 12), then the others by their text."""
    numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
    return (0, float(v), "") if numeric else (1, 0.0, str(v))


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def report(out: str | Path, bins: int = 5, plots: bool = True) -> str:
    """Markdown report of a campaign's results (written to <out>/report.md, plots to <out>/plots/*.png)."""
    table = read_results(out)
    rows = table.to_pylist()
    engines = sorted({r["engine"] for r in rows})
    lines = [f"# Campaign report: {out}", "", f"{len(rows)} trial runs, engines: {', '.join(engines)}", "",
             "| engine | trials | successes | success rate | Wilson 95 % |", "| --- | --- | --- | --- | --- |"]
    for e in engines:
        rs = [r for r in rows if r["engine"] == e]
        s = sum(bool(r["success"]) for r in rs)
        lo, hi = wilson_interval(s, len(rs))
        lines.append(f"| {e} | {len(rs)} | {s} | {s / len(rs):.3f} | [{lo:.3f}, {hi:.3f}] |")
    lines += ["", "## Failure modes", "", "| engine | " + " | ".join(FAILURE_MODES) + " |",
              "| --- |" + " --- |" * len(FAILURE_MODES)]
    for e in engines:
        rs = [r for r in rows if r["engine"] == e]
        lines.append(f"| {e} | " + " | ".join(str(sum(r["failure_mode"] == m for r in rs)) for m in FAILURE_MODES)
                     + " |")
    by_trial: dict[int, dict] = {}
    for r in rows:
        by_trial.setdefault(r["trial"], {})[r["engine"]] = bool(r["success"])
    if len(engines) > 1:
        complete = [v for v in by_trial.values() if len(v) == len(engines)]
        agree = sum(len(set(v.values())) == 1 for v in complete)
        lines += ["", "## Engine agreement", "",
                  f"{agree} of {len(complete)} trials ({agree / max(len(complete), 1):.3f}) get the same verdict from "
                  f"every engine; the others mark grasps the simulation cannot decide: "
                  f"{sorted(k for k, v in by_trial.items() if len(v) == len(engines) and len(set(v.values())) > 1)[:20]}"]
    params = sorted(c for c in table.column_names if c.startswith("p."))
    if params:
        lines += ["", "## Success against each parameter", ""]
    if plots and params:
        import matplotlib  # deferred: matplotlib (~0.5 s to import), only for the plots
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # deferred: matplotlib (~0.5 s to import), only for the plots
        (Path(out) / "plots").mkdir(exist_ok=True)
    for name in params:
        values = np.array([r[name] for r in rows], dtype=object)
        numeric = all(isinstance(v, (int, float)) for v in values)
        lines.append(f"### {name[2:]}")
        lines += ["", "| bin | " + " | ".join(engines) + " |", "| --- |" + " --- |" * len(engines)]
        if numeric and len(set(values)) > bins:
            x = values.astype(float)
            edges = np.quantile(x, np.linspace(0, 1, bins + 1))
            labels = [f"[{edges[i]:.4g}, {edges[i + 1]:.4g}]" for i in range(bins)]
            which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
        else:
            keys = sorted(set(values), key=value_order)
            labels = [str(k) for k in keys]
            which = np.array([keys.index(v) for v in values])
        rates = {}
        for e in engines:
            sel = np.array([r["engine"] == e for r in rows])
            succ = np.array([bool(r["success"]) for r in rows])
            rates[e] = [(int(succ[sel & (which == b)].sum()), int((sel & (which == b)).sum()))
                        for b in range(len(labels))]
        for b, label in enumerate(labels):
            lines.append(f"| {label} | " + " | ".join(f"{s}/{n}" for s, n in (rates[e][b] for e in engines)) + " |")
        lines.append("")
        if plots:
            fig, ax = plt.subplots(figsize=(6, 3.5))
            for e in engines:
                p = [s / n if n else np.nan for s, n in rates[e]]
                ci = [wilson_interval(s, n) for s, n in rates[e]]
                ax.errorbar(range(len(labels)), p, yerr=np.clip([[pi - lo for pi, (lo, _) in zip(p, ci)],
                                                               [hi - pi for pi, (_, hi) in zip(p, ci)]], 0.0, None),
                            marker="o", capsize=3, label=e)
            ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
            ax.set_ylim(-0.05, 1.05)
            ax.set_ylabel("success rate (Wilson 95 %)")
            ax.set_title(name[2:])
            ax.legend()
            fig.tight_layout()
            fig.savefig(Path(out) / "plots" / f"{name[2:].replace('.', '_')}.png", dpi=100)
            plt.close(fig)
    text = "\n".join(lines) + "\n"
    (Path(out) / "report.md").write_text(text)
    return text


# ------------------------------------------------------------------------------------------- command line

def main(argv=None) -> int:
    """``contact-sim campaign CAMPAIGN.yaml [--out DIR] [--trials N] [--workers N] [--address A] [--trial K]``
    and ``contact-sim campaign report RESULTS_DIR`` (``contact-sim campaign compare`` is scenarios/compare.py's
    ``main``, which cli.py dispatches: compare reads the campaign's results, never the other way round)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        ap = argparse.ArgumentParser(prog="contact-sim campaign report")
        ap.add_argument("results", help="a campaign's output directory")
        ap.add_argument("--bins", type=int, default=5)
        ap.add_argument("--no-plots", action="store_true")
        args = ap.parse_args(argv[1:])
        try:
            print(report(args.results, bins=args.bins, plots=not args.no_plots))
        except ConfigError as exc:
            print(f"contact-sim campaign report: error: {exc}", file=sys.stderr)
            return 2
        return 0
    ap = argparse.ArgumentParser(prog="contact-sim campaign", description=__doc__.split("\n\n")[0])
    ap.add_argument("campaign", help="campaign YAML (see scenes/campaigns/)")
    ap.add_argument("--out", default=None, help="output directory (default: out/campaigns/<file stem>)")
    ap.add_argument("--trials", type=int, default=None, help="run only the first N trials (default: the file's)")
    ap.add_argument("--workers", type=int, default=None, help="local Ray workers (default: the CPUs)")
    ap.add_argument("--address", default=None, help="an existing Ray cluster (default: RAY_ADDRESS, else local)")
    ap.add_argument("--trial", type=int, default=None, help="rerun trial K alone (no Ray, nothing written) and "
                                                            "print its row")
    ap.add_argument("--engine", default=None, help="with --trial: only this engine")
    ap.add_argument("--viewer", action="store_true", help="with --trial: watch the trial in the browser viewer "
                    "(the same row as without it)")
    ap.add_argument("--viewer-port", type=int, default=8080)
    ap.add_argument("--real-time-factor", type=float, default=1.0,
                    help="with --viewer: pace the trial to this multiple of the wall clock (0: as fast as possible)")
    ap.add_argument("--exit-after-run", "--no-wait", dest="exit_after_run", action="store_true",
                    help="with --viewer: exit when the trial ends (default: keep the page up until Ctrl-C)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.viewer and args.trial is None:
        ap.error("--viewer watches one trial: give --trial K")
    if not (math.isfinite(args.real_time_factor) and args.real_time_factor >= 0):
        ap.error(f"--real-time-factor must be a finite number >= 0 (0: as fast as possible), got "
                 f"{args.real_time_factor}")
    try:
        spec = load_campaign(args.campaign)
        if args.trial is not None:
            watch = TrialViewer(args.viewer_port, args.real_time_factor) if args.viewer else None
            try:
                for e in ([args.engine] if args.engine else spec.engines):
                    row = run_trial(spec, args.trial, e, on_period=watch)
                    print({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
                if watch is not None:
                    watch.finish(wait=not args.exit_after_run)
            finally:
                if watch is not None:
                    watch.close()
            return 0
        out = args.out or str(Path("out") / "campaigns" / Path(args.campaign).stem)
        summary = run_campaign(spec, out, address=args.address, workers=args.workers, trials=args.trials,
                               progress=not args.no_progress)
        print(f"{summary['run']} trial run(s) in {summary['wall_s']:.1f} s ({summary['done_before']} already done, "
              f"{summary['failed_tasks']} failed tasks); results in {results_dir(out)}")
        if summary["lost"]:
            print(f"{summary['lost']} trial run(s) lost with their Ray node (not recorded): run the same command "
                  f"again to run them", file=sys.stderr)
        print(report(out))
    except ConfigError as exc:
        print(f"contact-sim campaign: error: {exc}", file=sys.stderr)
        return 2
    return 0
