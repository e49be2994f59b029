"""A live 3-D view of a scene in the browser (viser), with contact points and force arrows.

The viewer knows nothing of ROS or engines: it is given a plain-data description of the scene once
(``describe_scene``) and then, at its update rate, the state to draw: the world poses of the moving
geometries, the contact points and forces, the sim time and the real-time
factor (``ViewerFrame``; ``simulator_frame`` takes one from a ``Simulator``).

* ``SceneViewer`` serves the page from this process (tests, notebooks);
* ``ViewerProcess`` runs it in a child process (the headless runner and the ROS node use it). The stepping
  process only copies the moving geometries' poses (from the placements it has already computed) and the contact
  arrays into a preallocated shared-memory block (``FrameBuffer``, a sequence-locked latest-frame slot: no
  pickling, no pipe, no queue thread); the child (at ``os.nice`` +10) pulls the newest frame at its own rate,
  only while a browser is connected, and sends the browser only what changed.
  Pause / reset buttons come back through counters in the same block (``events()``), which the owner applies to
  its own loop (the node: through the same paths as its ~/pause and ~/reset services).

Overhead on the stepping process: ``benchmarks/viewer/run.py`` (docs/benchmarks.md, "Browser viewer overhead").
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pinocchio as pin
from scipy.spatial import ConvexHull

from ..model.multibody_model import MultibodyModel

ROBOT_COLOR = (200, 200, 205)
OBJECT_COLOR = (60, 130, 230)
ENVIRONMENT_COLOR = (170, 140, 100)
CONTACT_COLOR = (240, 40, 40)


def _pose7(M: pin.SE3) -> np.ndarray:
    """(x, y, z, qw, qx, qy, qz) of an SE3."""
    x, y, z, w = pin.Quaternion(M.rotation).coeffs()
    return np.array([*M.translation, w, x, y, z])


@dataclass
class VisualGeometry:
    """What the browser draws for one collision geometry: plain data, so it can cross a process boundary.

    kind: box (size, m), sphere (radius), cylinder (radius, length; along local z), halfspace (normal),
    mesh (vertices, faces). pose: initial world pose (x, y, z, qw, qx, qy, qz); moving: updated every frame.
    index: the geometry's index in the collision model (its placement is ``GeometryData.oMg[index]``).
    """

    name: str
    kind: str
    params: dict
    color: tuple
    moving: bool
    pose: np.ndarray
    index: int = -1


def describe_scene(model: MultibodyModel, objects=()) -> list[VisualGeometry]:
    """The visual description of every collision geometry of ``model`` at its neutral configuration.

    ``objects``: the scene's ObjectSpecs. A mesh object (``mesh:`` or ``visual:``, not a URDF) is drawn as its
    visual mesh with the file's colours (as the cameras draw it), not as its collision geometry (a non-convex
    mesh's convex pieces): its parts ride on the pose of the body's first collision geometry."""
    pm = model.pin_model
    data = pin.Data(pm)
    gd = pin.GeometryData(model.collision_model)
    pin.updateGeometryPlacements(pm, data, model.collision_model, gd, pin.neutral(pm))
    free_joints = {b.joint_id for b in model.free_bodies}
    visuals = _object_visuals(model, objects)
    drawn = set()
    out = []
    for g, go in enumerate(model.collision_model.geometryObjects):
        geom, kind = go.geometry, type(go.geometry).__name__
        # static environment hangs off the universe frame itself; the robot's fixed base off its link
        color = ENVIRONMENT_COLOR if go.parentFrame == 0 else \
            OBJECT_COLOR if go.parentJoint in free_joints else ROBOT_COLOR
        pose = _pose7(gd.oMg[g])
        if go.parentJoint in visuals:
            if go.parentJoint in drawn:               # drawn once, on the first geometry; its other pieces not
                continue
            drawn.add(go.parentJoint)
            parts = visuals[go.parentJoint]
            g_M_joint = go.placement.inverse()
            for k, (v, f, rgba) in enumerate(parts):
                local = v @ g_M_joint.rotation.T + g_M_joint.translation
                out.append(VisualGeometry(f"{go.name}/visual_{k}", "mesh", {"vertices": local, "faces": f},
                                          tuple(int(round(255 * c)) for c in rgba[:3]), True, pose, g))
            continue
        if kind == "Box":
            vg = ("box", {"size": 2.0 * np.asarray(geom.halfSide)})
        elif kind == "Sphere":
            vg = ("sphere", {"radius": float(geom.radius)})
        elif kind == "Cylinder":
            vg = ("cylinder", {"radius": float(geom.radius), "length": 2.0 * float(geom.halfLength)})
        elif kind == "Capsule":
            v, f = _capsule_mesh(float(geom.radius), 2.0 * float(geom.halfLength))
            vg = ("mesh", {"vertices": v, "faces": f})
        elif kind == "Halfspace":
            n = np.asarray(geom.n, float)
            R = pin.Quaternion.FromTwoVectors(np.array([0.0, 0.0, 1.0]), n).matrix()
            plane = gd.oMg[g] * pin.SE3(R, n * float(geom.d))
            vg = ("halfspace", {"normal": plane.rotation[:, 2]})
            pose = _pose7(plane)
        elif kind.startswith("Convex"):
            pts = np.asarray(geom.points(), dtype=float).reshape(-1, 3)     # coal 3: a method
            vg = ("mesh", {"vertices": pts, "faces": _outward_faces(pts, ConvexHull(pts))})
        else:
            continue
        out.append(VisualGeometry(go.name, vg[0], vg[1], color, go.parentJoint != 0, pose, g))
    return out


def _object_visuals(model: MultibodyModel, objects) -> dict:
    """Free-body joint id -> [(vertices (n, 3) m in the joint frame, faces (m, 3), rgba 0..1)] of each mesh object
    of ``objects`` (its ``visual`` file, else its ``mesh`` file), read as the cameras read them."""
    out = {}
    meshes = [o for o in objects if o.urdf is None and (o.visual is not None or o.mesh is not None)]
    if not meshes:
        return out
    # deferred: trimesh (seconds to import), only for a scene with mesh objects
    from ..cameras.visual_scene import mesh_file_visuals
    for obj in meshes:
        spec = obj.visual if obj.visual is not None else obj.mesh
        body = model.free_body(obj.name)
        pm = model.pin_model
        joint_M_body = pm.frames[pm.getFrameId(body.frame_name)].placement
        parts = []
        for v, f, rgba, _closed in mesh_file_visuals(spec.path, spec.scale, getattr(spec, "color", None)):
            parts.append((np.asarray(v, float) @ joint_M_body.rotation.T + joint_M_body.translation,
                          np.asarray(f, np.int32), rgba))
        out[body.joint_id] = parts
    return out


@dataclass
class ViewerFrame:
    """One frame for the viewer: world poses (M, 7) (x, y, z, qw, qx, qy, qz) of the moving geometries (in the
    order of ``describe_scene``'s moving entries), sim time (s), real-time factor, contact points (N, 3) m and the
    forces drawn at them (N, 3) N, world frame; ``paused``: the simulation's pause state (the Pause button shows
    "Resume" while it is paused), None if unknown."""

    poses: np.ndarray
    t: float
    real_time_factor: float | None
    contact_points: np.ndarray | None
    contact_forces: np.ndarray | None
    paused: bool | None = None
    contact_count: int | None = None      # contacts in the scene (>= len(contact_points) if some were dropped)
    scene: int = 0                        # the scene description the poses belong to (ViewerProcess.send_scene)


def moving_geometry_ids(geometries: "list[VisualGeometry]") -> list[int]:
    """Collision-model indices of the geometries a frame carries poses for (the moving ones, in order)."""
    return [vg.index for vg in geometries if vg.moving]


def geometry_poses(geometry_data: pin.GeometryData, ids, out: np.ndarray | None = None) -> np.ndarray:
    """(len(ids), 7) world poses (x, y, z, qw, qx, qy, qz) of the geometries ``ids`` from placements the
    simulator has already computed (``GeometryData.oMg``): one ``pin.SE3ToXYZQUAT`` per geometry (~3 us each)
    and a column swap, no new kinematics."""
    out = np.empty((len(ids), 7)) if out is None else out
    oMg = geometry_data.oMg
    for k, g in enumerate(ids):
        out[k] = pin.SE3ToXYZQUAT(oMg[g])                 # x y z qx qy qz qw
    out[:, 3:] = out[:, [6, 3, 4, 5]]
    return out


def simulator_frame(sim, geometry_ids, real_time_factor: float | None = None,
                    paused: bool | None = None) -> ViewerFrame:
    """Snapshot a Simulator's current state for the viewer (copies: safe to hand to another thread);
    ``geometry_ids``: ``moving_geometry_ids`` of the viewer's geometries."""
    poses = geometry_poses(sim.geometry_data, geometry_ids)
    c = sim.contacts
    if c is None or c.size == 0 or sim.last_result is None:
        return ViewerFrame(poses, sim.t, real_time_factor, None, None, paused)
    forces = display_forces(c, sim.contact_forces_world())
    return ViewerFrame(poses, sim.t, real_time_factor, c.point[: len(forces)].copy(), forces, paused, c.size)


class SceneViewer:
    """Serves the scene on http://host:port.

    geometries: a MultibodyModel or its ``describe_scene`` output. force_scale: arrow length per newton (m/N).
    update_rate: maximum updates per second of wall time (``due()`` tells callers when to update).
    ``on_pause(paused)`` / ``on_reset()``: called (from viser's thread) when the Pause / Reset buttons are clicked.
    Each ``show`` sends the browser only what changed (moved geometries, new arrows, changed texts).
    """

    POSE_TOLERANCE = 1e-6     # m (and quaternion components): smaller moves are not sent
    ARROW_TOLERANCE = 1e-3    # m: arrows whose ends moved less than this (1 mm on screen) are not re-sent

    def __init__(self, geometries: "list[VisualGeometry] | MultibodyModel", host: str = "127.0.0.1",
                 port: int = 8080, force_scale: float = 0.01, update_rate: float = 30.0,
                 on_pause: Callable[[bool], None] | None = None, on_reset: Callable[[], None] | None = None,
                 camera_position=(1.6, -1.4, 1.2), camera_target=(0.3, 0.0, 0.3)):
        import viser  # optional dependency: only the viewer needs it

        if isinstance(geometries, MultibodyModel):
            geometries = describe_scene(geometries)
        self.geometries = geometries
        self.force_scale = float(force_scale)
        self.update_period = 1.0 / float(update_rate)
        self._last_update = -np.inf
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.url = f"http://{host}:{self.server.get_port()}"
        self.server.scene.set_up_direction("+z")
        self.server.initial_camera.position = camera_position
        self.server.initial_camera.look_at = camera_target
        # The side panel first: viser replays its state to each new page in creation order and the page draws
        # what has arrived. Created after the scene's geometries, the panel's content came last, so a page
        # captured as soon as the scene showed had an empty panel (issue 17: Chromium's --screenshot does not wait
        # for websocket messages; with the panel created first, 2 of 3 such screenshots show it instead of 0 of
        # 3). A screenshot should still wait for the panel: HeadlessChromium.panel_layout.
        gui = self.server.gui
        self.time_text = gui.add_text("sim time (s)", initial_value="0.000", disabled=True)
        self.rtf_text = gui.add_text("real-time factor", initial_value="-", disabled=True)
        self.contacts_text = gui.add_text("contacts", initial_value="0", disabled=True)
        self.paused = False
        self.pause_button = gui.add_button("Pause")
        self.reset_button = gui.add_button("Reset")
        self._on_pause = on_pause
        self._frusta = {}        # camera name -> viser frustum handle (add_camera)
        self._scene_nodes = []   # every scene node of the geometries (removed by set_geometries)
        self._build_geometries(geometries)
        self.contact_count = 0
        self.total_force = np.zeros(3)
        self._arrows = None
        self._points = None
        self._segments = np.zeros((0, 2, 3))          # arrows as last sent
        self.messages_sent = 0                        # scene/GUI updates sent (tests, benchmark)

        @self.pause_button.on_click
        def _(_event) -> None:
            requested = not self.paused
            self.set_paused(requested)          # shown at once; the owner's state confirms it in later frames
            if on_pause is not None:
                on_pause(requested)

        @self.reset_button.on_click
        def _(_event) -> None:
            if on_reset is not None:
                on_reset()

    # ------------------------------------------------------------------------------------ build

    def set_geometries(self, geometries: "list[VisualGeometry] | MultibodyModel") -> None:
        """Draw another scene (the model changed: objects spawned or deleted): the old geometries are removed
        from the page, the new ones added at their description's poses; frames must then carry the new moving
        geometries' poses."""
        if isinstance(geometries, MultibodyModel):
            geometries = describe_scene(geometries)
        with self.server.atomic():
            for node in self._scene_nodes:
                node.remove()
            self._build_geometries(geometries)
        self.messages_sent += len(self._scene_nodes)

    def _build_geometries(self, geometries: "list[VisualGeometry]") -> None:
        self.geometries = geometries
        self._scene_nodes = []
        self._handles = {}
        self._moving = []        # indices into ``geometries`` whose pose is updated
        for g, vg in enumerate(geometries):
            handle = self._add_geometry(f"/scene/g{g}_{vg.name.replace('/', '_')}", vg)
            if handle is not None:
                self._handles[g] = handle
                if vg.moving:
                    self._moving.append(g)
        self.moving_ids = [geometries[g].index for g in self._moving]    # their collision-model indices
        assert self.moving_ids == moving_geometry_ids(geometries)
        self._poses = np.array([geometries[g].pose for g in self._moving]).reshape(-1, 7)   # as last sent

    def _add_geometry(self, name: str, vg: "VisualGeometry"):
        scene, p, color = self.server.scene, vg.params, vg.color
        pose = {"position": vg.pose[:3], "wxyz": vg.pose[3:]}
        handle = None
        if vg.kind == "box":
            handle = scene.add_box(name, color=color, dimensions=tuple(p["size"]), **pose)
        elif vg.kind == "sphere":
            handle = scene.add_icosphere(name, radius=p["radius"], color=color, subdivisions=3, **pose)
        elif vg.kind == "cylinder":
            handle = scene.add_cylinder(name, radius=p["radius"], height=p["length"], color=color, **pose)
        elif vg.kind == "halfspace":
            self._scene_nodes.append(scene.add_grid(name + "_grid", width=3.0, height=3.0, cell_size=0.1,
                                                    section_size=0.5, position=vg.pose[:3] + 1e-4 * p["normal"],
                                                    wxyz=vg.pose[3:]))
            handle = scene.add_box(name, color=color, dimensions=(3.0, 3.0, 0.01),
                                   position=vg.pose[:3] - 0.005 * p["normal"], wxyz=vg.pose[3:])
        elif vg.kind == "mesh":
            handle = scene.add_mesh_simple(name, p["vertices"], p["faces"], color=color, flat_shading=True, **pose)
        if handle is not None:
            self._scene_nodes.append(handle)
        return handle

    # ----------------------------------------------------------------------------------- update

    def due(self) -> bool:
        """True (and the clock restarted) when one update period of wall time has passed since the last
        update: callers skip the drawing work in between, so the simulation pays for at most ``update_rate``
        redraws per second."""
        now = time.monotonic()
        if now - self._last_update < self.update_period:
            return False
        self._last_update = now
        return True

    def show(self, frame: "ViewerFrame") -> None:
        """Draw a frame: the moving geometries' poses, the contacts, the time texts, the pause state."""
        poses = np.asarray(frame.poses, float)
        if poses.shape != self._poses.shape:
            raise ValueError(f"frame poses have shape {poses.shape}; this viewer draws {len(self._moving)} moving "
                             f"geometries (poses of moving_geometry_ids(geometries), (x, y, z, qw, qx, qy, qz))")
        with self.server.atomic():            # one batch for the browser (and one wake-up of viser's loop)
            self.update(poses, frame.t, frame.real_time_factor, frame.contact_points, frame.contact_forces,
                        contact_count=frame.contact_count)
            if frame.paused is not None:
                self.set_paused(frame.paused)

    @property
    def client_count(self) -> int:
        """Browsers connected now."""
        return len(self.server.get_clients())

    def update_from_simulator(self, sim, real_time_factor: float | None = None) -> None:
        self.show(simulator_frame(sim, self.moving_ids, real_time_factor))

    def update(self, moving_poses: np.ndarray, t: float, real_time_factor: float | None = None,
               contact_points: np.ndarray | None = None, contact_forces: np.ndarray | None = None,
               contact_count: int | None = None) -> None:
        """moving_poses: (M, 7) world pose (x, y, z, qw, qx, qy, qz) of each moving geometry (in the order of
        ``geometries`` with ``moving`` set); contact_points (N, 3) m and contact_forces (N, 3) N, world frame."""
        moved = np.flatnonzero(np.abs(moving_poses - self._poses).max(axis=1, initial=0.0) > self.POSE_TOLERANCE)
        if len(moved):
            with self.server.atomic():
                for k in moved:
                    h = self._handles[self._moving[k]]
                    h.position = moving_poses[k, :3]
                    h.wxyz = moving_poses[k, 3:]
            self._poses[moved] = moving_poses[moved]
            self.messages_sent += len(moved)
        self._set_text(self.time_text, f"{t:.3f}")
        if real_time_factor is not None:
            self._set_text(self.rtf_text, f"{real_time_factor:.2f}")
        self._set_contacts(contact_points, contact_forces, contact_count)

    def set_paused(self, paused: bool) -> None:
        """Show the simulation's pause state on the button ("Resume" while paused)."""
        paused = bool(paused)
        if paused != self.paused:
            self.paused = paused
            self.pause_button.label = "Resume" if paused else "Pause"
            self.messages_sent += 1

    def _set_text(self, handle, text: str) -> None:
        if handle.value != text:
            handle.value = text
            self.messages_sent += 1

    def _set_contacts(self, points, forces, contact_count=None) -> None:
        scene = self.server.scene
        if points is None or forces is None or len(forces) == 0:
            self.contact_count, self.total_force = 0, np.zeros(3)
            if self._arrows is not None and self._arrows.visible:
                self._arrows.visible = False
                self._points.visible = False
                self.messages_sent += 2
            self._segments = np.zeros((0, 2, 3))
            self._set_text(self.contacts_text, "0")
            return
        points = np.asarray(points, float)[: len(forces)]
        forces = np.asarray(forces, float)
        carrying = np.linalg.norm(forces, axis=1) > 1e-9
        self.contact_count = int(np.count_nonzero(carrying))
        self.total_force = forces.sum(axis=0)
        extra = f", {contact_count - len(forces)} more not drawn" if contact_count and contact_count > len(forces) \
            else ""
        self._set_text(self.contacts_text,
                       f"{self.contact_count} (sum {np.linalg.norm(self.total_force):.2f} N{extra})")
        segments = np.stack([points, points + self.force_scale * forces], axis=1)[carrying]
        if len(segments) == 0:
            segments = np.zeros((1, 2, 3))
        if (self._arrows is not None and self._arrows.visible and segments.shape == self._segments.shape
                and np.abs(segments - self._segments).max() <= self.ARROW_TOLERANCE):
            return
        self._segments = segments
        # one batched node for all arrows; viser arrays are replaced wholesale: re-adding the node under the
        # same name updates it in place
        self._arrows = scene.add_arrows("/contacts/forces", segments, colors=CONTACT_COLOR,
                                        shaft_radius=0.003, head_radius=0.008, head_length=0.015)
        self._points = scene.add_point_cloud("/contacts/points", points, colors=CONTACT_COLOR, point_size=0.01)
        self.messages_sent += 2

    def add_camera(self, name: str, fov_y: float, aspect: float, scale: float = 0.15) -> None:
        """A simulated camera's frustum (``fov_y``: vertical field of view, rad; ``aspect``: width / height),
        placed and filled by ``show_camera``; hidden until then."""
        self._frusta[name] = self.server.scene.add_camera_frustum(
            f"/cameras/{name}", fov=float(fov_y), aspect=float(aspect), scale=scale, color=(255, 140, 0),
            visible=False, variant="wireframe")

    def show_camera(self, name: str, pose: np.ndarray, image: np.ndarray | None = None) -> None:
        """Camera ``name``'s optical frame (x, y, z, qw, qx, qy, qz; z forward, x right, y down: viser's frustum
        convention) and its newest color image (H, W, 3) uint8 drawn in the frustum."""
        h = self._frusta[name]
        with self.server.atomic():
            h.position = pose[:3]
            h.wxyz = pose[3:]
            if image is not None:
                h.image = image
            h.visible = True
        self.messages_sent += 1

    def close(self) -> None:
        self.server.stop()


def display_forces(contacts, forces_on_b: np.ndarray) -> np.ndarray:
    """Forces to draw: on the moving body of each contact (on A where B is static world geometry)."""
    flip = np.where(contacts.joint_b[: len(forces_on_b)] == 0, -1.0, 1.0)
    return forces_on_b * flip[:, None]


def _outward_faces(points: np.ndarray, hull: ConvexHull) -> np.ndarray:
    faces = hull.simplices.copy()
    centroid = points.mean(axis=0)
    a, b, c = points[faces[:, 0]], points[faces[:, 1]], points[faces[:, 2]]
    inward = np.einsum("ij,ij->i", np.cross(b - a, c - a), a - centroid) < 0
    faces[inward] = faces[inward][:, ::-1]
    return faces


def _capsule_mesh(radius: float, length: float, segments: int = 24, rings: int = 8):
    """Vertices and faces of a capsule along z (cylinder length ``length`` plus hemispherical caps)."""
    pts = []
    for k in range(rings + 1):                      # top cap, from pole to equator
        phi = 0.5 * np.pi * k / rings
        z = 0.5 * length + radius * np.cos(phi)
        r = radius * np.sin(phi)
        pts += [(r * np.cos(a), r * np.sin(a), z) for a in np.linspace(0, 2 * np.pi, segments, endpoint=False)]
    for k in range(rings + 1):                      # bottom cap, from equator to pole
        phi = 0.5 * np.pi + 0.5 * np.pi * k / rings
        z = -0.5 * length + radius * np.cos(phi)
        r = radius * np.sin(phi)
        pts += [(r * np.cos(a), r * np.sin(a), z) for a in np.linspace(0, 2 * np.pi, segments, endpoint=False)]
    pts = np.array(pts)
    hull = ConvexHull(pts)
    return pts, _outward_faces(pts, hull)


class FrameBuffer:
    """The newest viewer frame in shared memory: one writer (the stepping process), one reader (the viewer).

    Two ``multiprocessing`` RawArrays (no pickling per frame, no pipe, no feeder thread): an int64 header and a
    float64 block holding sim time, real-time factor, the poses (M, 7) of the M moving geometries (room for
    ``pose_capacity``: the model may change, ``set_geometry_ids``) and up to ``capacity`` contact points (m) and
    forces (N). Each frame carries the number of the scene description its poses belong to (``SCENE``). The
    writer makes the sequence counter odd, writes, and makes it even again (a seqlock); the reader copies and keeps
    the copy only if the counter was even and unchanged around it, so a frame is never drawn half-written and the
    writer never waits. The same header carries the buttons' requests back (counters,
    so no click is lost) and the owner's pause state.
    """

    (SEQ, N_DRAWN, N_TOTAL, PAUSED, PAUSE_REQ, PAUSE_VALUE, RESET_REQ, PAUSE_ACK, CLOSING, HAS_RTF, SHOWN,
     N_MOVING, SCENE, CLIENTS) = range(14)
    HEADER_SIZE = 16
    EXTRA_POSES = 1024        # room for this many more moving geometries than at start (spawned objects)

    def __init__(self, geometry_ids, capacity: int = 512, context=None, pose_capacity: int | None = None):
        if capacity < 1:
            raise ValueError(f"FrameBuffer needs a contact capacity >= 1, got {capacity}")
        ctx = context or multiprocessing.get_context("spawn")
        self.geometry_ids, self.capacity = [int(g) for g in geometry_ids], int(capacity)
        self.pose_capacity = len(self.geometry_ids) + self.EXTRA_POSES if pose_capacity is None else int(pose_capacity)
        if self.pose_capacity < len(self.geometry_ids):
            raise ValueError(f"FrameBuffer: pose_capacity {self.pose_capacity} < {len(self.geometry_ids)} geometries")
        self._raw = (ctx.RawArray("q", self.HEADER_SIZE),
                     ctx.RawArray("d", 2 + 7 * self.pose_capacity + 6 * self.capacity))
        self._views()
        self.header[self.PAUSED] = -1          # unknown until the owner says
        self.header[self.N_MOVING] = len(self.geometry_ids)
        self.poses = self._pose_block[:len(self.geometry_ids)]
        self._events_seen = (0, 0)

    def _views(self) -> None:
        self.header = np.frombuffer(self._raw[0], dtype=np.int64)
        data = np.frombuffer(self._raw[1], dtype=np.float64)
        nq, cap = 7 * self.pose_capacity, self.capacity
        self.scalars = data[:2]                                   # t (s), real-time factor
        self._pose_block = data[2:2 + nq].reshape(-1, 7)
        self.points = data[2 + nq:2 + nq + 3 * cap].reshape(cap, 3)
        self.forces = data[2 + nq + 3 * cap:].reshape(cap, 3)

    def __getstate__(self):             # crosses to the viewer process once, when it is spawned
        return {"geometry_ids": self.geometry_ids, "pose_capacity": self.pose_capacity, "capacity": self.capacity,
                "_raw": self._raw, "_events_seen": (0, 0)}

    def set_geometry_ids(self, geometry_ids, scene: int) -> None:
        """(writer) Frames from now on carry the poses of these geometries, for scene description ``scene``.
        ValueError if they do not fit (``pose_capacity``)."""
        ids = [int(g) for g in geometry_ids]
        if len(ids) > self.pose_capacity:
            raise ValueError(f"the viewer has room for {self.pose_capacity} moving geometries, the model has "
                             f"{len(ids)}")
        h = self.header
        h[self.SEQ] += 1                                          # odd: no frame while the layout changes
        self.geometry_ids = ids
        self.poses = self._pose_block[:len(ids)]
        h[self.N_MOVING], h[self.SCENE] = len(ids), int(scene)
        h[self.SEQ] += 1

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._views()
        self.poses = self._pose_block[:len(self.geometry_ids)]

    # ------------------------------------------------------------------------- writer (owner)

    def write(self, poses: np.ndarray | None, t: float, real_time_factor: float | None = None,
              contact_points: np.ndarray | None = None, contact_forces: np.ndarray | None = None) -> None:
        """Publish a frame (copies into shared memory; a few microseconds). poses: (M, 7), or None when they
        were written into ``self.poses`` already. More contacts than ``capacity``: the ``capacity`` largest
        forces are kept."""
        h = self.header
        h[self.SEQ] += 1                                          # odd: being written
        if poses is not None:
            self.poses[:] = poses
        self._write_rest(t, real_time_factor, contact_points, contact_forces)
        h[self.SEQ] += 1                                          # even: complete

    def _write_rest(self, t, real_time_factor, contact_points, contact_forces) -> None:
        h = self.header
        n = 0 if contact_forces is None else len(contact_forces)
        if n > self.capacity:
            keep = np.argpartition(-np.einsum("ij,ij->i", contact_forces, contact_forces), self.capacity)
            keep = keep[: self.capacity]
            contact_points, contact_forces = contact_points[keep], contact_forces[keep]
        m = min(n, self.capacity)
        self.scalars[0] = t
        h[self.HAS_RTF] = real_time_factor is not None
        self.scalars[1] = real_time_factor if real_time_factor is not None else 0.0
        if m:
            self.points[:m] = contact_points[:m]
            self.forces[:m] = contact_forces[:m]
        h[self.N_DRAWN], h[self.N_TOTAL] = m, n

    def write_simulator(self, sim, real_time_factor: float | None = None) -> None:
        """Publish a Simulator's current state: the moving geometries' poses (from its ``geometry_data``), the
        contact points and the (display) forces."""
        h = self.header
        h[self.SEQ] += 1                                          # odd: being written
        geometry_poses(sim.geometry_data, self.geometry_ids, self.poses)     # straight into shared memory
        c = sim.contacts
        if c is None or c.size == 0 or sim.last_result is None:
            self._write_rest(sim.t, real_time_factor, None, None)
        else:
            forces = display_forces(c, sim.contact_forces_world())
            self._write_rest(sim.t, real_time_factor, c.point[: len(forces)], forces)
        h[self.SEQ] += 1                                          # even: complete

    def set_paused(self, paused: bool) -> None:
        """The owner's pause state, shown on the page; also acknowledges the pause clicks taken by ``events``
        (until then the page keeps showing the button as clicked)."""
        self.header[self.PAUSED] = int(bool(paused))
        self.header[self.PAUSE_ACK] = self._events_seen[0]

    def events(self) -> list:
        """Button requests since the last call: ("pause", bool) (the newest) and ("reset",) per click."""
        h = self.header
        pause_req, reset_req = int(h[self.PAUSE_REQ]), int(h[self.RESET_REQ])
        seen_pause, seen_reset = self._events_seen
        if pause_req == seen_pause and reset_req == seen_reset:
            return []
        out = []
        if pause_req != seen_pause:
            out.append(("pause", bool(h[self.PAUSE_VALUE])))
        out += [("reset",)] * (reset_req - seen_reset)
        self._events_seen = (pause_req, reset_req)
        return out

    # ------------------------------------------------------------------------- reader (viewer)

    def read(self, last_seq: int = -1) -> "tuple[int, ViewerFrame] | None":
        """(sequence number, a copy of the newest frame) if there is a complete frame newer than ``last_seq``,
        else None."""
        h = self.header
        for _ in range(100):
            seq = int(h[self.SEQ])
            if seq == last_seq or seq == 0:
                return None
            if seq % 2:
                time.sleep(1e-5)                                  # being written: look again
                continue
            m, n = int(h[self.N_DRAWN]), int(h[self.N_TOTAL])
            n_moving, scene = int(h[self.N_MOVING]), int(h[self.SCENE])
            t, rtf, has_rtf = float(self.scalars[0]), float(self.scalars[1]), bool(h[self.HAS_RTF])
            poses = self._pose_block[:n_moving].copy()
            points, forces = self.points[:m].copy(), self.forces[:m].copy()
            if int(h[self.SEQ]) == seq:
                paused = int(h[self.PAUSED])
                if int(h[self.PAUSE_ACK]) != int(h[self.PAUSE_REQ]):
                    paused = -1       # a click not yet taken by the owner: keep the button as clicked
                return seq, ViewerFrame(poses, t, rtf if has_rtf else None, points if m else None,
                                        forces if m else None, None if paused < 0 else bool(paused), n, scene)
        return None

    def request_pause(self, paused: bool) -> None:
        h = self.header
        h[self.PAUSE_VALUE] = int(bool(paused))
        h[self.PAUSE_REQ] += 1

    def request_reset(self) -> None:
        self.header[self.RESET_REQ] += 1


@dataclass(frozen=True)
class CameraView:
    """What the viewer draws of a simulated camera: its name, vertical field of view (rad) and image size (px)."""

    name: str
    fov_y: float
    width: int
    height: int


class CameraSlots:
    """The newest image and optical-frame pose of each simulated camera in shared memory (one writer: the render
    thread; one reader: the viewer process), with the same seqlock as FrameBuffer: the writer never waits. Images
    are kept at most ``MAX_WIDTH`` px wide (every k-th pixel): the frustum's picture, not the sensor's."""

    MAX_WIDTH = 320

    def __init__(self, cameras: "list[CameraView]", context=None):
        ctx = context or multiprocessing.get_context("spawn")
        self.cameras = list(cameras)
        self.stride = [max(1, -(-c.width // self.MAX_WIDTH)) for c in self.cameras]
        self.shapes = [(-(-c.height // k), -(-c.width // k), 3) for c, k in zip(self.cameras, self.stride)]
        self._raw = [(ctx.RawArray("q", 1), ctx.RawArray("d", 7), ctx.RawArray("B", int(np.prod(shape))))
                     for shape in self.shapes]
        self._views()
        self.index = {c.name: k for k, c in enumerate(self.cameras)}

    def _views(self) -> None:
        self.seq = [np.frombuffer(r[0], dtype=np.int64) for r in self._raw]
        self.pose = [np.frombuffer(r[1], dtype=np.float64) for r in self._raw]
        self.image = [np.frombuffer(r[2], dtype=np.uint8).reshape(shape) for r, shape in zip(self._raw, self.shapes)]

    def __getstate__(self):
        return {"cameras": self.cameras, "stride": self.stride, "shapes": self.shapes, "_raw": self._raw,
                "index": self.index}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._views()

    def write(self, name: str, pose_world: np.ndarray, color: np.ndarray) -> None:
        """(writer) Camera ``name``'s optical frame (4, 4) in the world and its color image (H, W, 3) uint8."""
        k = self.index[name]
        seq, step = self.seq[k], self.stride[k]
        seq[0] += 1                                               # odd: being written
        M = np.asarray(pose_world, float)
        self.pose[k][:3] = M[:3, 3]
        self.pose[k][3:] = pin.Quaternion(M[:3, :3]).coeffs()[[3, 0, 1, 2]]       # (w, x, y, z)
        self.image[k][:] = color[::step, ::step, :3]
        seq[0] += 1                                               # even: complete

    def read(self, k: int, last_seq: int) -> "tuple[int, np.ndarray, np.ndarray] | None":
        """(reader) (sequence number, pose (7,), image copy) of camera k if newer than ``last_seq``, else None."""
        for _ in range(100):
            seq = int(self.seq[k][0])
            if seq == last_seq or seq == 0:
                return None
            if seq % 2:
                time.sleep(1e-5)
                continue
            pose, image = self.pose[k].copy(), self.image[k].copy()
            if int(self.seq[k][0]) == seq:
                return seq, pose, image
        return None


class ViewerProcess:
    """A SceneViewer in its own process; the simulation pays only for copying the poses and contacts into shared
    memory at the update rate (``publish_simulator``; ``due()`` says when).

    The child runs at ``os.nice(nice)`` (lower priority than the simulation), pulls the newest frame at most
    ``update_rate`` times per second of wall time while a browser is connected, and sends the browser only what
    changed. ``events()`` returns the button presses since the last call: ("pause", bool) and ("reset",);
    ``set_paused`` tells the page the simulation's pause state (e.g. when paused through a service).

    ``objects``: the scene's ObjectSpecs (mesh objects are drawn as their visual meshes: describe_scene).
    A changed model (objects spawned or deleted): ``send_scene(model, objects)`` sends the child the new scene description
    (a pipe; a thread of the child receives it at once) and returns its number; ``use_scene(number)``, called by
    the thread that publishes frames when it starts publishing the new model's state, switches the frames'
    layout. The child redraws the page's geometries when the first frame of the new scene arrives, so a frame is
    always drawn on the geometries it belongs to.
    """

    def __init__(self, model: MultibodyModel, port: int = 8080, host: str = "127.0.0.1", update_rate: float = 30.0,
                 force_scale: float = 0.01, start_timeout: float = 60.0, contact_capacity: int = 512,
                 nice: int = 10, cameras: "list[CameraView]" = (), objects=()):
        if update_rate <= 0:
            raise ValueError(f"viewer update_rate must be > 0 Hz, got {update_rate}")
        ctx = multiprocessing.get_context("spawn")
        geometries = describe_scene(model, objects)
        self.buffer = FrameBuffer(moving_geometry_ids(geometries), contact_capacity, ctx)
        self.cameras = CameraSlots(cameras, ctx)      # frusta with their live images (publish_camera)
        self.update_period = 1.0 / float(update_rate)
        self._last_update = -np.inf
        self._scenes = {0: self.buffer.geometry_ids}     # scene number -> moving geometry ids (sent, not used)
        self._scene_lock = threading.Lock()
        ready_recv, ready_send = ctx.Pipe(duplex=False)
        scene_recv, self._scene_send = ctx.Pipe(duplex=False)
        self._process = ctx.Process(
            target=_viewer_main, daemon=True, name="contact_sim_viewer",
            args=(geometries, self.buffer, host, port,
                  force_scale, float(update_rate), int(nice), os.getpid(), ready_send, scene_recv, self.cameras))
        self._process.start()
        ready_send.close()
        scene_recv.close()
        if not ready_recv.poll(start_timeout):
            self.close()
            raise RuntimeError(f"the viewer process did not start within {start_timeout} s")
        try:
            status, value = ready_recv.recv()
        except EOFError:
            status, value = "error", f"exit code {self._process.exitcode}"
        ready_recv.close()
        if status != "ready":
            self.close()
            raise RuntimeError(f"the viewer process failed to start: {value}")
        self.url = value
        self.pid = self._process.pid

    def due(self) -> bool:
        """True (and the clock restarted) once per update period of wall time."""
        now = time.monotonic()
        if now - self._last_update < self.update_period:
            return False
        self._last_update = now
        return True

    def publish_simulator(self, sim, real_time_factor: float | None = None) -> None:
        """Hand the viewer a Simulator's current state (never blocks; the viewer draws the newest one)."""
        self.buffer.write_simulator(sim, real_time_factor)

    def publish(self, frame: ViewerFrame) -> None:
        """Hand the viewer a frame (never blocks)."""
        self.buffer.write(frame.poses, frame.t, frame.real_time_factor, frame.contact_points, frame.contact_forces)
        if frame.paused is not None:
            self.buffer.set_paused(frame.paused)

    def set_paused(self, paused: bool) -> None:
        self.buffer.set_paused(paused)

    def publish_camera(self, name: str, pose_world: np.ndarray, color: np.ndarray) -> None:
        """Hand the viewer camera ``name``'s newest image and optical-frame pose (4, 4) (the thread that renders;
        never blocks)."""
        self.cameras.write(name, pose_world, color)

    @property
    def watched(self) -> bool:
        """A browser is connected (as the viewer process last saw it)."""
        return bool(self.buffer.header[FrameBuffer.CLIENTS])

    def send_scene(self, model: MultibodyModel, objects=()) -> int:
        """Send the child the description of ``model`` (a changed scene; ``objects``: its ObjectSpecs, for the
        mesh objects' visual meshes); returns its number for ``use_scene``. ValueError if its moving geometries do
        not fit the frame buffer (``FrameBuffer.EXTRA_POSES`` more than at start)."""
        geometries = describe_scene(model, objects)
        ids = moving_geometry_ids(geometries)
        if len(ids) > self.buffer.pose_capacity:
            raise ValueError(f"the viewer has room for {self.buffer.pose_capacity} moving geometries, the model has "
                             f"{len(ids)}")
        with self._scene_lock:
            number = max(self._scenes) + 1
            self._scenes = {k: v for k, v in self._scenes.items() if k >= number - 4}   # a few not yet used
            self._scenes[number] = ids
            self._scene_send.send((number, geometries))
        return number

    def use_scene(self, number: int) -> None:
        """The frames published from now on are of scene ``number`` (``send_scene``); call from the thread that
        publishes them, before the first one."""
        with self._scene_lock:
            ids = self._scenes[number]
        self.buffer.set_geometry_ids(ids, number)

    def events(self) -> list:
        return self.buffer.events()

    @property
    def frames_shown(self) -> int:
        """Frames the viewer process has sent to the browser so far (it draws only while one is connected)."""
        return int(self.buffer.header[FrameBuffer.SHOWN])

    @property
    def alive(self) -> bool:
        return self._process.is_alive()

    def close(self) -> None:
        self.buffer.header[FrameBuffer.CLOSING] = 1
        self._scene_send.close()
        self._process.join(timeout=5.0)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=2.0)
        if self._process.is_alive():       # SIGTERM not handled (busy in a C call): never leave a child that
            self._process.kill()           # multiprocessing's exit handler would then wait for forever
            self._process.join(timeout=2.0)


def _receive_scenes(scene_recv, scenes: dict) -> None:
    """Viewer process thread: scene descriptions from the owner (``ViewerProcess.send_scene``) into ``scenes``
    (number -> geometries), as soon as they are sent (the owner never waits on a full pipe)."""
    while True:
        try:
            number, geometries = scene_recv.recv()
        except (EOFError, OSError):       # the owner closed the viewer or died
            return
        scenes[number] = geometries


def _viewer_main(geometries, buffer: FrameBuffer, host, port, force_scale, update_rate,
                 nice, parent_pid, ready, scene_recv, cameras: CameraSlots) -> None:
    """The viewer process: serve the page, then draw the newest frame at most ``update_rate`` times a second
    until the owner closes it or dies; a frame of a new scene first replaces the page's geometries. Ctrl-C (SIGINT
    to the terminal's process group) is ignored: the owner closes the viewer as it stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(nice)
    except OSError:
        pass
    # a browser that closes its tab mid-handshake is not an error of the simulation
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    try:
        lock = threading.Lock()       # viser may run click callbacks concurrently

        def on_pause(paused):
            with lock:
                buffer.request_pause(paused)

        def on_reset():
            with lock:
                buffer.request_reset()

        viewer = SceneViewer(geometries, host=host, port=port, force_scale=force_scale, on_pause=on_pause,
                             on_reset=on_reset)
        for c in cameras.cameras:
            viewer.add_camera(c.name, c.fov_y, c.width / c.height)
    except Exception as exc:  # noqa: BLE001 - reported to the owner, which raises it
        ready.send(("error", repr(exc)))
        return
    ready.send(("ready", viewer.url))
    ready.close()
    scenes, scene = {}, 0
    threading.Thread(target=_receive_scenes, args=(scene_recv, scenes), daemon=True,
                     name="contact_sim_viewer_scenes").start()
    period, seq = 1.0 / update_rate, -1
    camera_seqs = [-1] * len(cameras.cameras)
    try:
        while not buffer.header[FrameBuffer.CLOSING] and os.getppid() == parent_pid:
            start = time.monotonic()
            buffer.header[FrameBuffer.CLIENTS] = viewer.client_count
            for k, c in enumerate(cameras.cameras if viewer.client_count else ()):
                shot = cameras.read(k, camera_seqs[k])
                if shot is not None:
                    camera_seqs[k] = shot[0]
                    viewer.show_camera(c.name, shot[1], shot[2])
            # nobody watching: draw nothing (the frame stays in shared memory; the first browser to connect
            # gets the newest one at the next period)
            got = buffer.read(seq) if viewer.client_count else None
            if got is not None and got[1].scene != scene:
                if got[1].scene in scenes:                       # the first frame of a new scene: redraw it
                    scene = got[1].scene
                    viewer.set_geometries(scenes[scene])
                    for old in [k for k in scenes if k <= scene]:
                        del scenes[old]
                else:                                            # not received yet: draw it next time
                    got = None
            if got is not None:
                seq, frame = got
                viewer.show(frame)
                buffer.header[FrameBuffer.SHOWN] += 1        # frames sent to the browser (benchmark)
            elif viewer.client_count:
                paused = int(buffer.header[FrameBuffer.PAUSED])
                if paused >= 0 and buffer.header[FrameBuffer.PAUSE_ACK] == buffer.header[FrameBuffer.PAUSE_REQ]:
                    viewer.set_paused(bool(paused))
            time.sleep(max(period - (time.monotonic() - start), 0.005))
    finally:
        viewer.close()
