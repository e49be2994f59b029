"""One peer-benchmark case on MuJoCo (4.0.0, requirements-peers.txt), in a fresh process of the peers' venv
(benchmarks/peers/.venv-drake, never the project's venv); prints one JSON line (issue 45 item 4).

    benchmarks/peers/.venv-drake/bin/python benchmarks/peers/mujoco_case.py --case box

``build_mjcf(case)`` (standard library + PyYAML only, so that the project's tests can check it without MuJoCo)
writes the case's scene as MJCF from OUR scene file: gravity, the time step, every free object (primitive shape
or a one-link URDF of primitives; mass or density, solid-body inertia; pose and world-frame velocity), the ground
half-space as a plane, a robot URDF converted body by body (``urdf_to_mjcf``: joint origins, axes, inertials,
collision primitives and meshes; fixed joints become nested bodies without a joint, links of zero mass bodies
without an inertial; visuals dropped), its gains as position actuators (kp, kv, force range = the URDF's effort
limit) holding the initial positions, the scene's external forces (``xfrc_applied`` at the body origin = its
centre of mass in these scenes). Friction: every geom gets its material's mu (MuJoCo takes the larger of a pair's;
the peer scenes use one material per pair, so it is ours). What is MuJoCo's own and left at its defaults (the
issue asks for "MuJoCo's default solver"): the Newton solver, pyramidal friction cones, the Euler integrator,
condim 3, solref (0.02 s, 1) / solimp soft contacts (our stiffness and dissipation have no MuJoCo equivalent and
are not mapped), contact margin 0, parent-child contacts excluded. Timing as in ours_case.py: the first step
untimed, CPU and wall time of the rest; sampling (positions, penetration) is not timed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, ROOT, Penetration, read_scene, resolve_package, rpy_matrix, rpy_quat  # noqa: E402

MATH_ENV = {k: getattr(math, k) for k in ("sin", "cos", "tan", "exp", "sqrt", "pi", "tanh")}
MATH_ENV["abs"] = abs


def _fmt(v) -> str:
    return " ".join(repr(float(x)) for x in v)


def _pose_attrs(pose) -> dict:
    pose = pose or {}
    return {"pos": _fmt(pose.get("xyz") or [0, 0, 0]), "quat": _fmt(rpy_quat(pose.get("rpy") or [0, 0, 0]))}


def _solid_inertia(kind, size, mass):
    """Diagonal inertia (kg m^2) of a solid sphere (radius) / box (full sizes) of ``mass`` kg, and its volume."""
    if kind == "sphere":
        return [0.4 * mass * size ** 2] * 3, 4.0 / 3.0 * math.pi * size ** 3
    if kind == "box":
        a, b, c = size
        return [mass / 12 * (b * b + c * c), mass / 12 * (a * a + c * c), mass / 12 * (a * a + b * b)], a * b * c
    raise ValueError(f"shape {kind!r} not supported by the peer benchmark's MJCF")


def _geom(parent, kind, dims, friction, name=None, **attrs):
    a = {"type": kind, "friction": f"{friction!r} 0.005 0.0001"}
    if kind == "sphere":
        a["size"] = repr(float(dims))
    elif kind == "box":
        a["size"] = _fmt([0.5 * float(x) for x in dims])      # MJCF: half sizes
    if name:
        a["name"] = name
    a.update(attrs)
    return ET.SubElement(parent, "geom", a)


def urdf_to_mjcf(urdf_path: str, parent: ET.Element, assets: ET.Element, friction: float, base_pose=None,
                 mesh_prefix: str = "") -> list:
    """Append the URDF's link tree under ``parent`` (an MJCF body or the worldbody). A root link named ``world``
    is the world itself. Returns [(joint name, type, effort limit)] of the moving joints in file order."""
    path = Path(urdf_path)
    root = ET.parse(path).getroot()
    links = {ln.get("name"): ln for ln in root.findall("link")}
    joints = root.findall("joint")
    children = {}
    for j in joints:
        children.setdefault(j.find("parent").get("link"), []).append(j)
    child_links = {j.find("child").get("link") for j in joints}
    roots = [n for n in links if n not in child_links]
    if len(roots) != 1:
        raise ValueError(f"{path}: expected one root link, got {roots}")
    moving = []

    def origin(el):
        o = el.find("origin") if el is not None else None
        xyz = [float(x) for x in o.get("xyz", "0 0 0").split()] if o is not None else [0.0] * 3
        rpy = [float(x) for x in o.get("rpy", "0 0 0").split()] if o is not None else [0.0] * 3
        return xyz, rpy

    def add_link(name, body):
        ln = links[name]
        inertial = ln.find("inertial")
        if inertial is not None and float(inertial.find("mass").get("value")) > 0:
            xyz, rpy = origin(inertial)
            i = inertial.find("inertia")
            xx, yy, zz, xy, xz, yz = (float(i.get(k, 0)) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz"))
            In = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]
            R = rpy_matrix(rpy)            # the inertia in the link frame: R I R^T (MJCF: fullinertia, no quat)
            W = [[sum(R[a][k] * In[k][m] * R[b][m] for k in range(3) for m in range(3)) for b in range(3)]
                 for a in range(3)]
            full = [W[0][0], W[1][1], W[2][2], W[0][1], W[0][2], W[1][2]]
            ET.SubElement(body, "inertial", {"pos": _fmt(xyz),
                                             "mass": repr(float(inertial.find("mass").get("value"))),
                                             "fullinertia": _fmt(full)})
        for k, c in enumerate(ln.findall("collision")):
            xyz, rpy = origin(c)
            g = c.find("geometry")[0]
            at = {"pos": _fmt(xyz), "quat": _fmt(rpy_quat(rpy))}
            gname = f"{name}_c{k}"
            if g.tag == "sphere":
                _geom(body, "sphere", float(g.get("radius")), friction, gname, **at)
            elif g.tag == "box":
                _geom(body, "box", [float(x) for x in g.get("size").split()], friction, gname, **at)
            elif g.tag == "cylinder":
                _geom(body, "cylinder", None, friction, gname,
                      size=_fmt([float(g.get("radius")), 0.5 * float(g.get("length"))]), **at)
            elif g.tag == "mesh":
                file = resolve_package(g.get("filename"), path.parent)
                mname = f"{mesh_prefix}{name}_m{k}"
                scale = g.get("scale")
                ET.SubElement(assets, "mesh", {"name": mname, "file": file, **({"scale": scale} if scale else {})})
                _geom(body, "mesh", None, friction, gname, mesh=mname, **at)
            else:
                raise ValueError(f"{path}: collision <{g.tag}> not supported by the peer benchmark's MJCF")
        for j in children.get(name, []):
            child = j.find("child").get("link")
            xyz, rpy = origin(j)
            cb = ET.SubElement(body, "body", {"name": child, "pos": _fmt(xyz), "quat": _fmt(rpy_quat(rpy))})
            kind = j.get("type")
            if kind in ("revolute", "continuous", "prismatic"):
                ax = j.find("axis")
                axis = ax.get("xyz", "1 0 0") if ax is not None else "1 0 0"
                lim = j.find("limit")
                at = {"name": j.get("name"), "type": "slide" if kind == "prismatic" else "hinge", "axis": axis}
                if kind != "continuous" and lim is not None and "lower" in lim.attrib:
                    at["range"] = f"{float(lim.get('lower'))!r} {float(lim.get('upper'))!r}"
                    at["limited"] = "true"
                ET.SubElement(cb, "joint", at)
                effort = float(lim.get("effort", "inf")) if lim is not None else math.inf
                moving.append((j.get("name"), at["type"], effort))
            elif kind != "fixed":
                raise ValueError(f"{path}: joint type {kind!r} not supported by the peer benchmark's MJCF")
            add_link(child, cb)

    (rname,) = roots
    if rname == "world":
        for j in children.get(rname, []):
            if j.get("type") != "fixed":
                raise ValueError(f"{path}: a moving joint on the world link")
        add_link(rname, parent)       # the world link's geometry and children go on the parent
    else:
        bp = base_pose or {}
        body = ET.SubElement(parent, "body", {"name": rname, **_pose_attrs(bp)})
        add_link(rname, body)
    return moving


def build_mjcf(case) -> tuple[str, dict]:
    """The case's scene as MJCF text, and what the run needs: {"free": [object names], "joints": [(name, type,
    effort)], "q0": {joint: position}, "forces": [(body, force exprs, torque exprs)], "velocities": {name: 6}}."""
    scene = read_scene(case)
    base = case.scene.parent
    materials = scene.get("materials") or {}
    default = dict(materials.get("default") or {"stiffness": 1e5, "dissipation": 10.0, "friction": 0.5})
    mj = ET.Element("mujoco", {"model": case.name})
    ET.SubElement(mj, "compiler", {"angle": "radian", "inertiafromgeom": "false", "autolimits": "true"})
    ET.SubElement(mj, "option", {"timestep": repr(case.dt), "gravity": _fmt(scene.get("gravity", [0, 0, -9.81]))})
    assets = ET.SubElement(mj, "asset")
    world = ET.SubElement(mj, "worldbody")
    for e in scene.get("environment") or []:
        mu = float({**default, **(e.get("material") or {})}.get("friction", 0.5))
        at = _pose_attrs(e.get("pose"))
        if e["shape"] == "halfspace":
            _geom(world, "plane", None, mu, e["name"], size="0 0 1", **at)
        else:
            (kind, size), = e["shape"].items()
            _geom(world, kind, size, mu, e["name"], **at)
    meta = {"free": [], "joints": [], "q0": {}, "forces": [], "velocities": {}}
    for o in scene.get("objects") or []:
        mu = float({**default, **(o.get("material") or {})}.get("friction", 0.5))
        body = ET.SubElement(world, "body", {"name": o["name"], **_pose_attrs(o.get("pose"))})
        ET.SubElement(body, "freejoint", {"name": o["name"]})
        if "urdf" in o:
            link = ET.parse(base / o["urdf"]).getroot().findall("link")
            if len(link) != 1:
                raise ValueError(f"{o['urdf']}: a free object's URDF needs one link")
            sub = ET.Element("body")
            urdf_to_mjcf(str(base / o["urdf"]), sub, assets, mu)
            inner = sub.find("body")
            for child in list(inner):
                body.append(child)
        else:
            (kind, size), = o["shape"].items()
            size = float(size) if kind == "sphere" else [float(x) for x in size]
            _, vol = _solid_inertia(kind, size, 1.0)
            mass = float(o["mass"]) if "mass" in o else float(o["density"]) * vol
            inertia, _ = _solid_inertia(kind, size, mass)
            ET.SubElement(body, "inertial", {"pos": "0 0 0", "mass": repr(mass), "diaginertia": _fmt(inertia)})
            _geom(body, kind, size, mu, o["name"])
        meta["free"].append(o["name"])
        meta["velocities"][o["name"]] = [float(x) for x in (o.get("velocity") or [0] * 6)]
    robot = scene.get("robot")
    if robot is not None:
        if not isinstance(robot, dict):
            raise ValueError(f"{case.scene}: the MJCF builder takes a robot mapping (urdf, gains), not a preset")
        rmat = {**default, **((robot.get("materials") or {}).get("default") or {})}
        urdf = resolve_package(robot["urdf"], base)
        moving = urdf_to_mjcf(urdf, world, assets, float(rmat.get("friction", 0.5)), robot.get("base_pose"))
        meta["joints"] = moving
        meta["q0"] = {k: float(v) for k, v in (robot.get("initial_positions") or {}).items()}
        passive = set(scene.get("passive_joints") or [])
        gains = robot.get("gains") or {}
        act = ET.SubElement(mj, "actuator")
        for name, _, effort in moving:
            if name in passive:
                continue
            if name not in gains:
                raise ValueError(f"{case.scene}: joint {name!r} has no gains (list it in passive_joints or give gains)")
            at = {"name": f"{name}_pd", "joint": name, "kp": repr(float(gains[name]["kp"])),
                  "kv": repr(float(gains[name].get("kd", 0.0)))}
            if math.isfinite(effort) and effort > 0:
                at["forcerange"] = f"{-effort!r} {effort!r}"
            ET.SubElement(act, "position", at)
        for name, _, _ in moving:     # MuJoCo starts every joint at 0: the reference pose is ours at q = 0
            meta["q0"].setdefault(name, 0.0)
    for f in (scene.get("inputs") or {}).get("external_forces") or []:
        meta["forces"].append((f["body"], [str(x) for x in f.get("force", [0, 0, 0])],
                               [str(x) for x in f.get("torque", [0, 0, 0])]))
    ET.indent(mj)
    return ET.tostring(mj, encoding="unicode"), meta


def _expr(text):
    code = compile(str(text), "<scene>", "eval")
    return lambda t: float(eval(code, MATH_ENV, {"t": t}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--engine", default="mujoco", help="ignored (MuJoCo's default solver)")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--print-xml", action="store_true", help="print the MJCF and exit")
    a = ap.parse_args()
    c = CASES[a.case]
    xml, meta = build_mjcf(c)
    if a.print_xml:
        print(xml)
        return
    import mujoco
    import numpy as np
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    # initial state: free bodies from the body pose in the MJCF (qpos0), world-frame velocity -> MuJoCo's
    # (linear world, angular body frame); robot joints at their initial positions, actuator targets the same
    mujoco.mj_kinematics(model, data)
    for name, vel in meta["velocities"].items():
        jid = model.joint(name).id
        adr = model.jnt_dofadr[jid]
        R = data.xmat[model.body(name).id].reshape(3, 3)
        data.qvel[adr:adr + 3] = vel[:3]
        data.qvel[adr + 3:adr + 6] = R.T @ np.asarray(vel[3:], float)
    for name, _, _ in meta["joints"]:
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = meta["q0"][name]
    for i in range(model.nu):
        data.ctrl[i] = data.qpos[model.jnt_qposadr[model.actuator_trnid[i, 0]]]
    forces = [(model.body(b).id, [_expr(x) for x in f], [_expr(x) for x in tq]) for b, f, tq in meta["forces"]]
    xfrc = data.xfrc_applied

    def apply(t):
        for bid, f, tq in forces:
            xfrc[bid, 0:3] = [g(t) for g in f]
            xfrc[bid, 3:6] = [g(t) for g in tq]

    pen = Penetration(c)
    if c.compare == "bodies":
        names = list(meta["free"])
        bids = [model.body(n).id for n in names]

        def positions():
            return [data.xpos[b].tolist() for b in bids]
    else:
        names = [n for n, _, _ in meta["joints"]]
        adrs = [model.jnt_qposadr[model.joint(n).id] for n in names]

        def positions():
            return [[float(data.qpos[i])] for i in adrs]
    pen_bids = [(n, model.body(n).id) for n in meta["free"]]
    zadr = model.jnt_qposadr[model.joint("box_z").id] if c.penetration == "planar" else None

    def sample():
        if c.penetration == "bodies":
            pen.add_bodies({n: (data.xpos[b], data.xmat[b].reshape(3, 3)) for n, b in pen_bids})
        elif c.penetration == "planar":
            pen.add_planar(float(data.qpos[zadr]))
        return positions()

    n = int(round((a.duration or c.duration) / c.dt))
    every = int(round(c.sample / c.dt))
    samples = [[0.0, sample()]]
    apply(0.0)
    mujoco.mj_step(model, data)                 # untimed first step
    failed = None
    done = n
    untimed = 0.0
    untimed_wall = 0.0
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(1, n):
        apply(data.time)
        mujoco.mj_step(model, data)
        if (i + 1) % every == 0:
            s0, sw = time.process_time(), time.perf_counter()
            if not np.all(np.isfinite(data.qpos)):
                failed, done = "non-finite state", i
                break
            samples.append([round((i + 1) * c.dt, 9), sample()])
            untimed += time.process_time() - s0
            untimed_wall += time.perf_counter() - sw
    cpu, wall = time.process_time() - c0 - untimed, time.perf_counter() - w0 - untimed_wall
    print(json.dumps({"side": "mujoco", "case": a.case, "engine": "mujoco", "steps": max(done - 1, 1), "cpu_s": cpu,
                      "wall_s": wall, "names": names, "samples": samples, "penetration": pen.depth,
                      "final_contacts": int(data.ncon), "version": mujoco.__version__, "failed": failed,
                      "failed_at": done * c.dt if failed else None}))


if __name__ == "__main__":
    main()
