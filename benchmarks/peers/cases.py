"""The shared scenes of the peer benchmark (issue 18; MuJoCo and the rows of issue 45 item 4): imported by
ours_case.py (project venv), drake_case.py and mujoco_case.py (the peers' venv), so it imports nothing but the
standard library (PyYAML, present in both venvs, only inside the functions that read a scene).

Accuracy (issue 45 item 4), measured alike on every side from the recorded samples (every ``sample`` s):
* creep: the largest drift of a resting object over the run (m): ``creep`` = (kind, names, t0): "joints": the
  largest |q(t) - q(t0)| of the named joints; "bodies": the largest |p(T) - p(t0)| of the free bodies;
* penetration: the largest depth of a tracked geometry below the ground half-space (m) over the samples
  (``ground_penetration``; object-object penetration is not measured).
"""

from __future__ import annotations

import glob
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Case:
    name: str            # key on the command line
    title: str           # row label
    scene: Path          # our scene file; drake_case.py builds the same scene from it
    dt: float            # s
    duration: float      # s of sim time (default; --quick shortens)
    engines: tuple       # our engine names == Drake's DiscreteContactApproximation names
    sample: float = 0.01  # s between recorded positions (trajectory deviation)
    compare: str = "bodies"   # "bodies": free-body positions (m); "joints": joint positions (rad / m)
    creep: tuple | None = None  # ("joints", (joint names), t0 s) or ("bodies", None, t0 s); None: no resting object
    penetration: str = "bodies"  # "bodies": the free bodies' geometry; "planar": the planar box (joint z); "": none


CASES = {
    "box": Case("box", "box stick-slip", HERE / "scenes" / "box_stick_slip.yaml", 1e-3, 5.0, ("tamsi", "lagged")),
    "sphere": Case("sphere", "sphere rolling", ROOT / "scenes" / "icf_falling_sphere.yaml", 2e-3, 1.0,
                   ("tamsi", "lagged")),
    "iiwa": Case("iiwa", "iiwa 14 + WSG held by PD", HERE / "scenes" / "iiwa_wsg_pd.yaml", 1e-3, 2.0,
                 ("tamsi", "lagged"), compare="joints"),
    "clutter": Case("clutter", "40-object clutter", ROOT / "scenes" / "icf_clutter.yaml", 2e-3, 1.0,
                    ("tamsi", "lagged", "similar", "sap")),
    # issue 45 item 4
    "planar": Case("planar", "box on planar (x, z) joints", HERE / "scenes" / "planar_box.yaml", 1e-3, 2.0,
                   ("tamsi", "lagged"), compare="joints", creep=("joints", ("box_x",), 0.0), penetration="planar"),
    "ur5": Case("ur5", "UR5 held by PD", HERE / "scenes" / "ur5_hold.yaml", 1e-3, 2.0, ("tamsi", "lagged"),
                compare="joints", penetration=""),
    "ur5_objects": Case("ur5_objects", "UR5 + 20 resting objects", HERE / "scenes" / "ur5_objects.yaml", 1e-3,
                        1.0, ("tamsi", "lagged"), creep=("bodies", None, 0.2)),
}

# the rows MuJoCo runs (mujoco_case.py): the iiwa + WSG is not built as MJCF (mimic fingers, meshes)
MUJOCO_CASES = ("box", "sphere", "clutter", "planar", "ur5", "ur5_objects")

# Drake's settings that mirror our engines' defaults (contact_sim_ros/engines/tamsi.py, lagged.py)
STICTION_TOLERANCE = 1e-4    # m/s: TAMSI v_s, ICF regularized stiction floor
SAP_RELAXATION_TIME = 1e-3   # s: pair tau_d of our 'sap' (Drake adds the two geometries' values)


def package_dirs() -> list[str]:
    """Folders holding ROS packages for ``package://`` URIs in the peer venv (which has no example-robot-data): the
    project venv's cmeel share folder (example-robot-data's UR5), then ROS_PACKAGE_PATH."""
    import os
    dirs = sorted(glob.glob(str(ROOT / ".venv" / "lib" / "python3*" / "site-packages" / "cmeel.prefix" / "share")))
    dirs += [d for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
    return dirs


def resolve_package(uri: str, base: Path) -> str:
    """A mesh / URDF URI (package://pkg/rel or a path relative to ``base``) -> an existing absolute path."""
    if uri.startswith("package://"):
        rel = uri[len("package://"):]
        for d in package_dirs():
            cand = Path(d) / rel
            if cand.is_file():
                return str(cand)
        raise FileNotFoundError(f"{uri}: not found under {package_dirs()}")
    if uri.startswith("file://"):
        uri = uri[len("file://"):]
    cand = (base / uri).resolve()
    if not cand.is_file():
        raise FileNotFoundError(f"{uri}: not found (relative to {base})")
    return str(cand)


def rpy_matrix(rpy) -> list:
    """URDF roll-pitch-yaw (rad) -> 3x3 rotation (nested lists), R = Rz(y) Ry(p) Rx(r)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return [[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr]]


def rpy_quat(rpy) -> list:
    """URDF roll-pitch-yaw (rad) -> unit quaternion [w, x, y, z] (MuJoCo's order)."""
    r, p, y = (0.5 * a for a in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return [cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy]


def read_scene(case: Case) -> dict:
    import yaml
    return yaml.safe_load(case.scene.read_text())


def ground_height(scene: dict) -> float:
    """z (m) of the scene's horizontal ground half-space (the peer scenes have one, normal +z)."""
    for e in scene.get("environment") or []:
        if e.get("shape") == "halfspace":
            return float(((e.get("pose") or {}).get("xyz") or [0, 0, 0])[2])
    raise ValueError("the peer scenes need a halfspace ground")


def urdf_collisions(path: Path) -> list:
    """The collision primitives of a one-link URDF object: [(kind, size, offset xyz)] (sphere / box only)."""
    out = []
    for c in ET.parse(path).getroot().iter("collision"):
        o = c.find("origin")
        xyz = [float(x) for x in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()]
        g = c.find("geometry")[0]
        if g.tag == "sphere":
            out.append(("sphere", float(g.get("radius")), xyz))
        elif g.tag == "box":
            out.append(("box", [float(x) for x in g.get("size").split()], xyz))
        else:
            raise ValueError(f"{path}: collision {g.tag} not supported by the peer benchmark")
    return out


def body_geoms(case: Case) -> dict:
    """name -> [(kind, size, offset)] of every free object of the case's scene (size: radius, or full box sizes)."""
    scene = read_scene(case)
    out = {}
    for o in scene.get("objects") or []:
        if "urdf" in o:
            out[o["name"]] = urdf_collisions(case.scene.parent / o["urdf"])
        else:
            (kind, size), = o["shape"].items()
            out[o["name"]] = [(kind, float(size) if kind == "sphere" else [float(x) for x in size], [0.0, 0.0, 0.0])]
    return out


def lowest_point(geoms, p, R) -> float:
    """Lowest z (m) of the geometries ``geoms`` of a body at position p, rotation R (nested lists)."""
    low = math.inf
    for kind, size, off in geoms:
        z = p[2] + sum(R[2][i] * off[i] for i in range(3))
        if kind == "sphere":
            z -= size
        else:
            z -= sum(abs(R[2][i]) * 0.5 * size[i] for i in range(3))
        low = min(low, z)
    return low


class Penetration:
    """Largest depth (m, >= 0) below the ground over the samples; ``add`` takes {name: (p, R)} of the bodies."""

    def __init__(self, case: Case):
        self.case, self.depth = case, 0.0
        scene = read_scene(case)
        self.ground = ground_height(scene)
        self.geoms = body_geoms(case) if case.penetration == "bodies" else {}
        self.half_height = 0.5 * PLANAR_BOX_SIZE[2]

    def add_bodies(self, poses: dict) -> None:
        for name, (p, R) in poses.items():
            g = self.geoms.get(name)
            if g:
                self.depth = max(self.depth, self.ground - lowest_point(g, p, R))

    def add_planar(self, z: float) -> None:
        """The planar box: its centre at the z joint's position (m), its bottom face half a height below."""
        self.depth = max(self.depth, self.ground - (z - self.half_height))


PLANAR_BOX_SIZE = (0.1, 0.1, 0.02)     # m, scenes/planar_box.urdf


def creep(case: Case, d: dict) -> float | None:
    """Largest drift (m) of the resting object(s) of the case in one side's run record ``d`` (names, samples)."""
    if case.creep is None:
        return None
    kind, names, t0 = case.creep
    idx = [i for i, n in enumerate(d["names"]) if names is None or n in names]
    samples = [s for s in d["samples"] if s[0] >= t0 - 1e-9]
    if len(samples) < 2:
        return None
    ref = samples[0][1]
    if kind == "joints":
        return max(abs(s[1][i][0] - ref[i][0]) for s in samples for i in idx)
    last = samples[-1][1]
    return max(math.dist(last[i], ref[i]) for i in idx)
