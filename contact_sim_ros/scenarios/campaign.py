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
    pick_sources: [truth, perception]   # optional: every trial runs once per source of the object's pose

Parameter names: ``object.<name>.{x,y,z,yaw}`` (m, rad: offsets of the object's initial pose),
``object.<name>.{mass_scale,friction,size_scale}`` (size_scale: primitive shapes only), ``object.<name>.mesh``
(a mesh file, e.g. ``{choice: [mug.obj, bowl.obj, bottle.obj]}``: the object becomes that mesh object, with its
mass or density and pose; meshes/ is the object set; an option ``{mesh: part_mm.stl, scale: 0.001}`` (a number or
[sx, sy, sz], file units -> m) scales that file, its rows say ``part_mm.stl?scale=0.001``), ``controller.<field>``,
``sensor.ft_noise_std``. ``pick_sources`` (perception in the loop, docs/scenarios.md): each trial runs once
with each listed value of the controller's ``pick_source`` (``given``: the nominal ``pick_xy``; ``truth``: the
object's true position; ``perception``: located in the wrist depth image), on the scenario's scene with cameras
(the same world for every source), with the same sampled parameters; the source is the row's
``p.controller.pick_source`` and the report compares them trial by trial. Distributions: a number (constant), ``{uniform: [low, high]}``,
``{normal: {mean, std}}``, ``{truncated_normal: {mean, std, low, high}}``, ``{choice: [a, b, ...]}``.

The file is checked against the scenario before any trial runs (``load_campaign``): object names against its
scene, controller fields against its Params class (a misspelling names the valid ones), sampled values against
their ranges (friction >= 0, scales > 0, a controller field's type), time_step <= MAX_TIME_STEP.

Trial k is reproducible alone: its parameters depend only on (seed, k), and the physics is deterministic, so
``--trial K`` reruns it bit-identically. Results stream to ``<out>/results/part-*.parquet`` as trials finish
(one row per trial and engine: parameters, verdict, failure mode, phase, key numbers, wall time), every part with
the campaign's one schema, fixed before the first part (every column of every row type: ``results.py``; any
Parquet reader gets every column of the folder); an interrupted campaign (Ctrl-C: the rows done are written)
resumes from the rows already written. The folder belongs to one campaign: its fingerprint (the file's content,
seed, engines, distributions, package version) is stored beside the parts, and resuming with anything different
is refused, naming what differs; ``<out>/campaign.yaml`` is the campaign's file, written once.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
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

from ..clients.inprocess_link import InProcessLink
from ..clients.pick_shake_place import RUN_NUMBERS, run_controller
from ..engines.registry import engine_names
from ..errors import ConfigError, unknown_choice
from ..model.loader import resolve_mesh_path, resolve_urdf_path
from ..model.mesh_object import parse_scale
from ..viewer.run_controls import pace, publish_if_due, serve_until_interrupted, viewer_controls
from ..viewer.scene_viewer import ViewerProcess
from ..yaml_files import check_keys, load_yaml, read_mapping
from ..sim.simulator import MAX_TIME_STEP
from .results import (FAILURE_MODES, PartWriter, axis_label, campaign_schema, check_fingerprint,  # noqa: F401
                      file_sha256, finished_trials, parameter_unit, read_results, results_dir, same_columns,
                      stored_schema, value_order, value_type, wilson_interval, write_fingerprint)
from ..resources import resolve_resource
from .runner import SCENARIOS

# phase of the pick_shake_place controller at a failure -> failure mode
_MODE_OF_PHASE = {"look": "missed", "perceive": "missed", "approach": "missed", "descend": "missed", "close": "missed", "grasp": "missed",
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
            if not math.isfinite(value):
                raise ConfigError(f"{where}: {value!r} is not a finite number")
            return cls("constant", (float(value),))
        if not isinstance(value, dict) or len(value) != 1:
            raise ConfigError(f"{where}: expected a number or one of {{uniform: [low, high]}}, {{normal: {{mean, "
                              f"std}}}}, {{truncated_normal: {{mean, std, low, high}}}}, {{choice: [...]}}; got "
                              f"{value!r}")
        kind, arg = next(iter(value.items()))
        try:
            if kind == "uniform":
                low, high = (float(x) for x in arg)
                if not (low <= high and math.isfinite(high - low)):
                    raise ValueError
                return cls(kind, (low, high))
            if kind == "normal":
                check_keys(arg, ("mean", "std"), where)
                mean, std = float(arg["mean"]), float(arg["std"])
                if not (std >= 0 and math.isfinite(mean + std)):
                    raise ValueError
                return cls(kind, (mean, std))
            if kind == "truncated_normal":
                check_keys(arg, ("mean", "std", "low", "high"), where)
                mean, std, low, high = (float(arg[k]) for k in ("mean", "std", "low", "high"))
                if not (std > 0 and low < high and math.isfinite(mean + std + high - low)):
                    raise ValueError
                return cls(kind, (mean, std, low, high))
            if kind == "choice":
                options = tuple(arg)
                if not options:
                    raise ValueError
                value_type(options)
                return cls(kind, options)
        except (TypeError, ValueError, AttributeError):
            raise ConfigError(f"{where}: invalid {kind} arguments {arg!r}") from None
        raise ConfigError(f"{where}: unknown distribution {kind!r}; valid: uniform, normal, truncated_normal, "
                          f"choice (or a number)")

    @property
    def values_type(self) -> str:
        """The Arrow type name of its values (results.value_type): float64, or a choice's int64/string/bool."""
        return value_type(self.args) if self.kind == "choice" else "float64"

    def possible(self) -> tuple:
        """(lowest, highest) value it can sample (+-inf for a normal) when numeric; else its options."""
        a = self.args
        if self.kind == "constant":
            return a[0], a[0]
        if self.kind == "uniform":
            return a
        if self.kind == "normal":
            return (-math.inf, math.inf) if a[1] > 0 else (a[0], a[0])
        if self.kind == "truncated_normal":
            return a[2], a[3]
        if self.values_type in ("int64", "float64"):
            return min(a), max(a)
        return a

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
         "description", "pick_sources")
PICK_SOURCE = "controller.pick_source"     # the parameter a campaign's pick_sources set, one run per value
PICK_SOURCES = ("given", "truth", "perception")


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
    pick_sources: tuple = ()             # values of the controller's pick_source, one run of each trial per value

    def schema(self):
        """The Arrow schema of its result rows (results.campaign_schema), fixed before any trial runs: the base
        columns, a ``p.*`` column per parameter (typed by its distribution) and an ``n.*`` column (float64) per
        number the scenario's controller declares (:meth:`numbers`)."""
        types = {n: d.values_type for n, d in self.parameters.items()}
        if self.pick_sources:
            types[PICK_SOURCE] = "string"
        return campaign_schema(types, self.numbers())

    def numbers(self) -> tuple:
        """The numbers a trial's verdict can carry: those the scenario's controller declares (its ``NUMBERS``)
        and those run_controller adds (sim and wall time, real-time factor)."""
        controller = SCENARIOS[self.scenario].client_class()
        declared = getattr(controller, "NUMBERS", None)
        if declared is None:
            raise ConfigError(f"{self.source}: the controller of scenario {self.scenario} ({controller.__name__}) "
                              f"does not declare its NUMBERS (the result columns n.*, fixed before the first trial)")
        return tuple(sorted({*declared, *RUN_NUMBERS}))

    def fingerprint(self) -> dict:
        """What makes two runs the same campaign (results.check_fingerprint): the campaign file's content, the
        scenario, seed, engines, distributions, fixed controller fields, steps, pick sources, the result columns
        and the package version. Not the number of trials run (``--trials`` extends a campaign)."""
        from .. import __version__
        return {"scenario": self.scenario, "seed": self.seed, "engines": list(self.engines),
                "distributions": {n: {d.kind: list(d.args)} for n, d in self.parameters.items()},
                "controller": self.controller, "time_step": self.time_step, "period": self.period,
                "duration": self.duration, "pick_sources": list(self.pick_sources),
                "columns": [[f.name, str(f.type)] for f in self.schema()],
                "campaign_file_sha256": file_sha256(self.source), "package_version": __version__}

    def runs(self, k: int) -> list[dict]:
        """The parameter values of each run of trial k: its randomized values, once per pick source (the
        source as ``controller.pick_source``), or once without pick_sources."""
        values = self.trial_parameters(k)
        return [{**values, PICK_SOURCE: s} for s in self.pick_sources] or [values]

    def scene(self) -> str:
        """The scene file of its trials (relative to the package root): the scenario's, or with pick_sources its
        scene with cameras (one world for every source)."""
        sc = SCENARIOS[self.scenario]
        return sc.perception_scene if self.pick_sources_used() and sc.perception_scene else sc.scene

    def pick_sources_used(self) -> tuple:
        """Every pick source a run can use: pick_sources, a fixed ``controller: {pick_source: ...}`` or the
        values of a ``controller.pick_source`` parameter."""
        used = list(self.pick_sources)
        if "pick_source" in self.controller:
            used.append(self.controller["pick_source"])
        dist = self.parameters.get(PICK_SOURCE)
        if dist is not None:
            used += list(dist.args)
        return tuple(dict.fromkeys(used))

    def trial_parameters(self, k: int) -> dict:
        """The randomized values of trial k (depend only on seed and k)."""
        rng = np.random.default_rng([self.seed, int(k)])
        return {name: dist.sample(rng) for name, dist in self.parameters.items()}


def load_campaign(path: str | Path) -> CampaignSpec:
    """Read and validate a campaign file against its scenario before any trial runs: the scenario, engines, the
    parameter names against the scene's objects and the controller's fields (a misspelling names the valid
    ones), every value a distribution can sample against its range (friction >= 0, scales > 0, controller
    fields of the type of their default), time_step <= MAX_TIME_STEP and the period a whole number of steps.
    ConfigError names the file and the problem in one line."""
    data = read_mapping(path, "a campaign")
    where = str(path)
    check_keys(data, _KEYS, where)
    scenario = data.get("scenario")
    if not isinstance(scenario, str) or scenario not in SCENARIOS:
        raise ConfigError(f"{where}: scenario {scenario!r}; valid scenarios: {', '.join(SCENARIOS)}")
    engines = data.get("engines", ["tamsi"])
    engines = [engines] if isinstance(engines, str) else engines
    if not isinstance(engines, (list, tuple)):
        raise ConfigError(f"{where}: engines must be a list of engine names, got {engines!r}")
    unknown = [e for e in engines if e not in engine_names()]
    if not engines or unknown:
        raise ConfigError(f"{where}: engines {unknown or engines}; valid engines: {', '.join(engine_names())}")
    trials, seed = data.get("trials", 10), data.get("seed", 0)
    if not (isinstance(trials, int) and not isinstance(trials, bool) and trials >= 1 and isinstance(seed, int)
            and not isinstance(seed, bool) and seed >= 0):
        raise ConfigError(f"{where}: trials must be an integer >= 1 and seed an integer >= 0, got trials {trials!r}, "
                          f"seed {seed!r}")
    raw_params = data.get("parameters") or {}
    if not isinstance(raw_params, dict):
        raise ConfigError(f"{where}: parameters must be a mapping (name: distribution, e.g. "
                          f"'object.bottle.friction: {{uniform: [0.3, 1.2]}}'), got a {type(raw_params).__name__}")
    controller = data.get("controller") or {}
    if not isinstance(controller, dict):
        raise ConfigError(f"{where}: controller must be a mapping of controller fields (e.g. '{{motion_time: 0.5}}'), "
                          f"got a {type(controller).__name__}")
    sc = SCENARIOS[scenario]
    names = _ScenarioNames(sc)
    params = {}
    for name, value in sorted(raw_params.items(), key=lambda kv: str(kv[0])):
        if not isinstance(name, str):
            raise ConfigError(f"{where}: parameter name {name!r} is not text")
        names.check_parameter(name, where)
        if name.endswith(".mesh"):         # per-file scale: {mesh: FILE, scale: S} -> "FILE?scale=S" (the row's value)
            value = _mesh_options(value, f"{where}: parameters.{name}")
        params[name] = Distribution.parse(value, f"{where}: parameters.{name}")
        names.check_values(name, params[name], f"{where}: parameters.{name}")
    for key, value in controller.items():
        names.check_parameter(f"controller.{key}", where, fixed=True)
        names.check_values(f"controller.{key}", Distribution("choice", (value,)) if not isinstance(value, (list, tuple))
                           else Distribution("choice", (tuple(value),)), f"{where}: controller.{key}")
    numbers = {}
    for key in ("time_step", "period", "duration"):
        if data.get(key) is not None:
            value = data[key]
            x = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
            limit = MAX_TIME_STEP if key == "time_step" else math.inf
            if not (math.isfinite(x) and 0 < x <= limit):
                bound = f" and <= {MAX_TIME_STEP:g} s (MAX_TIME_STEP)" if key == "time_step" else ""
                raise ConfigError(f"{where}: {key} must be a finite number of seconds > 0{bound}, got {value!r}")
            numbers[key] = x
    dt, period = numbers.get("time_step", sc.time_step), numbers.get("period", sc.period)
    steps = round(period / dt)
    if steps < 1 or abs(steps * dt - period) > 1e-9:
        raise ConfigError(f"{where}: the control period {period:g} s is not a whole number of time steps of {dt:g} s")
    sources = _pick_sources(data.get("pick_sources"), sc, names, params, controller, where)
    return CampaignSpec(where, scenario, tuple(engines), trials, seed, params, dict(controller), **numbers,
                        pick_sources=sources)


def _pick_sources(value, sc, names, params, controller, where: str) -> tuple:
    """A campaign's ``pick_sources``: distinct values of the scenario controller's pick_source; 'perception' needs
    the scenario's scene with cameras; the source is then not also a parameter or a fixed controller field."""
    fixed = [controller["pick_source"]] if "pick_source" in controller else []
    fixed += list(params[PICK_SOURCE].args) if PICK_SOURCE in params else []
    if value is None and fixed:      # one source per run, set as a controller field or parameter: checked alike
        if "pick_source" not in names.fields or sc.perception_scene is None:
            return ()                # (the field check already named a controller without it)
        bad = [v for v in fixed if v not in PICK_SOURCES]
        if bad:
            raise ConfigError(f"{where}: controller.pick_source: " + unknown_choice("pick source", str(bad[0]),
                                                                                     PICK_SOURCES))
        return ()
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not (isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value)
            and len(set(value)) == len(value)):
        raise ConfigError(f"{where}: pick_sources must be a list of distinct names from {', '.join(PICK_SOURCES)}, "
                          f"got {value!r}")
    if "pick_source" not in names.fields or sc.perception_scene is None:     # (runner.ScenarioSpec)
        raise ConfigError(f"{where}: pick_sources: the controller of scenario {sc.name} does not locate its object "
                          f"(no pick_source and scene with cameras): it is always told where the object is")
    bad = [v for v in value if v not in PICK_SOURCES]
    if bad:
        raise ConfigError(f"{where}: pick_sources: " + unknown_choice("pick source", bad[0], PICK_SOURCES))
    if PICK_SOURCE in params or "pick_source" in controller:
        raise ConfigError(f"{where}: pick_source is set by pick_sources (one run per source); remove it from "
                          f"{'parameters' if PICK_SOURCE in params else 'controller'}")
    return tuple(value)


# ranges of the object and sensor parameters: (lowest, highest, lowest included)
_RANGES = {"friction": (0.0, math.inf, True), "mass_scale": (0.0, math.inf, False),
           "size_scale": (0.0, math.inf, False), "ft_noise_std": (0.0, math.inf, True)}


def _did_you_mean(word: str, valid) -> str:
    close = difflib.get_close_matches(word, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _ScenarioNames:
    """The scenario's real names: its scene's objects (and whether each is a primitive shape / has a mass) and
    its controller's parameter fields with their defaults."""

    def __init__(self, sc):
        scene_file = resolve_resource(sc.scene)
        scene = load_yaml(scene_file.read_text()) or {}
        self.scenario = sc.name
        self.objects = {o.get("name"): o for o in scene.get("objects", []) if isinstance(o, dict)}
        params = sc.params_class()
        self.params_class = params.__name__
        self.fields = {f.name: (f.default if f.default is not dataclasses.MISSING else
                                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
                       for f in dataclasses.fields(params)}

    def check_parameter(self, name: str, where: str, fixed: bool = False) -> None:
        parts = name.split(".")
        if parts[0] == "object" and len(parts) == 3:
            obj, attr = parts[1], parts[2]
            if obj not in self.objects:
                raise ConfigError(f"{where}: parameter {name!r}: the scene of scenario {self.scenario} has no object "
                                  f"{obj!r}{_did_you_mean(obj, self.objects)}; objects: "
                                  f"{', '.join(map(str, self.objects)) or 'none'}")
            if attr not in _OBJECT_ATTRIBUTES:
                raise ConfigError(f"{where}: parameter {name!r}: no object attribute {attr!r}"
                                  f"{_did_you_mean(attr, _OBJECT_ATTRIBUTES)}; valid: {', '.join(_OBJECT_ATTRIBUTES)}")
            o = self.objects[obj]
            if attr == "size_scale" and not isinstance(o.get("shape"), dict):
                raise ConfigError(f"{where}: parameter {name!r}: only primitive shapes can be scaled (object {obj!r} "
                                  f"is {o.get('urdf') or o.get('shape')!r})")
            if attr == "mass_scale" and "urdf" not in o and "mass" not in o and "density" not in o:
                raise ConfigError(f"{where}: parameter {name!r}: object {obj!r} has no mass to scale")
            return
        if parts[0] == "controller" and len(parts) == 2:
            if parts[1] not in self.fields:
                what = "controller field" if fixed else "parameter"
                shown = parts[1] if fixed else name
                raise ConfigError(f"{where}: {what} {shown!r}: {self.params_class} (scenario {self.scenario}) has no "
                                  f"field {parts[1]!r}{_did_you_mean(parts[1], self.fields)}; fields: "
                                  f"{', '.join(self.fields)}")
            return
        if name == "sensor.ft_noise_std":
            return
        valid = [f"object.{o}.{a}" for o in self.objects for a in _OBJECT_ATTRIBUTES] + \
            [f"controller.{f}" for f in self.fields] + ["sensor.ft_noise_std"]
        raise ConfigError(f"{where}: parameter {name!r}{_did_you_mean(name, valid)}; valid names: object.<name>."
                          f"{{{','.join(_OBJECT_ATTRIBUTES)}}} (objects: {', '.join(map(str, self.objects))}), "
                          f"controller.<field> (fields of {self.params_class}), sensor.ft_noise_std")

    def check_values(self, name: str, dist: "Distribution", where: str) -> None:
        """Every value ``dist`` can sample fits the parameter: in range, of the controller field's type."""
        parts = name.split(".")
        if parts[0] == "object" and parts[-1] == "mesh":      # a mesh file per trial (model/mesh_object.py)
            values = dist.args if dist.kind == "choice" else [dist.args] if dist.kind == "constant" else None
            if values is None or not all(isinstance(v, str) and v for v in values):
                raise ConfigError(f"{where}: a mesh is chosen from file names (choice or constant), got "
                                  f"{dist.kind} {dist.args!r}")
            return
        if parts[0] in ("object", "sensor"):
            if dist.values_type != "float64" and dist.values_type != "int64":
                raise ConfigError(f"{where}: must be numbers, got {dist.args!r}")
            lo, hi = dist.possible()
            low, high, closed = _RANGES.get(parts[-1], (-math.inf, math.inf, True))
            if lo < low or (lo == low and not closed) or hi > high:
                lowest = "a negative value" if low == 0 and lo < 0 else f"{lo:g}"
                also = (" (a normal distribution is unbounded: use truncated_normal with low "
                        f"{'>=' if closed else '>'} {low:g}, or uniform)" if dist.kind == "normal" else "")
                raise ConfigError(f"{where}: {dist.kind} {dist.args} can give {lowest}; {parts[-1]} must be "
                                  f"{'>=' if closed else '>'} {low:g}{also}")
            return
        default = self.fields[parts[1]]
        values = dist.args if dist.kind == "choice" else dist.possible()
        for v in values:
            _check_field_value(parts[1], default, v, dist, where)


_OBJECT_ATTRIBUTES = ("x", "y", "z", "yaw", "mass_scale", "friction", "size_scale", "mesh")
MESH_SCALE = "?scale="      # a mesh choice's value with its scale: "part_mm.stl?scale=0.001" (as a mesh:// URI)


def _mesh_options(value, where: str):
    """A campaign's mesh choice with per-file scales: each option a file name or ``{mesh: FILE, scale: S}`` (S a
    number or [sx, sy, sz] > 0, file units -> m; e.g. 0.001 for a file in mm). Returned with every option as text,
    ``FILE`` or ``FILE?scale=S`` (:func:`split_mesh_value`): the value a trial's row carries and the fingerprint
    holds. ConfigError naming the parameter and the option for a bad one."""
    if not (isinstance(value, dict) and set(value) == {"choice"} and isinstance(value["choice"], (list, tuple))):
        return value
    options = []
    for i, option in enumerate(value["choice"]):
        at = f"{where}: choice[{i}]"
        if isinstance(option, dict):
            if not isinstance(option.get("mesh"), str) or not option["mesh"] or set(option) - {"mesh", "scale"}:
                raise ConfigError(f"{at}: a mesh option is a file name or {{mesh: FILE, scale: S}} (S a number or "
                                  f"[sx, sy, sz], file units -> m), got {option!r}")
            file, scale = option["mesh"], option.get("scale", 1.0)
        elif isinstance(option, str) and MESH_SCALE in option:
            file, _, text = option.rpartition(MESH_SCALE)
            try:
                scale = [float(x) for x in text.split(",")]
            except ValueError:
                raise ConfigError(f"{at}: {option!r}: the scale after {MESH_SCALE!r} must be a number or 3 numbers "
                                  f"separated by commas") from None
            scale = scale[0] if len(scale) == 1 else scale
        else:
            options.append(option)
            continue
        s = parse_scale(scale, f"{at} ({file}) scale")
        options.append(file if s == (1.0, 1.0, 1.0) else
                       file + MESH_SCALE + (repr(s[0]) if s[0] == s[1] == s[2] else ",".join(map(repr, s))))
    return {"choice": options}


def split_mesh_value(value: str) -> tuple:
    """A mesh choice's value (:func:`_mesh_options`) -> (file, scale (sx, sy, sz) or None when not scaled)."""
    file, sep, text = str(value).rpartition(MESH_SCALE)
    if not sep:
        return str(value), None
    s = [float(x) for x in text.split(",")]
    return file, tuple(s * 3 if len(s) == 1 else s)


def _check_field_value(field_name: str, default, v, dist, where: str) -> None:
    """A controller field's value: of its default's type; a number finite, and >= 0 when its default is > 0
    (grip forces, times, speeds, heights do not change sign)."""
    def number(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    if isinstance(default, bool):
        ok = isinstance(v, bool)
        kind = "true or false"
    elif isinstance(default, int):
        ok = number(v) and math.isfinite(v) and float(v).is_integer() and dist.kind in ("choice", "constant")
        kind = "a whole number (a constant or a choice)"
    elif number(default):
        ok = number(v) and math.isfinite(v)
        kind = "a finite number"
    elif isinstance(default, str):
        ok = isinstance(v, str)
        kind = "text"
    elif isinstance(default, (tuple, list)):
        ok = isinstance(v, (tuple, list)) and len(v) == len(default) and all(number(x) and math.isfinite(x)
                                                                              for x in v)
        kind = f"a list of {len(default)} finite numbers"
    else:
        return
    if not ok:
        raise ConfigError(f"{where}: {field_name} must be {kind} (default {default!r}), got {v!r}")
    if number(default) and not isinstance(default, bool) and default > 0 and v < 0:
        raise ConfigError(f"{where}: {field_name} must be >= 0 (default {default!r}), got {v!r}")


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
                src = resolve_urdf_path(obj["urdf"], scene_file.parent)
                obj["urdf"] = str(_scaled_urdf(Path(src), float(value), out_dir))
            elif "density" in obj:
                obj["density"] = float(obj["density"]) * float(value)
            else:
                obj["mass"] = float(obj["mass"]) * float(value)
        elif attr == "mesh":           # the object picked from a set of meshes: keeps its mass (or density), pose
            if "urdf" in obj and "mass" not in obj and "density" not in obj:      # the URDF's total mass
                src = resolve_urdf_path(obj["urdf"], scene_file.parent)
                root = ET.parse(src).getroot() if src is not None else None
                obj["mass"] = sum(float(m.get("value")) for m in root.iter("mass")) if root is not None else None
            for key in ("shape", "urdf", "scale"):      # the scale is the chosen file's (1 unless it says)
                obj.pop(key, None)
            file, scale = split_mesh_value(value)
            obj["mesh"] = resolve_mesh_path(file, scene_file.parent) or file
            if scale is not None:
                obj["scale"] = list(scale)
        elif attr == "size_scale":
            shape = obj.get("shape")
            if not isinstance(shape, dict):
                raise ConfigError(f"campaign parameter {name!r}: only primitive shapes can be scaled "
                                  f"(object {parts[1]!r} is {obj.get('urdf') or shape!r})")
            kind, dims = next(iter(shape.items()))
            obj["shape"] = {kind: [float(d) * float(value) for d in np.atleast_1d(dims)]}
    for obj in scene.get("objects", []):      # relative URDFs resolve against the original scene's folder
        if "urdf" in obj and not Path(obj["urdf"]).is_absolute():
            src = resolve_urdf_path(obj["urdf"], scene_file.parent)
            obj["urdf"] = str(src) if src is not None else obj["urdf"]
        if "mesh" in obj and not Path(str(obj["mesh"])).is_absolute():      # likewise relative meshes
            obj["mesh"] = resolve_mesh_path(str(obj["mesh"]), scene_file.parent) or obj["mesh"]
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
                self.viewer = ViewerProcess(sim.model, port=self.port, objects=sim.scene.objects)
                print(f"viewer: {self.viewer.url}", file=self.out, flush=True)
            else:
                self.viewer.use_scene(self.viewer.send_scene(sim.model, sim.scene.objects))
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


def failure_mode(success: bool, phase: str, failures: list, grip_force_N: float | None = None,
                 commanded_N: float | None = None) -> str:
    """A failed trial's failure mode (results.FAILURE_MODES): solver_failure when the solver failed, else by the
    phase it failed in; a grasp whose grip force (``grip_force_N``, measured when closing gave up, against the
    ``commanded_N``; N) did not settle is grip_force_overshoot or grip_force_undershoot, not missed."""
    if success:
        return ""
    if failures:
        return "solver_failure"
    if phase == "close" and grip_force_N is not None and commanded_N is not None:
        return "grip_force_overshoot" if grip_force_N > commanded_N else "grip_force_undershoot"
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
    params_class = sc.params_class()
    fields = {f.name: f.default for f in dataclasses.fields(params_class)}
    picked = values.get(f"object.{controller_params.get('pick_object', fields.get('pick_object'))}.mesh")
    if "object_label" in fields and picked and not controller_params.get("object_label"):
        controller_params["object_label"] = Path(split_mesh_value(picked)[0]).stem     # "the mug", not "the bottle"
    wall0, cpu0 = time.monotonic(), time.process_time()
    row = {"trial": int(k), "engine": engine, "seed": int(spec.seed), **{f"p.{n}": v for n, v in values.items()}}
    with tempfile.TemporaryDirectory(prefix="contact_sim_trial_") as tmp:
        scene = trial_scene(resolve_resource(spec.scene()), values, Path(tmp))
        controller = sc.client_class()(params_class(**controller_params))
        dt = spec.time_step or sc.time_step
        T = spec.period or sc.period
        link = InProcessLink(scene, engine, dt, T, ft_topic=getattr(controller, "ft_topic", None),
                             trajectory_controllers=controller.trajectory_controllers,
                             wrench_topics=getattr(controller, "wrench_topics", ()),
                             inactive_controllers=sc.inactive_controllers, engine_options=sc.engine_options,
                             ft_noise_std=float(values.get("sensor.ft_noise_std", 0.0)),
                             noise_seed=(spec.seed, int(k)), on_period=on_period, trajectory_states=False)
        error = ""
        try:
            verdict = run_controller(controller, link, duration=spec.duration or sc.duration)
            success, reason, numbers = verdict.success, verdict.reason, dict(verdict.numbers)
        except Exception as exc:     # noqa: BLE001 - a trial that raises is a failed trial with its cause
            success, reason, numbers, error = False, f"{type(exc).__name__}: {exc}", {}, type(exc).__name__
        finally:
            link.close()
    phase = getattr(controller, "phase", "")
    commanded = getattr(getattr(controller, "p", None), "grip_force", None)
    mode = failure_mode(success, phase, link.failures, numbers.get("close_grip_force_N"), commanded)
    row.update(success=bool(success), failure_mode=mode or
               ("other" if error else ""), phase=str(phase), reason=str(reason)[:500],
               solver_failures=len(link.failures), wall_time_s=time.monotonic() - wall0,
               sim_time_s=float(link.sim.t), cpu_time_s=time.process_time() - cpu0,
               worker_pid=os.getpid(), worker_rss_mb=resident_mb())
    numeric = {k: float(v) for k, v in numbers.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    undeclared = sorted(set(numeric) - set(spec.numbers()))
    if undeclared:          # a bug of the controller: the campaign's columns are fixed before its first trial
        raise ValueError(f"the controller of scenario {spec.scenario} reported number(s) {', '.join(undeclared)} "
                         f"that its NUMBERS do not declare (result columns n.*)")
    row.update({f"n.{k}": v for k, v in numeric.items()})
    return row


# ------------------------------------------------------------------------------------------- the campaign

INTERRUPTED_EXIT = 130          # exit status of an interrupted campaign (Ctrl-C), as a shell gives for SIGINT
SHUTDOWN_TIMEOUT_S = 1.0        # after Ctrl-C, Ray's shutdown gets this long; the command exits anyway then (s)
DEFAULT_NICENESS = 15           # Ray's own default for its worker processes (nice(1): 0 normal, 19 lowest)
RAY_LOG = "ray.log"             # in the output folder: what Ray's processes and threads print (not the terminal)
_interrupted_at: list = []      # monotonic time of the first SIGINT of this command (main's handler)


def _on_sigint(signum, frame) -> None:
    """The campaign command's SIGINT handler: the first Ctrl-C raises KeyboardInterrupt (the campaign saves what
    is done and stops) and is remembered, so that one Ray swallows (``Exception ignored ...``) still stops the
    campaign at its next check; later ones are ignored here (their handling is under way and bounded: the
    supervising process, cli.py, ends the command on a second one)."""
    if not _interrupted_at:
        _interrupted_at.append(time.monotonic())
        raise KeyboardInterrupt


def _drop_a_swallowed_interrupt(unraisable) -> None:
    """sys.unraisablehook while the campaign command runs: the KeyboardInterrupt of a Ctrl-C that landed where
    Python cannot raise (a fork's after-fork hook in logging, while Ray starts its processes) is not printed as
    ``Exception ignored ... Traceback``: it was remembered, and the next ``_check_interrupted`` raises it again.
    Anything else goes to Python's own hook."""
    if _interrupted_at and issubclass(unraisable.exc_type, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def _check_interrupted() -> None:
    """Raise KeyboardInterrupt when a Ctrl-C arrived whose KeyboardInterrupt something swallowed."""
    if _interrupted_at:
        raise KeyboardInterrupt


class _RayOutputToFile:
    """While Ray runs: file descriptors 1 and 2 of this process (and so of the Ray processes it starts, and Ray's
    C++ threads) and what Ray's Python threads print (sys.stdout / sys.stderr from threads other than the main
    one: "(raylet) ..." lines with colour codes) go to ``path``; ``self.term`` writes to the terminal (the command's own lines, the progress bar). Restored on exit; a Ray process still running keeps
    writing to the file."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        self.term = os.fdopen(os.dup(self.saved[1]), "w", buffering=1)
        self.term_out = os.fdopen(os.dup(self.saved[0]), "w", buffering=1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        # Python's streams too: Ray's driver threads print through them ("(raylet) ..."; they need not be fds 1
        # and 2); what this process's main thread prints (the caller's on_row) still reaches the terminal
        self.py_streams = (sys.stdout, sys.stderr)
        self.log = open(self.path, "a", buffering=1)      # noqa: SIM115 - closed in __exit__
        sys.stdout, sys.stderr = _ByThread(self.term_out, self.log), _ByThread(self.term, self.log)
        return self

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.py_streams
        self.log.close()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        for fd in self.saved:
            os.close(fd)
        self.term.close()
        self.term_out.close()
        return False


class _ByThread:
    """A text stream writing to ``main`` from the main thread and to ``other`` from any other thread."""

    def __init__(self, main, other):
        self.main, self.other = main, other

    def _target(self):
        import threading
        return self.main if threading.current_thread() is threading.main_thread() else self.other

    def write(self, text):
        return self._target().write(text)

    def flush(self):
        for stream in (self.main, self.other):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass

    def __getattr__(self, name):
        return getattr(self.main, name)


def _shutdown_ray(ray, timeout: float | None) -> bool:
    """``ray.shutdown()``; with a ``timeout`` (s) in a thread, not waited for longer (Ray's shutdown can block
    for good, e.g. in its GlobalStateAccessor's destructor when interrupted while it starts). True when it
    finished."""
    if timeout is None:
        ray.shutdown()
        return True
    import threading
    t = threading.Thread(target=ray.shutdown, name="ray-shutdown", daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive()


def run_campaign(spec: CampaignSpec, out: str | Path, *, address: str | None = None, workers: int | None = None,
                 trials: int | None = None, progress: bool = True, max_retries: int = 2,
                 trial_fn=None, on_row=None, in_process: bool = False, niceness: int | None = None,
                 say=None) -> dict:
    """Run every (trial, engine) not yet in ``out`` as Ray tasks (local Ray by default; ``address`` or
    RAY_ADDRESS: an existing cluster), streaming rows to Parquet (the campaign's schema) as trials finish.
    ``in_process``: the trials run one after another in this process, no Ray. ``niceness``: of a local Ray's
    worker processes (default DEFAULT_NICENESS, Ray's 15: a campaign takes the CPU others leave; 0 competes as an
    equal; a cluster's workers keep the niceness their ``ray start`` gave, env RAY_worker_niceness). What Ray's
    processes print goes to ``<out>/ray.log``. ``say(text)``: told of each stage (the command prints them).
    Returns a summary; ``summary["interrupted"]``: a KeyboardInterrupt (Ctrl-C) stopped it, the rows done so far
    are written (the same call resumes); ``summary["ray_stopped"]``: False when Ray's shutdown did not finish
    within SHUTDOWN_TIMEOUT_S after it (the command then exits without waiting). ``on_row(row, n)``: called in
    the driver after each of the n rows recorded so far (e.g. to sample memory). ConfigError when ``out`` holds
    results of another campaign."""
    say = say or (lambda text, file=None: None)
    out = Path(out)
    schema = spec.schema()
    fingerprint = spec.fingerprint()
    new = check_fingerprint(out, fingerprint)          # another campaign's folder: refused, naming what differs
    copy = out / "campaign.yaml"                        # the campaign's file, written once, never overwritten
    if new and copy.exists() and copy.read_bytes() != Path(spec.source).read_bytes():
        raise ConfigError(f"{out}: its campaign.yaml is another campaign file than {spec.source}: give another --out")
    if new:
        out.mkdir(parents=True, exist_ok=True)
        if not copy.exists():
            copy.write_bytes(Path(spec.source).read_bytes())
        write_fingerprint(out, fingerprint)
    n_trials = spec.trials if trials is None else int(trials)
    keys = (f"p.{PICK_SOURCE}",) if spec.pick_sources else ()
    done = finished_trials(out, keys)
    todo = [(k, e, v) for k in range(n_trials) for v in spec.runs(k) for e in spec.engines
            if (k, e, *(v[PICK_SOURCE] for _ in keys)) not in done]
    summary = {"done_before": len(done), "run": 0, "failed_tasks": 0, "lost": 0, "wall_s": 0.0,
               "interrupted": False, "not_run": 0, "ray_stopped": True}
    say(f"{len(todo)} trial run(s) to do, {len(done)} done before; results in {results_dir(out)}")
    if not todo:
        return summary
    writer = PartWriter(out, schema)
    wall0 = time.monotonic()
    fn = trial_fn or run_trial

    def record(row, bar=None, tell=say):
        writer.add(row)
        summary["run"] += 1
        if summary["run"] == 1:
            tell(f"first trial run done (trial {row['trial']}, {row['engine']})")
        if on_row is not None:
            on_row(row, summary["run"])
        if bar is not None:
            bar.update(1)
            bar.set_postfix(success=row["success"])

    def failed_row(k, e, values, exc):
        return {"trial": k, "engine": e, "seed": spec.seed, "success": False, "failure_mode": "other",
                "phase": "", "reason": f"task failed: {type(exc).__name__}: {str(exc)[:300]}",
                "solver_failures": 0, "wall_time_s": float("nan"), "sim_time_s": float("nan"),
                "cpu_time_s": float("nan"), "worker_pid": -1, "worker_rss_mb": float("nan"),
                **{f"p.{n}": v for n, v in values.items()}}

    def stopped(tell=say):
        summary["interrupted"] = True
        summary["not_run"] = len(todo) - summary["run"] - summary["lost"]
        writer.flush()                                  # first: what is done is saved whatever Ray does next
        tell(interrupted_message(out, summary))         # then said, before Ray's shutdown (bounded, killable)
        summary["said"] = True

    if in_process:
        try:
            say(f"running {len(todo)} trial run(s) in this process (no Ray)")
            for k, e, v in todo:
                _check_interrupted()
                try:
                    row = fn(spec, k, e, v) if spec.pick_sources else fn(spec, k, e)
                except Exception as exc:   # noqa: BLE001 - a trial function that raises: a failed row, as on Ray
                    summary["failed_tasks"] += 1
                    row = failed_row(k, e, v, exc)
                record(row)
            _check_interrupted()
        except KeyboardInterrupt:
            stopped()
        finally:
            writer.flush()
        summary["wall_s"] = time.monotonic() - wall0
        return summary
    started, bar, pending, ray = False, None, {}, None
    with _RayOutputToFile(out / RAY_LOG) as console:
        def tell(text):         # the terminal, not the log
            say(text, file=console.term)
        try:
            # deferred: optional, pip only (no rosdep key), ~1 s to import; inside the try so that a Ctrl-C while it
            # loads or while the local node starts is an interrupted campaign, not a traceback
            address = address or os.environ.get("RAY_ADDRESS")
            nice = DEFAULT_NICENESS if niceness is None else int(niceness)
            tell(f"connecting to the Ray cluster at {address}" if address else
                 f"starting a local Ray ({workers or os.cpu_count()} workers at niceness {nice}; what Ray prints: "
                 f"{out / RAY_LOG})")
            import ray
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            if not ray.is_initialized():
                kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
                started = True
                if address:
                    ray.init(address=address, **kwargs)
                else:
                    _init_local_ray(ray, num_cpus=workers or os.cpu_count(), _system_config={"worker_niceness": nice},
                                    **kwargs)
            _check_interrupted()
            tell("Ray ready")
            # a worker process that dies (killed, out of memory) loses only its trial: Ray retries the task
            task = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(fn)
            pending = {(task.remote(spec, k, e, v) if spec.pick_sources else task.remote(spec, k, e)): (k, e, v)
                       for k, e, v in todo}
            tell(f"{len(pending)} trial run(s) submitted")
            if progress:
                from tqdm import tqdm  # deferred: optional, pip only (no rosdep key)
                bar = tqdm(total=len(todo), unit="trial", desc=f"{spec.scenario} campaign", dynamic_ncols=True,
                           file=console.term)
            while pending:
                _check_interrupted()
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                for ref in ready:
                    k, e, values = pending.pop(ref)
                    try:
                        row = ray.get(ref)
                    except Exception as exc:   # noqa: BLE001 - the worker died more than max_retries times
                        if _lost_with_its_node(exc):
                            summary["lost"] += 1           # not a trial result: no row, a rerun runs it
                            if bar is not None:
                                bar.update(1)
                            continue
                        summary["failed_tasks"] += 1
                        row = failed_row(k, e, values, exc)
                    record(row, bar, tell)
            _check_interrupted()
        except KeyboardInterrupt:
            if bar is not None:
                bar.close()
                bar = None
            stopped(tell)
        finally:
            writer.flush()
            if bar is not None:
                bar.close()
            if started:
                summary["ray_stopped"] = _shutdown_ray(ray, SHUTDOWN_TIMEOUT_S if summary["interrupted"] else None)
    summary["wall_s"] = time.monotonic() - wall0
    return summary


def interrupted_message(out, summary: dict) -> str:
    """What an interrupted campaign says (after ``contact-sim campaign: ``)."""
    return (f"interrupted: {summary['run']} trial run(s) of this run saved in {results_dir(out)} "
            f"({summary['done_before'] + summary['run']} in all), {summary['not_run']} not run; run the same command "
            f"again to resume")


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

def _bins(values, bins: int):
    """(labels, bin index of each value): quantile bins of a numeric parameter with more than ``bins`` values,
    else one bin per value (sorted, numbers numerically)."""
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numeric and len(set(values)) > bins:
        x = np.asarray(values, float)
        edges = np.quantile(x, np.linspace(0, 1, bins + 1))
        labels = [f"[{edges[i]:.4g}, {edges[i + 1]:.4g}]" for i in range(bins)]
        return labels, np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    keys = sorted(set(values), key=value_order)
    return [f"{k:g}" if isinstance(k, float) else str(k) for k in keys], np.array([keys.index(v) for v in values])


_axis_label = axis_label


def _success_plot(plt, title, xlabel, labels, rates, path) -> None:
    """Success rate per bin with Wilson 95 % bars, the engines side by side within each bin."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    engines = list(rates)
    width = 0.6 / max(len(engines), 1)
    for i, e in enumerate(engines):
        p = np.array([s / n if n else np.nan for s, n in rates[e]])
        ci = np.array([wilson_interval(s, n) for s, n in rates[e]])
        x = np.arange(len(labels)) + (i - (len(engines) - 1) / 2) * width
        ax.errorbar(x, p, yerr=np.clip([p - ci[:, 0], ci[:, 1] - p], 0.0, None), marker="o", capsize=3,
                    linestyle="none", label=e)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("success rate (share of trials)\nWilson 95 %")
    ax.set_title(f"success against {title}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _failure_mode_plot(plt, title, xlabel, labels, engines, engine_of, which, succ, modes_of, path) -> None:
    """Failed trials per bin, stacked by failure mode, one bar per engine side by side in each bin."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.8 / max(len(engines), 1)
    colours = plt.get_cmap("tab10")
    hatches = ["", "//", "..", "xx"]
    for i, e in enumerate(engines):
        x = np.arange(len(labels)) + (i - (len(engines) - 1) / 2) * width
        bottom = np.zeros(len(labels))
        for j, mode in enumerate(FAILURE_MODES):
            h = np.array([np.sum((engine_of == e) & (which == b) & ~succ & (modes_of == mode))
                          for b in range(len(labels))], float)
            if h.any():
                ax.bar(x, h, width * 0.95, bottom=bottom, color=colours(j), hatch=hatches[i % len(hatches)],
                       edgecolor="k", linewidth=0.3, label=f"{mode.replace('_', ' ')} ({e})")
                bottom += h
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("failed trials (count)")
    ax.set_title(f"failure modes against {title} (bars: " + ", ".join(engines) + ")")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _agreement_plot(plt, params, agreement, labels, path) -> None:
    """Share of trials where every engine gives the same verdict, per bin of each parameter (Wilson 95 %)."""
    fig, axes = plt.subplots(len(params), 1, figsize=(6.5, 2.2 * len(params)), squeeze=False)
    for ax, name in zip(axes[:, 0], params):
        counts = agreement[name]
        p = np.array([a / n if n else np.nan for a, n in counts])
        ci = np.array([wilson_interval(a, n) for a, n in counts])
        ax.errorbar(range(len(counts)), p, yerr=np.clip([p - ci[:, 0], ci[:, 1] - p], 0.0, None), marker="o",
                    capsize=3, linestyle="none")
        ax.set_xticks(range(len(counts)), labels[name], fontsize=6)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(_axis_label(name[2:]), fontsize=8)
        ax.set_ylabel("engines agree\n(share of trials)", fontsize=7)
    fig.suptitle("engine agreement (same verdict from every engine), Wilson 95 %", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _pick_source_section(rows, engines, sources, column) -> list[str]:
    """The report's comparison of the pick sources (perceived against true poses): success per engine and
    source, trial by trial (the same trial's parameters with each source), and the perception error."""
    lines = ["", "## Success by pick source (perceived against true poses)", "",
             "Each trial ran once per pick source with the same parameters (docs/scenarios.md).", "",
             "| engine | " + " | ".join(f"{s}: successes / trials (Wilson 95 %)" for s in sources) + " |",
             "| --- |" + " --- |" * len(sources)]
    outcome = {}        # (engine, source) -> trial -> success
    for r in rows:
        outcome.setdefault((r["engine"], r[column]), {})[r["trial"]] = bool(r["success"])
    for e in engines:
        cells = []
        for s in sources:
            o = outcome.get((e, s), {})
            k = sum(o.values())
            lo, hi = wilson_interval(k, len(o))
            cells.append(f"{k} / {len(o)} ({k / max(len(o), 1):.3f}, [{lo:.3f}, {hi:.3f}])")
        lines.append(f"| {e} | " + " | ".join(cells) + " |")
    if len(sources) > 1:
        lines += ["", "| engine | sources | trials with both | both succeed | only the first | only the second |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for e in engines:
            for i, a in enumerate(sources):
                for b in sources[i + 1:]:
                    oa, ob = outcome.get((e, a), {}), outcome.get((e, b), {})
                    both = sorted(set(oa) & set(ob))
                    lines.append(f"| {e} | {a}, {b} | {len(both)} | {sum(oa[k] and ob[k] for k in both)} | "
                                 f"{sum(oa[k] and not ob[k] for k in both)} | {sum(ob[k] and not oa[k] for k in both)} |")
    err = np.array([r["n.perception_error_m"] for r in rows if r.get("n.perception_error_m") is not None], float)
    if len(err):
        lines += ["", f"Perception error (horizontal distance of the perceived axis to the true one) over "
                      f"{len(err)} perceived runs: median {np.median(err) * 1e3:.2f} mm, 95th percentile "
                      f"{np.percentile(err, 95) * 1e3:.2f} mm, max {err.max() * 1e3:.2f} mm."]
    return lines


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
    source_column = f"p.{PICK_SOURCE}"
    sources = sorted({r[source_column] for r in rows}) if source_column in table.column_names else []

    def run_of(r):          # a trial's run: the trial, and its pick source when the campaign has several
        return (r["trial"], r.get(source_column)) if sources else r["trial"]
    by_trial: dict = {}      # run -> engine -> success
    for r in rows:
        by_trial.setdefault(run_of(r), {})[r["engine"]] = bool(r["success"])
    if len(engines) > 1:
        complete = [v for v in by_trial.values() if len(v) == len(engines)]
        agree = sum(len(set(v.values())) == 1 for v in complete)
        lines += ["", "## Engine agreement", "",
                  f"{agree} of {len(complete)} trials ({agree / max(len(complete), 1):.3f}) get the same verdict from "
                  f"every engine; the others mark grasps the simulation cannot decide: "
                  f"{sorted(k for k, v in by_trial.items() if len(v) == len(engines) and len(set(v.values())) > 1)[:20]}"]
    if sources:
        lines += _pick_source_section(rows, engines, sources, source_column)
    params = sorted(c for c in table.column_names if c.startswith("p."))
    if params:
        lines += ["", "## Success against each parameter", ""]
    plt = None
    if plots and params:
        import matplotlib  # deferred: matplotlib (~0.5 s to import), only for the plots
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # deferred: matplotlib (~0.5 s to import), only for the plots
        (Path(out) / "plots").mkdir(exist_ok=True)
    succ = np.array([bool(r["success"]) for r in rows])
    engine_of = np.array([r["engine"] for r in rows])
    modes_of = np.array([r["failure_mode"] or "" for r in rows])
    agreement, bin_labels = {}, {}               # parameter -> per bin (trials where every engine agrees, trials)
    for name in params:
        values = [r[name] for r in rows]
        labels, which = _bins(values, bins)
        bin_labels[name] = labels
        lines.append(f"### {_axis_label(name[2:])}")
        lines += ["", "| bin | " + " | ".join(engines) + " |", "| --- |" + " --- |" * len(engines)]
        rates = {e: [(int(succ[(engine_of == e) & (which == b)].sum()), int(((engine_of == e) & (which == b)).sum()))
                     for b in range(len(labels))] for e in engines}
        for b, label in enumerate(labels):
            lines.append(f"| {label} | " + " | ".join(f"{s}/{n}" for s, n in (rates[e][b] for e in engines)) + " |")
        lines.append("")
        if len(engines) > 1:
            bin_of_trial = {run_of(r): which[i] for i, r in enumerate(rows)}
            agreement[name] = [(sum(len(set(v.values())) == 1 for k, v in by_trial.items()
                                    if len(v) == len(engines) and bin_of_trial[k] == b),
                                sum(1 for k, v in by_trial.items() if len(v) == len(engines) and bin_of_trial[k] == b))
                               for b in range(len(labels))]
        if plt is not None:
            stem = name[2:].replace(".", "_")
            xlabel = _axis_label(name[2:])
            _success_plot(plt, name[2:], xlabel, labels, rates, Path(out) / "plots" / f"{stem}.png")
            _failure_mode_plot(plt, name[2:], xlabel, labels, engines, engine_of, which, succ, modes_of,
                               Path(out) / "plots" / f"failure_modes_{stem}.png")
    if plt is not None and agreement:
        _agreement_plot(plt, params, agreement, bin_labels, Path(out) / "plots" / "engine_agreement.png")
    text = "\n".join(lines) + "\n"
    (Path(out) / "report.md").write_text(text)
    return text


# ------------------------------------------------------------------------------------------- command line

def main(argv=None) -> int:
    """``contact-sim campaign CAMPAIGN.yaml [--out DIR] [--trials N] [--workers N] [--address A] [--niceness N]
    [--in-process] [--trial K]`` and ``contact-sim campaign report RESULTS_DIR`` (``contact-sim campaign compare``:
    cli.py hands it to scenarios/compare.py). Exit status: 0 done, 2 a bad file or argument (one line), 130
    interrupted (Ctrl-C at any moment: ``contact-sim campaign: interrupted ...`` on stderr, what was done is
    written; the same command resumes)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    import signal
    previous = signal.signal(signal.SIGINT, _on_sigint) if _main_thread() else None
    previous_hook, sys.unraisablehook = sys.unraisablehook, _drop_a_swallowed_interrupt
    _interrupted_at.clear()
    try:
        if argv[:1] == ["report"]:
            return _report_main(argv[1:])
        return _campaign_main(argv)
    except KeyboardInterrupt:
        print("contact-sim campaign: interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED_EXIT
    finally:
        sys.unraisablehook = previous_hook
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def _say(text: str, file=None) -> None:
    """A stage of the command, one line on stderr (``contact-sim campaign: ...``)."""
    print(f"contact-sim campaign: {text}", file=file or sys.stderr, flush=True)


def _report_main(argv) -> int:
    ap = argparse.ArgumentParser(prog="contact-sim campaign report")
    ap.add_argument("results", help="a campaign's output directory")
    ap.add_argument("--bins", type=int, default=5)
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    try:
        print(report(args.results, bins=args.bins, plots=not args.no_plots))
    except ConfigError as exc:
        print(f"contact-sim campaign report: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _campaign_main(argv) -> int:
    ap = argparse.ArgumentParser(prog="contact-sim campaign", description=__doc__.split("\n\n")[0])
    ap.add_argument("campaign", help="campaign YAML (see scenes/campaigns/)")
    ap.add_argument("--out", default=None, help="output directory (default: out/campaigns/<file stem>)")
    ap.add_argument("--trials", type=int, default=None, help="run only the first N trials (default: the file's)")
    ap.add_argument("--workers", type=int, default=None, help="local Ray workers (default: the CPUs)")
    ap.add_argument("--address", default=None, help="an existing Ray cluster, HOST:PORT of its head (default: "
                    "RAY_ADDRESS, else a local Ray; docs/scenarios.md 'On a Ray cluster')")
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
    ap.add_argument("--niceness", type=int, default=None,
                    help=f"niceness of a local Ray's worker processes, 0 (normal) to 19 (lowest) (default "
                         f"{DEFAULT_NICENESS}, Ray's: a campaign gets the CPU other work leaves; a cluster's workers "
                         f"keep their own, docs/scenarios.md)")
    ap.add_argument("--in-process", action="store_true",
                    help="run the trials one after another in this process, without Ray")
    args = ap.parse_args(argv)
    if args.viewer and args.trial is None:
        ap.error("--viewer watches one trial: give --trial K")
    if not (math.isfinite(args.real_time_factor) and args.real_time_factor >= 0):
        ap.error(f"--real-time-factor must be a finite number >= 0 (0: as fast as possible), got "
                 f"{args.real_time_factor}")
    if args.trials is not None and args.trials < 1:
        ap.error(f"--trials must be >= 1, got {args.trials}")
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers must be >= 1, got {args.workers}")
    if args.niceness is not None and not 0 <= args.niceness <= 19:
        ap.error(f"--niceness must be 0 (normal) to 19 (lowest), got {args.niceness}")
    if args.niceness is not None and args.address:
        ap.error("--niceness sets a local Ray's workers: a cluster's workers keep the niceness of their `ray start` "
                 "(RAY_worker_niceness in its environment)")
    try:
        _say(f"checking {args.campaign}")
        spec = load_campaign(args.campaign)
        if args.engine is not None and args.engine not in spec.engines:
            raise ConfigError(f"--engine {args.engine!r}: not an engine of {args.campaign} "
                              f"({', '.join(spec.engines)})")
        if args.trial is not None:
            if args.trial < 0:
                raise ConfigError(f"--trial {args.trial}: trials are numbered from 0")
            watch = TrialViewer(args.viewer_port, args.real_time_factor) if args.viewer else None
            try:
                for values in spec.runs(args.trial):
                    for e in ([args.engine] if args.engine else spec.engines):
                        row = run_trial(spec, args.trial, e, values, on_period=watch)
                        print({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
                if watch is not None:
                    watch.finish(wait=not args.exit_after_run)
            finally:
                if watch is not None:
                    watch.close()
            return 0
        out = args.out or str(Path("out") / "campaigns" / Path(args.campaign).stem)
        summary = run_campaign(spec, out, address=args.address, workers=args.workers, trials=args.trials,
                               progress=not args.no_progress, in_process=args.in_process, niceness=args.niceness,
                               say=_say)
        if summary["interrupted"] or _interrupted_at:
            if not summary.get("said"):
                _say(interrupted_message(out, summary))
            if not summary["ray_stopped"]:
                _say(f"interrupted: Ray had not stopped {SHUTDOWN_TIMEOUT_S:g} s later: it ends with this process")
            return INTERRUPTED_EXIT
        print(f"{summary['run']} trial run(s) in {summary['wall_s']:.1f} s ({summary['done_before']} already done, "
              f"{summary['failed_tasks']} failed tasks); results in {results_dir(out)}")
        if summary["lost"]:
            print(f"{summary['lost']} trial run(s) lost with their Ray node (not recorded): run the same command "
                  f"again to run them", file=sys.stderr)
        _say("writing the report")
        print(report(out))
    except ConfigError as exc:
        print(f"contact-sim campaign: error: {exc}", file=sys.stderr)
        return 2
    return 0


def child_main(argv) -> None:
    """The campaign command in the process cli.py supervises (``contact-sim campaign``): main(), then this
    process ends at once with its status (os._exit after flushing: no interpreter finalization, in which an
    interrupted Ray's destructors can block for good)."""
    try:
        rc = main(argv)
    except SystemExit as exc:            # argparse's errors and -h
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BaseException:                # noqa: BLE001 - a bug: its traceback, then the status
        import traceback
        traceback.print_exc()
        rc = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)
