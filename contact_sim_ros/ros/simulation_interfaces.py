"""The standard ``simulation_interfaces`` (ROS 2 Jazzy definitions) served by the simulation node (rclpy glue).

Services and the action are named after their types in snake case, relative to the node's namespace (two
simulations in two namespaces coexist): ``get_simulator_features``, ``get_simulation_state``,
``set_simulation_state``, ``reset_simulation``, ``step_simulation``, ``simulate_steps`` (action),
``get_entities``, ``get_entity_state``, ``get_entities_states``, ``set_entity_state``, ``spawn_entity``,
``delete_entity``. What each supports, the result codes and the primitive resource format:
docs/ros_interface.md ("simulation_interfaces").

Entities: every robot (category ROBOT, by its name: the preset's for the scene key 'robot'), the free objects
(OBJECT, by name) and the static environment entries (STATIC_OBJECT, by name). States are ground truth in the
world frame at the entity's origin (a robot's: its base link): pose, twist (linear velocity of the origin and
angular velocity, world axes) and acceleration (from the last step's velocity change; zero for robots and the
environment; a robot mounted on another one moves with it).

Every read and write of the simulation runs on the stepping thread between two steps
(``SteppingLoop.request_call``). Spawning and deleting change the physics model, which is immutable: a new
Simulator is built (off the stepping thread) from the scene with the object added or removed, then swapped in
between two steps (``SteppingLoop.replace_simulator``) taking over the state of everything that still exists;
the node's model-dependent tables (TF, contact-wrench bodies, geometry names), the controllers
(``Controller.on_model_changed``) and the browser view (``ViewerProcess.send_scene`` / ``use_scene``) follow in
the same call. The robot comes first in the model, so its joints keep their indices; commands in flight (buffer,
command interfaces, trajectories) are kept.
"""

from __future__ import annotations

import ctypes
import gc
import math
import multiprocessing
import os
import re
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import pinocchio as pin
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup

from ..errors import ContactSimError, ModelError
from ..model.composition import free_joint_name
from ..model.loader import load_urdf, resolve_mesh_path, urdf_dir
from ..model.materials import ContactMaterial
from ..model.mesh_object import mesh_body, parse_mesh_entry, parse_mesh_uri
from ..model.robot_description import default_package_dirs, is_xacro, resolve_uri, urdf_from_description
from ..driver.loop import SteppingControl, step_count_problem, step_wait_timeout
from ..sim.divergence import scene_size
from ..sim.penetration import start_overlap
from ..sim.scene import parse_shape
from .state_messages import stamp

try:
    from simulation_interfaces.action import SimulateSteps
    from simulation_interfaces.msg import EntityCategory, EntityState, SimulationState, SimulatorFeatures
    from simulation_interfaces.srv import (DeleteEntity, GetEntities, GetEntitiesStates, GetEntityState,
                                           GetSimulationState, GetSimulatorFeatures, ResetSimulation,
                                           SetEntityState, SetSimulationState, SpawnEntity, StepSimulation)
except ImportError:   # built into the venv by scripts/ensure_venv.sh (msgs/simulation_interfaces)
    SimulateSteps = None

OK = 1
UNSUPPORTED, NOT_FOUND, INCORRECT_STATE, FAILED = 0, 2, 3, 4          # Result codes
SPAWN_FORMATS = ["urdf", "xacro", "primitive", "mesh"]
PRIMITIVE_SHAPES = {"box": 3, "sphere": 1, "cylinder": 2, "capsule": 2}
MATERIAL_KEYS = ("friction", "restitution", "stiffness", "dissipation")
# kg/m^3: the densest spawnable primitive, 4x osmium (22,590 kg/m^3, the densest element). A 1e12 kg 5 cm box
# (8e15 kg/m^3) was accepted and sank through the ground, then the divergence bound paused the simulation
MAX_DENSITY = 1.0e5
# a spawned mesh's size, checked before it is loaded: loading and preparing a mesh (trimesh's processing, the hull,
# the mass properties) holds the GIL the stepping thread needs: 1.3M triangles stopped the stepping for up to 7.1 s
# and delayed ~/pause by 6.9 s; 2M stalled 5.4 s and kept 1.4-2.3 GB (issue 44, fuzz finding 8). 300k triangles
# load in ~0.5 s; object meshes (YCB's scans: 16k-280k) stay below. Formats whose triangles cannot be counted
# without loading the file (GLB, glTF, DAE) are bounded by their size instead.
MAX_SPAWN_TRIANGLES = 300_000
# m: the largest dimension of a spawned object is at most max(SPAWN_SIZE_FLOOR_M, 2 x the scene's size: the largest
# distance of a joint origin from the world origin). A 1e6 m box (or a 1e30 kg one, under MAX_DENSITY only at such
# sizes) was accepted and the next step paused the simulation (issue 44)
SPAWN_SIZE_FLOOR_M = 10.0
MAX_SPAWN_MESH_BYTES = 32 * 2 ** 20
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_NAMESPACE = re.compile(r"^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*/?$")


def attach_simulation_interfaces(node, loop: SteppingControl):
    """Serve the simulation_interfaces services and action on ``node`` (a SimNode) over its stepping ``loop``
    (driver/loop.SteppingControl: what of the loop it may use; handed over by the node); None (with a warning)
    if the interface package is not installed."""
    if SimulateSteps is None:
        node.get_logger().warn("simulation_interfaces is not installed: its services are not served (run "
                               "scripts/ensure_venv.sh, or install ros-jazzy-simulation-interfaces)")
        return None
    return SimulationInterfaces(node, loop)


class SpawnError(Exception):
    """A spawn request that fails with ``code`` (a Result or SpawnEntity.Response code)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _result(out, code: int, message: str = ""):
    out.result.result, out.result.error_message = code, message
    return out


def parse_primitive(uri: str) -> tuple[str, dict]:
    """``primitive://<shape>?size=a,b,c&mass=kg`` (or ``density=kg/m^3``) with optional material keys
    (friction, restitution, stiffness, dissipation) -> (default name, scene object mapping without name and pose).
    SpawnError RESOURCE_PARSE_ERROR naming the problem."""
    bad = SpawnEntity.Response.RESOURCE_PARSE_ERROR
    parts = urlsplit(uri)
    kind = parts.netloc or parts.path.strip("/")
    if kind not in PRIMITIVE_SHAPES:
        raise SpawnError(bad, f"primitive shape {kind!r} unknown; valid: {', '.join(PRIMITIVE_SHAPES)} "
                              f"(e.g. primitive://box?size=0.05,0.05,0.05&mass=0.2&friction=0.8)")
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError as exc:
        raise SpawnError(bad, f"{uri}: malformed query: {exc}") from None
    valid = {"size", "mass", "density", *MATERIAL_KEYS}
    unknown = sorted(set(query) - valid)
    if unknown:
        raise SpawnError(bad, f"{uri}: unknown key(s) {unknown}; valid: {sorted(valid)}")

    def number(key):
        try:
            value = float(query[key][-1])
        except ValueError:
            raise SpawnError(bad, f"{uri}: {key} must be a number, got {query[key][-1]!r}") from None
        if not math.isfinite(value):
            raise SpawnError(bad, f"{uri}: {key} must be finite")
        return value
    if "size" not in query:
        raise SpawnError(bad, f"{uri}: 'size' is required ({kind}: {PRIMITIVE_SHAPES[kind]} number(s), m)")
    try:
        size = [float(x) for x in query["size"][-1].split(",")]
    except ValueError:
        raise SpawnError(bad, f"{uri}: size must be comma-separated numbers, got {query['size'][-1]!r}") from None
    if len(size) != PRIMITIVE_SHAPES[kind]:
        raise SpawnError(bad, f"{uri}: a {kind} needs {PRIMITIVE_SHAPES[kind]} size value(s), got {len(size)}")
    try:
        shape = parse_shape({kind: size if len(size) > 1 else size[0]}, "size")
    except ContactSimError as exc:
        raise SpawnError(bad, f"{uri}: {exc}") from None
    obj = {"shape": {kind: list(shape.size) if len(size) > 1 else shape.size[0]}}
    if ("mass" in query) == ("density" in query):
        raise SpawnError(bad, f"{uri}: give exactly one of 'mass' (kg) and 'density' (kg/m^3)")
    key = "mass" if "mass" in query else "density"
    value = number(key)
    if value <= 0:
        raise SpawnError(bad, f"{uri}: {key} must be > 0, got {value!r}")
    obj[key] = value
    density = value if key == "density" else value / shape.volume()
    if density > MAX_DENSITY:
        raise SpawnError(bad, f"{uri}: {key} {value:g} gives a density of {density:.3g} kg/m^3, beyond any solid "
                              f"(bound {MAX_DENSITY:g} kg/m^3; osmium: 22590): no contact could carry it")
    material = {k: number(k) for k in MATERIAL_KEYS if k in query}
    try:
        ContactMaterial.from_dict(material, where="material")
    except ContactSimError as exc:
        raise SpawnError(bad, f"{uri}: {exc}") from None
    if material:
        obj["material"] = material
    return kind, obj


def count_triangles(path: str) -> int | None:
    """The triangles of a mesh file counted without building the mesh: an OBJ's face lines, a binary STL's header
    count, an ASCII STL's facets, a PLY's or an OFF's face count in its header (a polygon counted as one: a lower
    bound); None for other formats (GLB, glTF, DAE)."""
    suffix = Path(path).suffix.lower()
    with open(path, "rb") as f:
        if suffix == ".stl":
            head = f.read(84)
            size = os.path.getsize(path)
            if len(head) == 84:
                n = int.from_bytes(head[80:84], "little")
                if size == 84 + 50 * n:
                    return n
            f.seek(0)
            return f.read().count(b"facet normal")
        if suffix == ".obj":
            data = f.read()
            return data.count(b"\nf ") + data.count(b"\nf\t") + data.startswith((b"f ", b"f\t"))
        if suffix == ".ply":
            for raw in f.read(65536).split(b"\n"):
                words = raw.split()
                if len(words) == 3 and words[0] == b"element" and words[1] == b"face":
                    return int(words[2])
                if raw.strip() == b"end_header":
                    return 0
            return None
        if suffix == ".off":
            lines = [ln.split(b"#")[0].strip() for ln in f.read(65536).split(b"\n")]
            lines = [ln for ln in lines if ln]
            if lines and lines[0].startswith(b"OFF"):
                rest = lines[0][3:].split() or (lines[1].split() if len(lines) > 1 else [])
                if len(rest) >= 2:
                    return int(rest[1])
            return None
    return None


def check_mesh_size(path: str) -> None:
    """SpawnError (UNSUPPORTED_ASSETS) naming the file, its triangles (or bytes) and the bound when the mesh is
    beyond MAX_SPAWN_TRIANGLES (or, uncountable, MAX_SPAWN_MESH_BYTES); before the mesh is loaded."""
    code = SpawnEntity.Response.UNSUPPORTED_ASSETS
    try:
        n = count_triangles(path)
    except (OSError, ValueError):
        return                    # the preparation says what is wrong with the file
    if n is not None and n > MAX_SPAWN_TRIANGLES:
        raise SpawnError(code, f"{path}: {n:,} triangles, more than the {MAX_SPAWN_TRIANGLES:,} a spawned mesh may "
                               f"have (loading it would stall the simulation): simplify it (e.g. trimesh's "
                               f"simplify_quadric_decimation, MeshLab's Quadric Edge Collapse Decimation)")
    size = os.path.getsize(path)
    if n is None and size > MAX_SPAWN_MESH_BYTES:
        raise SpawnError(code, f"{path}: {size:,} bytes, more than the {MAX_SPAWN_MESH_BYTES:,} a spawned mesh "
                               f"file of this format may have (its triangles are not counted before loading): "
                               f"simplify it or convert it to OBJ, STL or PLY")


def object_extent(obj: dict) -> float | None:
    """The largest dimension (m) of a primitive scene object (box: its largest side; sphere: its diameter; cylinder
    and capsule: the larger of the diameter and the length, a capsule's with its caps); None for other objects."""
    shape = obj.get("shape")
    if not shape:
        return None
    (kind, size), = shape.items()
    size = [float(x) for x in (size if isinstance(size, (list, tuple)) else [size])]
    if kind == "box":
        return max(size)
    if kind == "sphere":
        return 2.0 * size[0]
    radius, length = size
    return max(2.0 * radius, length + (2.0 * radius if kind == "capsule" else 0.0))


def _parse_mesh(uri: str) -> tuple[str, dict]:
    """A ``mesh://`` resource (model/mesh_object.parse_mesh_uri) -> (default name, scene object mapping); the file's
    size checked (check_mesh_size) before anything is loaded (a missing file is NOT_FOUND); the mesh is loaded,
    checked and its convex pieces made (decomposed, cached on disk) by ``prepare_mesh`` in a child process."""
    try:
        name, obj = parse_mesh_uri(uri, lambda f: resolve_mesh_path(f, None))
    except ModelError as exc:
        raise SpawnError(NOT_FOUND if "not found" in str(exc) else SpawnEntity.Response.RESOURCE_PARSE_ERROR,
                         str(exc)) from None
    except ContactSimError as exc:
        raise SpawnError(SpawnEntity.Response.RESOURCE_PARSE_ERROR, str(exc)) from None
    check_mesh_size(obj["mesh"])
    return name, obj


PREPARATION_NICENESS = 10   # of the mesh preparation child: ~10 % of a core's share beside a nice-0 thread


def _prepare_mesh_child(obj: dict, conn) -> None:
    """In the child process (low priority): the mesh object's body (load, checks, convex pieces: a decomposition
    is cached on disk, where the parent's rebuild reads it); sends ("ok", pieces) or ("error", kind, message).
    Niceness +10 (PREPARATION_NICENESS, the CoACD threads inherit it): on a core the stepping thread also wants it
    takes ~1/10 of that core (CFS weights 110 vs 1024), on a free core all of it. Not SCHED_IDLE, which it was
    before: on a machine whose cores other work keeps busy (two `yes` beside the node) SCHED_IDLE never ran and the
    spawn did not answer within minutes; niceness 19 would take ~1/70 of a core there."""
    try:
        os.nice(PREPARATION_NICENESS)
    except OSError:
        pass
    try:
        spec = parse_mesh_entry(obj, obj["mesh"], "spawned mesh")
        body = mesh_body(spec, mass=obj.get("mass"), density=obj.get("density"), quiet=True)
        points = np.concatenate([np.asarray(p, dtype=float) for p in body.pieces])
        extent = float(np.max(points.max(axis=0) - points.min(axis=0)))
        conn.send(("ok", len(body.pieces), body.mass, body.volume, extent))
    except ContactSimError as exc:
        conn.send(("error", "missing" if "not found" in str(exc) else "parse", str(exc)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which answers the request with it
        conn.send(("error", "failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class SimulationInterfaces:
    """The services and the action on one SimNode; see the module docstring."""

    def __init__(self, node, loop: SteppingControl):
        self.node = node
        self.loop = loop
        cfg = node.config
        base = node.config.scene_spec()
        self.base_spec = {**base, "objects": list(base.get("objects") or [])}    # the scene as launched
        self.spec = dict(self.base_spec)                                          # the scene now
        self.spawned: set[str] = set()
        self._stopped_at = self.loop.steps_done if cfg.start_paused else None     # STATE_STOPPED marker
        self._model_lock = threading.Lock()
        self.preparing: tuple | None = None        # (entity name, pid) while a spawned mesh is prepared
        self.preparations = self.preparation_failures = 0     # mesh preparation processes started / that failed
        self.last_preparation_failure = ""         # why the last one failed ('' after a later success): diagnostics
        ns = node.get_namespace()
        self.world = node.world
        self._world_names = {"", node.world, node.prefix + node.world}
        changes = MutuallyExclusiveCallbackGroup()     # delete, reset, state changes: one at a time
        spawns = MutuallyExclusiveCallbackGroup()      # spawns one at a time; a mesh's preparation blocks no change
        queries = ReentrantCallbackGroup()
        for srv, name, fn, group in (
                (GetSimulatorFeatures, "get_simulator_features", self._srv_features, queries),
                (GetSimulationState, "get_simulation_state", self._srv_get_state, queries),
                (SetSimulationState, "set_simulation_state", self._srv_set_state, changes),
                (ResetSimulation, "reset_simulation", self._srv_reset, changes),
                (StepSimulation, "step_simulation", self._srv_step, queries),
                (GetEntities, "get_entities", self._srv_entities, queries),
                (GetEntityState, "get_entity_state", self._srv_entity_state, queries),
                (GetEntitiesStates, "get_entities_states", self._srv_entities_states, queries),
                (SetEntityState, "set_entity_state", self._srv_set_entity_state, queries),
                (SpawnEntity, "spawn_entity", self._srv_spawn, spawns),
                (DeleteEntity, "delete_entity", self._srv_delete, changes)):
            node.create_service(srv, name, fn, callback_group=group)
        self.action = ActionServer(node, SimulateSteps, "simulate_steps", execute_callback=self._execute_steps,
                                   goal_callback=lambda _goal: GoalResponse.ACCEPT,
                                   cancel_callback=lambda _goal: CancelResponse.ACCEPT,
                                   callback_group=ReentrantCallbackGroup())
        node.get_logger().info(f"simulation_interfaces served under '{ns}' (get_simulator_features, spawn_entity, "
                               f"... and the simulate_steps action)")

    # ------------------------------------------------------------------------------ entities

    def entities(self, sim=None) -> dict:
        """name -> (EntityCategory value, kind 'robot' | 'object' | 'environment') of the current model."""
        sim = sim or self.node.sim
        scene = sim.scene
        out = {}
        for robot in scene.robots:         # every robot of the world (scene keys 'robot' and 'robots')
            out[robot.name] = (EntityCategory.CATEGORY_ROBOT, "robot")
        for o in scene.objects:
            out[o.name] = (EntityCategory.CATEGORY_OBJECT, "object")
        for e in scene.environment:
            out[e.name] = (EntityCategory.CATEGORY_STATIC_OBJECT, "environment")
        return out

    def _filtered(self, filters) -> tuple[int, str, list]:
        """(code, message, names) of the entities matching EntityFilters."""
        if filters.tags.tags:
            return UNSUPPORTED, "entity tags are not supported (no ENTITY_TAGS feature)", []
        if filters.bounds.type != 0 or len(filters.bounds.points):
            return UNSUPPORTED, "bounds filters are not supported (no ENTITY_BOUNDS feature)", []
        try:
            pattern = re.compile(filters.filter) if filters.filter else None
        except re.error as exc:
            return FAILED, f"invalid regular expression {filters.filter!r}: {exc}", []
        cats = {c.category for c in filters.categories}
        names = [n for n, (cat, _) in self.entities().items()
                 if (pattern is None or pattern.search(n)) and (not cats or cat in cats)]
        return OK, "", names

    def _state(self, sim, name: str, out=None):
        """EntityState of ``name`` (stepping thread)."""
        st = out or EntityState()
        stamp(sim.t, st.header.stamp)
        st.header.frame_id = self.world
        cat, kind = self.entities(sim)[name]
        lin = ang = acc_lin = acc_ang = np.zeros(3)
        if kind == "object":
            M = sim.body_pose(name)
            body = sim.model.free_body(name)
            v = sim.v[body.v_slice]
            R = M.rotation
            lin, ang = R @ v[:3], R @ v[3:]
            a = (v - self.loop.v_prev[body.v_slice]) / sim.time_step
            acc_lin, acc_ang = R @ (a[:3] + np.cross(v[3:], v[:3])), R @ a[3:]
        elif kind == "robot":          # its base link; a robot mounted on another one moves with it
            M, lin, ang = self._robot_base_state(sim, name)
        else:
            M = next(e.pose for e in sim.scene.environment if e.name == name)
        p, q = M.translation, pin.Quaternion(M.rotation).coeffs()
        pose = st.pose
        pose.position.x, pose.position.y, pose.position.z = (float(x) for x in p)
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = (float(x) for x in q)
        for vec, val in ((st.twist.linear, lin), (st.twist.angular, ang), (st.acceleration.linear, acc_lin),
                         (st.acceleration.angular, acc_ang)):
            vec.x, vec.y, vec.z = (float(x) for x in val)
        return st

    def _robot_base_state(self, sim, name: str):
        """(world pose, linear velocity of its origin, angular velocity; world axes) of a robot's base link, from
        the current state (a private Pinocchio data: the simulator's is not touched)."""
        m = sim.model
        pm = m.pin_model
        if getattr(self, "_base_data_of", None) is not pm:
            self._base_data_of, self._base_data = pm, pin.Data(pm)
        data = self._base_data
        fid = pm.getFrameId(m.robot(name).base_frame, pin.FrameType.BODY)
        pin.forwardKinematics(pm, data, sim.q, sim.v)
        M = pin.updateFramePlacement(pm, data, fid)
        twist = pin.getFrameVelocity(pm, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        return M.copy(), np.array(twist.linear), np.array(twist.angular)

    def _frame_pose(self, sim, frame_id: str) -> pin.SE3 | None:
        """World pose of a reference frame: the world, an entity, or a robot link (with or without the node's
        frame prefix); None if unknown (stepping thread)."""
        if frame_id in self._world_names:
            return pin.SE3.Identity()
        name = frame_id[len(self.node.prefix):] if self.node.prefix and frame_id.startswith(self.node.prefix) \
            else frame_id
        ents = self.entities(sim)
        if name in ents and ents[name][1] != "object":
            return self._pose_of(sim, name)
        try:
            return sim.body_pose(name)
        except ContactSimError:
            return None

    def _pose_of(self, sim, name):
        st = self._state(sim, name)
        p, o = st.pose.position, st.pose.orientation
        return pin.XYZQUATToSE3(np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w]))

    @staticmethod
    def _pose_to_se3(pose) -> tuple[pin.SE3 | None, str]:
        p, o = pose.position, pose.orientation
        vals = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w], dtype=float)
        if not np.all(np.isfinite(vals)):
            return None, "pose has non-finite values"
        norm = float(np.linalg.norm(vals[3:]))
        if abs(norm - 1.0) > 1e-3:
            return None, f"orientation quaternion is not unit (norm {norm:.6g})"
        if np.linalg.norm(vals[:3]) > 1.0e3:
            return None, "position farther than 1000 m from the world origin"
        vals[3:] /= norm
        return pin.XYZQUATToSE3(vals), ""

    # ------------------------------------------------------------------------------ services: simulation

    def _srv_features(self, request, response):
        F = SimulatorFeatures
        f = response.features
        f.features = [F.SPAWNING, F.DELETING, F.ENTITY_CATEGORIES, F.SPAWNING_RESOURCE_STRING,
                      F.ENTITY_STATE_GETTING, F.ENTITY_STATE_SETTING, F.SIMULATION_RESET, F.SIMULATION_RESET_TIME,
                      F.SIMULATION_RESET_STATE, F.SIMULATION_RESET_SPAWNED, F.SIMULATION_STATE_GETTING,
                      F.SIMULATION_STATE_SETTING, F.SIMULATION_STATE_PAUSE, F.STEP_SIMULATION_SINGLE,
                      F.STEP_SIMULATION_MULTIPLE, F.STEP_SIMULATION_ACTION]
        f.spawn_formats = list(SPAWN_FORMATS)
        f.custom_info = ("contact_sim_ros: free objects from URDF/xacro (files or resource strings; fixed joints "
                         "only) or primitives 'primitive://box?size=0.05,0.05,0.05&mass=0.2&friction=0.8' "
                         "(box, sphere, cylinder, capsule; mass or density; friction, restitution, stiffness, "
                         "dissipation) or mesh files 'mesh://mug.obj?mass=0.3&collision=auto' (OBJ, STL, PLY, "
                         "GLB, DAE; scale, density, CoACD parameters); the robot and the static environment cannot "
                         "be spawned, moved or deleted; "
                         "reset scopes: ALL/DEFAULT, TIME|STATE together, SPAWNED; docs/ros_interface.md")
        return response

    def _sim_state(self) -> int:
        S = SimulationState
        if not self.loop.paused:
            return S.STATE_PLAYING
        return S.STATE_STOPPED if self._stopped_at == self.loop.steps_done else S.STATE_PAUSED

    def _srv_get_state(self, request, response):
        response.state.state = self._sim_state()
        return _result(response, OK)

    def _srv_set_state(self, request, response):
        S, R = SimulationState, SetSimulationState.Response
        target, now = request.state.state, self._sim_state()
        if target == now:
            return _result(response, R.ALREADY_IN_TARGET_STATE, f"already in state {target}")
        if target == S.STATE_PLAYING:
            self._stopped_at = None
            self.loop.set_paused(False)
        elif target == S.STATE_PAUSED:       # from playing; from stopped: paused there without stepping
            self._stopped_at = None
            self.loop.set_paused(True)
        elif target == S.STATE_STOPPED:      # paused at the initial state: a full reset while paused
            self.loop.set_paused(True)
            code, message = self._reset_all()
            if code != OK:
                return _result(response, R.STATE_TRANSITION_ERROR, message)
            self._stopped_at = self.loop.steps_done
        elif target == S.STATE_QUITTING:
            return _result(response, UNSUPPORTED, "quitting through the service is not supported: stop the node "
                                                  "process (SIGINT)")
        else:
            return _result(response, R.INCORRECT_TRANSITION, f"state {target} cannot be set (worlds are not "
                                                             f"loaded or unloaded)")
        return _result(response, OK)

    def _reset_all(self) -> tuple[int, str]:
        """SCOPE_ALL: spawned entities removed, deleted ones back, time and state to the start."""
        with self._model_lock:
            if self.spec["objects"] != self.base_spec["objects"]:
                code, message = self._swap(dict(self.base_spec))
                if code != OK:
                    return code, message
                self.spawned.clear()
        return self._reset_time_state()

    def _reset_time_state(self) -> tuple[int, str]:
        if not self.loop.request_reset():
            return FAILED, "the reset timed out or the stepping thread stopped"
        self.node.publish_static()
        return OK, ""

    def _srv_reset(self, request, response):
        R = ResetSimulation.Request
        scope = request.scope
        if scope in (R.SCOPE_DEFAULT, R.SCOPE_ALL, R.SCOPE_TIME | R.SCOPE_STATE | R.SCOPE_SPAWNED):
            code, message = self._reset_all()
        elif scope == R.SCOPE_TIME | R.SCOPE_STATE:
            code, message = self._reset_time_state()
        elif scope == R.SCOPE_SPAWNED:
            with self._model_lock:
                spec = {**self.spec, "objects": [o for o in self.spec["objects"] if o["name"] not in self.spawned]}
                code, message = self._swap(spec) if self.spawned else (OK, "")
                if code == OK:
                    self.spawned.clear()
        else:
            code, message = UNSUPPORTED, (f"reset scope {scope} is not supported: SCOPE_ALL (or DEFAULT), "
                                          f"SCOPE_TIME | SCOPE_STATE together, or SCOPE_SPAWNED")
        return _result(response, code, message)

    def _srv_step(self, request, response):
        n = int(request.steps)
        why = step_count_problem(n)
        if why:
            return _result(response, FAILED, f"steps: {why}")
        if not self.loop.paused:
            return _result(response, FAILED, "the simulation is playing: pause it first (set_simulation_state)")
        if n and not self.loop.request_steps(n, timeout=step_wait_timeout(n)):
            return _result(response, FAILED, f"stepping {n} step(s) did not complete (timed out, preempted by "
                                             f"a pause/reset, or the stepping thread stopped)")
        self._stopped_at = None if n else self._stopped_at
        return _result(response, OK)

    def _execute_steps(self, goal_handle):
        n = int(goal_handle.request.steps)
        result = SimulateSteps.Result()
        why = step_count_problem(n)
        if why:
            goal_handle.abort()
            return _result(result, FAILED, f"steps: {why}")
        if not self.loop.paused:
            goal_handle.abort()
            return _result(result, FAILED, "the simulation is playing: pause it first (set_simulation_state)")
        batch = max(1, min(50, n // 10))
        done = 0
        feedback = SimulateSteps.Feedback()
        while done < n:
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                return _result(result, FAILED, f"canceled after {done} of {n} steps")
            if not self.loop.paused:
                goal_handle.abort()
                return _result(result, FAILED, f"the simulation was resumed after {done} of {n} steps")
            k = min(batch, n - done)
            if not self.loop.request_steps(k, timeout=step_wait_timeout(k)):
                goal_handle.abort()
                return _result(result, FAILED, f"stepping stopped after about {done} of {n} steps (preempted "
                                               f"or the stepping thread stopped)")
            done += k
            self._stopped_at = None
            feedback.completed_steps, feedback.remaining_steps = done, n - done
            goal_handle.publish_feedback(feedback)
        goal_handle.succeed()
        return _result(result, OK)

    # ------------------------------------------------------------------------------ services: entities

    def _srv_entities(self, request, response):
        code, message, names = self._filtered(request.filters)
        response.entities = names
        return _result(response, code, message)

    def _srv_entity_state(self, request, response):
        if request.entity not in self.entities():
            return _result(response, NOT_FOUND, self._unknown(request.entity))
        try:
            self.loop.request_call(lambda: self._state(self.loop.sim, request.entity, response.state))
        except KeyError:     # deleted meanwhile
            return _result(response, NOT_FOUND, self._unknown(request.entity))
        return _result(response, OK)

    def _srv_entities_states(self, request, response):
        code, message, names = self._filtered(request.filters)
        if code == OK:
            def read():
                sim = self.loop.sim
                known = self.entities(sim)
                return [(n, self._state(sim, n)) for n in names if n in known]
            pairs = self.loop.request_call(read)
            response.entities = [n for n, _ in pairs]
            response.states = [s for _, s in pairs]
        return _result(response, code, message)

    def _unknown(self, name) -> str:
        return f"no entity {name!r}; entities: {', '.join(self.entities())}"

    def _srv_set_entity_state(self, request, response):
        name, st = request.entity, request.state
        ents = self.entities()
        if name not in ents:
            return _result(response, NOT_FOUND, self._unknown(name))
        twist = np.array([st.twist.linear.x, st.twist.linear.y, st.twist.linear.z,
                          st.twist.angular.x, st.twist.angular.y, st.twist.angular.z], dtype=float)
        if ents[name][1] != "object":
            if np.any(twist != 0):
                return _result(response, FAILED, f"{name!r} is static ({ents[name][1]}): it cannot have a twist")
            movable = ", ".join(n for n, e in ents.items() if e[1] == "object")
            return _result(response, UNSUPPORTED, f"{name!r} is the {ents[name][1]}: only free objects can be "
                                                  f"moved ({movable})")
        M, why = self._pose_to_se3(st.pose)
        if M is None or not np.all(np.isfinite(twist)):
            return _result(response, SetEntityState.Response.INVALID_POSE, why or "twist has non-finite values")

        def apply():
            sim = self.loop.sim
            bounds = sim.divergence_bounds()
            if bounds is not None:      # a twist that the next step would report as diverged: refused now
                speed, angular = float(np.linalg.norm(twist[:3])), float(np.linalg.norm(twist[3:]))
                if speed > bounds[0] or angular > bounds[1]:
                    return FAILED, (f"twist of {name!r} beyond the simulation's divergence bounds at t = {sim.t:.6f} "
                                    f"s: speed {speed:.4g} m/s (bound {bounds[0]:.4g}), angular speed {angular:.4g} "
                                    f"rad/s (bound {bounds[1]:.4g}); the step would fail")
            ref = self._frame_pose(sim, st.header.frame_id)
            if ref is None:
                return NOT_FOUND, f"reference frame {st.header.frame_id!r} is not known"
            if name not in self.entities(sim):
                return NOT_FOUND, self._unknown(name)
            W = ref * M
            body = sim.model.free_body(name)
            q, v = sim.q.copy(), sim.v.copy()
            q[body.q_slice] = pin.SE3ToXYZQUAT(W)
            Rw = W.rotation.T @ ref.rotation                 # twist axes: the reference frame's
            v[body.v_slice] = np.concatenate([Rw @ twist[:3], Rw @ twist[3:]])
            sim.set_state(q, v)
            self.loop.v_prev[body.v_slice] = v[body.v_slice]
            return OK, ""
        code, message = self.loop.request_call(apply, publish=True)
        return _result(response, code, message)

    def _srv_delete(self, request, response):
        name = request.entity
        with self._model_lock:
            ents = self.entities()
            if name not in ents:
                return _result(response, NOT_FOUND, self._unknown(name))
            if ents[name][1] != "object":
                return _result(response, UNSUPPORTED, f"{name!r} is the {ents[name][1]}: only free objects can be "
                                                      f"deleted")
            spec = {**self.spec, "objects": [o for o in self.spec["objects"] if o["name"] != name]}
            code, message = self._swap(spec)
            if code == OK:
                self.spawned.discard(name)
        return _result(response, code, message)

    def _srv_spawn(self, request, response):
        """The request checked and a mesh prepared (seconds to a minute: in a child process) before the model lock
        is taken, so that pausing, resetting, deleting go on meanwhile (spawns are one at a time: their own callback
        group); the swap under the lock, onto the scene as it is then."""
        try:
            name, obj = self._spawn_object(request)
            extent = object_extent(obj)
            if "mesh" in obj:
                extent = self._prepare_mesh(name, obj)
            if extent is not None:
                self._check_size(name, extent)
        except SpawnError as exc:
            return _result(response, exc.code, str(exc))
        with self._model_lock:
            code, message = self._swap({**self.spec, "objects": self.spec["objects"] + [obj]}, spawned=name)
            if code == OK:
                self.spawned.add(name)
                response.entity_name = name
        return _result(response, code, message)

    # ------------------------------------------------------------------------------ spawning

    def _prepare_mesh(self, name: str, obj: dict) -> float:
        """Load and check the mesh of ``obj`` and make its convex pieces (a decomposition: seconds to a minute,
        cached on disk) in a child process at low priority (``_prepare_mesh_child``), while this thread waits
        without the GIL: the stepping, ~/pause and the other services go on; the rebuild then reads the cached
        pieces. SpawnError with the child's reason, or FAILED when it ended without one (killed, crashed: logged)."""
        R = SpawnEntity.Response
        log = self.node.get_logger()
        ctx = multiprocessing.get_context("spawn")       # no fork of a process with DDS threads
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_prepare_mesh_child, args=(obj, send), name=f"prepare mesh {name}", daemon=True)
        start = time.monotonic()
        proc.start()
        send.close()
        self.preparing = (name, proc.pid)
        self.preparations += 1
        log.info(f"spawn_entity '{name}': preparing {obj['mesh']} in process {proc.pid} (low priority); the "
                 f"simulation runs on, the entity appears when it is ready")
        message = stopped = None
        try:
            while message is None:
                if recv.poll(0.1):
                    try:
                        message = recv.recv()
                    except EOFError:          # the child ended without an answer
                        break
                elif not proc.is_alive() and not recv.poll(0):
                    break
                elif not self.loop.running:
                    stopped = True
                    proc.kill()
                    break
            proc.join(10.0)
        finally:
            self.preparing = None
            recv.close()
        if stopped:
            raise SpawnError(FAILED, f"{obj['mesh']}: not spawned: the simulation stopped while it was prepared")
        if message is None:
            self.preparation_failures += 1
            self.last_preparation_failure = (f"spawn_entity '{name}': the process preparing {obj['mesh']} (pid "
                                             f"{proc.pid}) ended with code {proc.exitcode} without an answer")
            log.error(f"{self.last_preparation_failure} (killed? out of memory?); nothing spawned")
            raise SpawnError(FAILED, f"{obj['mesh']}: its preparation process ended with code {proc.exitcode} "
                                     f"without an answer (killed? out of memory?)")
        if message[0] == "error":
            code = {"missing": NOT_FOUND, "parse": R.RESOURCE_PARSE_ERROR}.get(message[1], FAILED)
            raise SpawnError(code, message[2])
        _, pieces, mass, volume, extent = message
        self.last_preparation_failure = ""
        if volume > 0 and mass / volume > MAX_DENSITY:
            raise SpawnError(R.RESOURCE_PARSE_ERROR, f"{obj['mesh']}: mass {mass:g} kg in {volume:.3g} m^3 gives a "
                                                     f"density of {mass / volume:.3g} kg/m^3, beyond any solid "
                                                     f"(bound {MAX_DENSITY:g} kg/m^3; osmium: 22590): no contact "
                                                     f"could carry it")
        log.info(f"spawn_entity '{name}': {obj['mesh']} prepared ({pieces} convex piece(s), "
                 f"{time.monotonic() - start:.1f} s)")
        return extent

    def diagnostic_status(self, node_name: str) -> DiagnosticStatus:
        """``<node_name>: spawned meshes``, the processes that prepare spawned meshes (``_prepare_mesh``): OK (and
        which one runs), WARN after one ended without an answer (killed, out of memory, crashed: which, its exit
        code) until a later one succeeds; values: the preparing process id, preparations, failures, last_failure."""
        preparing = self.preparing
        if self.last_preparation_failure:
            level, message = 1, f"{self.last_preparation_failure}; nothing was spawned"
        elif preparing is not None:
            level, message = 0, f"preparing '{preparing[0]}' in process {preparing[1]} (low priority)"
        else:
            level, message = 0, "no mesh being prepared"
        values = [KeyValue(key="preparing_process_id", value=str(preparing[1]) if preparing else ""),
                  KeyValue(key="preparations", value=str(self.preparations)),
                  KeyValue(key="preparation_failures", value=str(self.preparation_failures)),
                  KeyValue(key="last_preparation_failure", value=self.last_preparation_failure)]
        return DiagnosticStatus(level=bytes([level]), name=f"{node_name}: spawned meshes", message=message,
                                hardware_id="simulation_interfaces spawn_entity", values=values)

    def _check_size(self, name: str, extent: float) -> None:
        """SpawnError (RESOURCE_PARSE_ERROR) when an object of largest dimension ``extent`` (m) is beyond the scene's
        size bound (SPAWN_SIZE_FLOOR_M)."""
        sim = self.node.sim
        size = scene_size(sim.model.pin_model, sim.q)
        bound = max(SPAWN_SIZE_FLOOR_M, 2.0 * size)
        if extent > bound:
            raise SpawnError(SpawnEntity.Response.RESOURCE_PARSE_ERROR,
                             f"'{name}' is {extent:.4g} m across, larger than the {bound:.3g} m a spawned object may "
                             f"be in this scene (the larger of {SPAWN_SIZE_FLOOR_M:g} m and twice the scene's size, "
                             f"{size:.3g} m): the simulation could not carry it")

    def _spawn_object(self, request) -> tuple[str, dict]:
        """(entity name, scene object mapping) of a SpawnEntity request; SpawnError with the spec's code."""
        R = SpawnEntity.Response
        sim = self.node.sim
        if request.entity_namespace and not _NAMESPACE.match(request.entity_namespace):
            raise SpawnError(R.NAMESPACE_INVALID, f"entity_namespace {request.entity_namespace!r} is not a valid "
                                                  f"ROS namespace")
        uri, text = request.uri.strip(), request.resource_string
        if not uri and not text.strip():
            raise SpawnError(R.NO_RESOURCE, "both uri and resource_string are empty")
        if uri.startswith("primitive:") or (not uri and text.strip().startswith("primitive:")):
            default_name, obj = parse_primitive(uri or text.strip())
        elif uri.startswith("mesh://") or (not uri and text.strip().startswith("mesh://")):
            default_name, obj = _parse_mesh(uri or text.strip())
        elif uri:
            default_name, obj = self._urdf_file(uri)
        elif text.lstrip().startswith("<"):
            default_name, obj = self._urdf_object(text, os.getcwd(), "<resource_string>")
        else:
            raise SpawnError(R.UNSUPPORTED_FORMAT, f"resource_string is neither a URDF document nor a primitive "
                                                   f"URI; formats: {', '.join(SPAWN_FORMATS)}")
        name = self._entity_name(request.name, default_name, request.allow_renaming, sim)
        if "urdf" in obj:
            obj["urdf"] = self._unique_links(obj["urdf"], name, sim)
            self._check_urdf(obj["urdf"], name)
        # initial pose in its reference frame (read on the stepping thread)
        M, why = self._pose_to_se3(request.initial_pose.pose)
        if M is None:
            raise SpawnError(R.INVALID_POSE, why)
        frame = request.initial_pose.header.frame_id
        ref = self.loop.request_call(lambda: self._frame_pose(self.loop.sim, frame))
        if ref is None:
            raise SpawnError(R.INVALID_POSE, f"reference frame {frame!r} of initial_pose is not known")
        W = ref * M
        obj.update(name=name, pose={"xyz": [float(x) for x in W.translation],
                                    "rpy": [float(x) for x in pin.rpy.matrixToRpy(W.rotation)]})
        return name, obj

    def _entity_name(self, requested: str, default: str, allow_renaming: bool, sim) -> str:
        R = SpawnEntity.Response
        taken = set(self.entities(sim)) | {f.name for f in sim.model.pin_model.frames} | \
            set(sim.model.geometry_names) | set(sim.model.pin_model.names)
        name = requested or default
        if not name:
            if not allow_renaming:
                raise SpawnError(R.NAME_INVALID, "name is empty and the resource names no entity")
            name = "entity"
        if not _NAME.match(name):
            if not allow_renaming or requested:
                raise SpawnError(R.NAME_INVALID, f"name {name!r} is invalid: letters, digits, '_', '.', '-', not "
                                                 f"starting with a digit")
            name = "entity"
        if name in taken or name + "_freejoint" in taken:
            if not allow_renaming:
                raise SpawnError(R.NAME_NOT_UNIQUE, f"name {name!r} is taken (an entity, link or geometry of the "
                                                    f"scene); set allow_renaming or choose another")
            k = 1
            while f"{name}_{k}" in taken or f"{name}_{k}_freejoint" in taken:
                k += 1
            name = f"{name}_{k}"
        return name

    def _urdf_file(self, uri: str) -> tuple[str, dict]:
        R = SpawnEntity.Response
        parts = urlsplit(uri)
        if parts.scheme not in ("", "file", "package"):
            raise SpawnError(R.UNSUPPORTED_FORMAT, f"uri scheme {parts.scheme!r} is not supported: a file path, "
                                                   f"file://, package:// or primitive://")
        path = unquote(parts.path) if parts.scheme == "file" else uri
        if not (path.endswith(".urdf") or is_xacro(Path(path))):
            raise SpawnError(R.UNSUPPORTED_FORMAT, f"{uri}: format not supported; formats: "
                                                   f"{', '.join(SPAWN_FORMATS)} (*.urdf, *.xacro, primitive://)")
        found = resolve_uri(path, os.getcwd(), default_package_dirs())
        if found is None and not path.startswith("package://") and (urdf_dir() / path).is_file():
            found = str(urdf_dir() / path)           # as in scene files: objects/mug.urdf
        if found is None:
            raise SpawnError(NOT_FOUND, f"{uri}: file not found (relative paths: the working directory, then the "
                                        f"package's urdf/)")
        try:
            expanded = urdf_from_description(found)
        except ModelError as exc:
            raise SpawnError(R.RESOURCE_PARSE_ERROR, str(exc)) from None
        return self._urdf_object(Path(expanded).read_text(), str(Path(found).resolve().parent), found)

    def _urdf_object(self, xml: str, base_dir: str, source: str) -> tuple[str, dict]:
        """Parse a URDF document; relative mesh paths made absolute against ``base_dir``."""
        R = SpawnEntity.Response
        try:
            root = ET.fromstring(xml)
        except ET.ParseError as exc:
            raise SpawnError(R.RESOURCE_PARSE_ERROR, f"{source}: malformed URDF XML: {exc}") from None
        if root.tag != "robot":
            raise SpawnError(R.RESOURCE_PARSE_ERROR, f"{source}: not a URDF: the root element is <{root.tag}>")
        moving = [j.get("name") for j in root.findall("joint") if j.get("type") != "fixed"]
        if moving:
            raise SpawnError(UNSUPPORTED, f"{source}: articulated objects cannot be spawned (joints {moving} are "
                                          f"not fixed): an object is one rigid body")
        for mesh in root.iter("mesh"):
            fn = mesh.get("filename", "")
            if fn and "://" not in fn and not os.path.isabs(fn):
                mesh.set("filename", os.path.join(base_dir, fn))
        return root.get("name", ""), {"urdf": ET.tostring(root, encoding="unicode")}

    @staticmethod
    def _unique_links(xml: str, name: str, sim) -> str:
        """Links and joints renamed ``<name>/<link>`` when one of them clashes with a frame of the scene (the same
        URDF spawned twice)."""
        root = ET.fromstring(xml)
        pm = sim.model.pin_model
        names = [e.get("name") for e in root.findall("link")] + [e.get("name") for e in root.findall("joint")]
        if not any(pm.existFrame(n) for n in names if n):
            return xml
        for e in root.findall("link") + root.findall("joint"):
            e.set("name", f"{name}/{e.get('name')}")
        for tag in ("parent", "child"):
            for e in root.iter(tag):
                e.set("link", f"{name}/{e.get('link')}")
        for e in root.iter("mimic"):
            e.set("joint", f"{name}/{e.get('joint')}")
        return ET.tostring(root, encoding="unicode")

    @staticmethod
    def _check_urdf(xml: str, name: str) -> None:
        """Load the object alone to give the spec's codes (missing meshes, bad mass properties ...)."""
        R = SpawnEntity.Response
        try:
            load_urdf(xml, floating_base_name=free_joint_name(name))
        except ModelError as exc:
            msg = str(exc)
            code = R.MISSING_ASSETS if "not found" in msg else \
                R.UNSUPPORTED_ASSETS if "convex hull failed" in msg else R.RESOURCE_PARSE_ERROR
            raise SpawnError(code, msg) from None

    # ------------------------------------------------------------------------------ the model swap

    def _swap(self, spec: dict, spawned: str | None = None) -> tuple[int, str]:
        """Build a Simulator of ``spec`` and swap it in (caller holds _model_lock). ``spawned``: the object new in
        ``spec``; refused (INVALID_POSE, nothing swapped) when it starts inside another body deeper than the
        penetration bound (the first step would fail and pause the simulation: a box inside the robot's base)."""
        node = self.node
        try:
            sim = node.sim.rebuilt(node.config.load_scene(spec))
        except ContactSimError as exc:
            return FAILED, f"the scene cannot be rebuilt: {exc}"
        if spawned is not None:
            overlap = start_overlap(sim)
            if overlap is not None and spawned in (overlap.link_a, overlap.link_b):
                other = overlap.link_b if overlap.link_a == spawned else overlap.link_a
                return SpawnEntity.Response.INVALID_POSE, (
                    f"'{spawned}' would start inside '{other}' ({overlap.geometry_a!r} and {overlap.geometry_b!r} "
                    f"overlap by {100 * overlap.depth:.3g} cm, more than the thinner one's thickness "
                    f"{100 * overlap.thickness:.3g} cm allows): the first step could not carry it; spawn it "
                    f"elsewhere")
        try:
            node.swap_simulator(sim)
        except Exception as exc:   # noqa: BLE001 - reported to the caller; the old model stays
            return FAILED, f"swapping in the new model failed: {exc!r}"
        self.spec = spec
        del sim
        gc.collect()                  # garbage with cycles (rclpy entities, messages) now, not at the next full gc
        _trim_heap()
        return OK, ""


def _trim_heap() -> None:
    """Give freed heap pages back to the OS (glibc), so the process's RSS follows what the models use."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
