"""A live 3-D view of a scene in the browser (viser), with contact points and force arrows.

The viewer knows nothing of ROS or engines: it is given a plain-data description of the scene once
(``describe_scene``) and, at its update rate, ``ViewerFrame`` snapshots (``simulator_frame``): the world poses of
the collision geometries, the contact points and forces, the sim time and the real-time factor.

* ``SceneViewer`` serves the page from this process (tests, notebooks);
* ``ViewerProcess`` runs it in a child process, so the simulation pays only for a snapshot and a queue put
  (``benchmarks/viewer/run.py``); the headless runner and the ROS node use it. Pause / reset buttons come back
  as events that the owner applies to its own loop (the node: to its pause and reset services).
"""

from __future__ import annotations

import multiprocessing
import queue
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
    """

    name: str
    kind: str
    params: dict
    color: tuple
    moving: bool
    pose: np.ndarray


def describe_scene(model: MultibodyModel) -> list[VisualGeometry]:
    """The visual description of every collision geometry of ``model`` at its neutral configuration."""
    pm = model.pin_model
    data = pm.createData()
    gd = pin.GeometryData(model.collision_model)
    pin.updateGeometryPlacements(pm, data, model.collision_model, gd, pin.neutral(pm))
    free_joints = {b.joint_id for b in model.free_bodies}
    out = []
    for g, go in enumerate(model.collision_model.geometryObjects):
        geom, kind = go.geometry, type(go.geometry).__name__
        # static environment hangs off the universe frame itself; the robot's fixed base off its link
        color = ENVIRONMENT_COLOR if go.parentFrame == 0 else \
            OBJECT_COLOR if go.parentJoint in free_joints else ROBOT_COLOR
        pose = _pose7(gd.oMg[g])
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
            pts = np.array([np.asarray(p) for p in geom.points])
            vg = ("mesh", {"vertices": pts, "faces": _outward_faces(pts, ConvexHull(pts))})
        else:
            continue
        out.append(VisualGeometry(go.name, vg[0], vg[1], color, go.parentJoint != 0, pose))
    return out


@dataclass
class ViewerFrame:
    """One frame for the viewer: world poses (G, 7) of the geometries, sim time (s), real-time factor,
    contact points (N, 3) m and the forces drawn at them (N, 3) N, world frame."""

    poses: np.ndarray
    t: float
    real_time_factor: float | None
    contact_points: np.ndarray | None
    contact_forces: np.ndarray | None


def simulator_frame(sim, real_time_factor: float | None = None) -> ViewerFrame:
    """Snapshot a Simulator's current state for the viewer (copies: safe to hand to another thread)."""
    poses = np.array([_pose7(M) for M in sim.geometry_data.oMg])
    c = sim.contacts
    if c is None or c.size == 0 or sim.last_result is None:
        return ViewerFrame(poses, sim.t, real_time_factor, None, None)
    return ViewerFrame(poses, sim.t, real_time_factor, c.point.copy(),
                       display_forces(c, sim.contact_forces_world()))


class SceneViewer:
    """Serves the scene on http://host:port.

    force_scale: arrow length per newton (m/N). update_rate: maximum updates per second of wall time
    (``due()`` tells callers when to update, so the simulation pays for at most that many redraws).
    """

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
        self._handles = {}
        self._moving = []        # geometry indices whose pose is updated
        for g, vg in enumerate(geometries):
            handle = self._add_geometry(f"/scene/g{g}_{vg.name.replace('/', '_')}", vg)
            if handle is not None:
                self._handles[g] = handle
                if vg.moving:
                    self._moving.append(g)
        self.contact_count = 0
        self.total_force = np.zeros(3)
        self._arrows = None
        self._points = None
        gui = self.server.gui
        self.time_text = gui.add_text("sim time (s)", initial_value="0.000", disabled=True)
        self.rtf_text = gui.add_text("real-time factor", initial_value="-", disabled=True)
        self.contacts_text = gui.add_text("contacts", initial_value="0", disabled=True)
        self.paused = False
        self.pause_button = gui.add_button("Pause")
        self.reset_button = gui.add_button("Reset")

        @self.pause_button.on_click
        def _(_event) -> None:
            self.paused = not self.paused
            self.pause_button.label = "Resume" if self.paused else "Pause"
            if on_pause is not None:
                on_pause(self.paused)

        @self.reset_button.on_click
        def _(_event) -> None:
            if on_reset is not None:
                on_reset()

    # ------------------------------------------------------------------------------------ build

    def _add_geometry(self, name: str, vg: "VisualGeometry"):
        scene, p, color = self.server.scene, vg.params, vg.color
        pose = {"position": vg.pose[:3], "wxyz": vg.pose[3:]}
        if vg.kind == "box":
            return scene.add_box(name, color=color, dimensions=tuple(p["size"]), **pose)
        if vg.kind == "sphere":
            return scene.add_icosphere(name, radius=p["radius"], color=color, subdivisions=3, **pose)
        if vg.kind == "cylinder":
            return scene.add_cylinder(name, radius=p["radius"], height=p["length"], color=color, **pose)
        if vg.kind == "halfspace":
            scene.add_grid(name + "_grid", width=3.0, height=3.0, cell_size=0.1, section_size=0.5,
                           position=vg.pose[:3] + 1e-4 * p["normal"], wxyz=vg.pose[3:])
            return scene.add_box(name, color=color, dimensions=(3.0, 3.0, 0.01),
                                 position=vg.pose[:3] - 0.005 * p["normal"], wxyz=vg.pose[3:])
        if vg.kind == "mesh":
            return scene.add_mesh_simple(name, p["vertices"], p["faces"], color=color, flat_shading=True, **pose)
        return None

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

    def update(self, poses: np.ndarray, t: float, real_time_factor: float | None = None,
               contact_points: np.ndarray | None = None, contact_forces: np.ndarray | None = None) -> None:
        """poses: (G, 7) world pose per geometry as (x, y, z, qw, qx, qy, qz) (``geometry_poses``);
        contact_points (N, 3) m and contact_forces (N, 3) N in the world frame."""
        with self.server.atomic():
            for g in self._moving:
                h = self._handles[g]
                h.position = poses[g, :3]
                h.wxyz = poses[g, 3:]
        self.time_text.value = f"{t:.3f}"
        if real_time_factor is not None:
            self.rtf_text.value = f"{real_time_factor:.2f}"
        self._set_contacts(contact_points, contact_forces)

    def update_from_simulator(self, sim, real_time_factor: float | None = None) -> None:
        self.show(simulator_frame(sim, real_time_factor))

    def show(self, frame: "ViewerFrame") -> None:
        self.update(frame.poses, frame.t, frame.real_time_factor, frame.contact_points, frame.contact_forces)

    def _set_contacts(self, points, forces) -> None:
        scene = self.server.scene
        if points is None or forces is None or len(forces) == 0:
            self.contact_count, self.total_force = 0, np.zeros(3)
            if self._arrows is not None:
                self._arrows.visible = False
                self._points.visible = False
            self.contacts_text.value = "0"
            return
        points = np.asarray(points, float)[: len(forces)]
        forces = np.asarray(forces, float)
        carrying = np.linalg.norm(forces, axis=1) > 1e-9
        self.contact_count = int(np.count_nonzero(carrying))
        self.total_force = forces.sum(axis=0)
        self.contacts_text.value = f"{self.contact_count} (sum {np.linalg.norm(self.total_force):.2f} N)"
        segments = np.stack([points, points + self.force_scale * forces], axis=1)[carrying]
        if len(segments) == 0:
            segments = np.zeros((1, 2, 3))
        # viser arrays are replaced wholesale: re-adding the node under the same name updates it in place
        self._arrows = scene.add_arrows("/contacts/forces", segments, colors=CONTACT_COLOR,
                                        shaft_radius=0.003, head_radius=0.008, head_length=0.015)
        self._points = scene.add_point_cloud("/contacts/points", points, colors=CONTACT_COLOR, point_size=0.01)

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


class ViewerProcess:
    """A SceneViewer in its own process, so that drawing costs the simulation only a snapshot and a queue put.

    ``publish(frame)`` never blocks: a frame is dropped if the viewer has not taken the previous one yet.
    ``events()`` returns the button presses since the last call: ("pause", bool) and ("reset",).
    """

    def __init__(self, model: MultibodyModel, port: int = 8080, host: str = "127.0.0.1", update_rate: float = 30.0,
                 force_scale: float = 0.01, start_timeout: float = 60.0):
        ctx = multiprocessing.get_context("spawn")
        self._frames = ctx.Queue(maxsize=1)
        self._events = ctx.Queue()
        self.update_period = 1.0 / float(update_rate)
        self._last_update = -np.inf
        self._process = ctx.Process(target=_viewer_main, daemon=True,
                                    args=(describe_scene(model), host, port, force_scale, self._frames, self._events))
        self._process.start()
        try:
            kind, self.url = self._events.get(timeout=start_timeout)
        except queue.Empty:
            self.close()
            raise RuntimeError(f"the viewer process did not start within {start_timeout} s") from None

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._last_update < self.update_period:
            return False
        self._last_update = now
        return True

    def publish(self, frame: ViewerFrame) -> bool:
        try:
            self._frames.put_nowait(frame)
            return True
        except queue.Full:
            return False

    def events(self) -> list:
        out = []
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        if self._process.is_alive():
            try:
                self._frames.put(None, timeout=1.0)
            except queue.Full:
                pass
            self._process.join(timeout=5.0)
            if self._process.is_alive():
                self._process.terminate()


def _viewer_main(geometries, host, port, force_scale, frames, events) -> None:
    viewer = SceneViewer(geometries, host=host, port=port, force_scale=force_scale,
                         on_pause=lambda paused: events.put(("pause", paused)),
                         on_reset=lambda: events.put(("reset",)))
    events.put(("ready", viewer.url))
    while True:
        frame = frames.get()
        if frame is None:
            break
        viewer.show(frame)
    viewer.close()
