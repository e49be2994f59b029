"""A live 3-D view of a scene in the browser (viser), with contact points and force arrows.

The viewer knows nothing of ROS or engines: it is given the model once and, at its update rate, the world
placements of the collision geometries, the contact points and world contact forces, the sim time and the
real-time factor. ``SceneViewer.update_from_simulator(sim)`` does that for a ``Simulator``; the ROS node
feeds it the same way from its stepping loop. Pause / reset buttons call the callbacks it is given (the node
wires them to its services; the headless runner to its own loop).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pinocchio as pin
from scipy.spatial import ConvexHull

from ..model.multibody_model import MultibodyModel

ROBOT_COLOR = (200, 200, 205)
OBJECT_COLOR = (60, 130, 230)
ENVIRONMENT_COLOR = (170, 140, 100)
CONTACT_COLOR = (240, 40, 40)


def _wxyz(rotation: np.ndarray) -> np.ndarray:
    x, y, z, w = pin.Quaternion(rotation).coeffs()
    return np.array([w, x, y, z])


class SceneViewer:
    """Serves the scene on http://host:port.

    force_scale: arrow length per newton (m/N). update_rate: maximum updates per second of wall time
    (``due()`` tells callers when to update, so the simulation pays for at most that many redraws).
    """

    def __init__(self, model: MultibodyModel, host: str = "127.0.0.1", port: int = 8080,
                 force_scale: float = 0.01, update_rate: float = 30.0,
                 on_pause: Callable[[bool], None] | None = None, on_reset: Callable[[], None] | None = None,
                 camera_position=(1.6, -1.4, 1.2), camera_target=(0.3, 0.0, 0.3)):
        import viser  # optional dependency: only the viewer needs it

        self.model = model
        self.force_scale = float(force_scale)
        self.update_period = 1.0 / float(update_rate)
        self._last_update = -np.inf
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.url = f"http://{host}:{self.server.get_port()}"
        self.server.scene.set_up_direction("+z")
        self.server.initial_camera.position = camera_position
        self.server.initial_camera.look_at = camera_target
        self._handles = {}
        self._moving = []        # (geometry index, handle, local offset SE3 or None)
        free_joints = {b.joint_id for b in model.free_bodies}
        for g, go in enumerate(model.collision_model.geometryObjects):
            joint = go.parentJoint
            # static environment hangs off the universe frame itself; the robot's fixed base off its link
            color = ENVIRONMENT_COLOR if go.parentFrame == 0 else \
                OBJECT_COLOR if joint in free_joints else ROBOT_COLOR
            handle = self._add_geometry(f"/scene/g{g}_{go.name.replace('/', '_')}", go.geometry, color)
            if handle is not None:
                self._handles[g] = handle
                if joint != 0:
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

    def _add_geometry(self, name: str, geom, color):
        scene = self.server.scene
        kind = type(geom).__name__
        if kind == "Box":
            return scene.add_box(name, color=color, dimensions=tuple(2.0 * np.asarray(geom.halfSide)))
        if kind == "Sphere":
            return scene.add_icosphere(name, radius=float(geom.radius), color=color, subdivisions=3)
        if kind == "Cylinder":
            return scene.add_cylinder(name, radius=float(geom.radius), height=2.0 * float(geom.halfLength),
                                      color=color)
        if kind == "Capsule":
            v, f = _capsule_mesh(float(geom.radius), 2.0 * float(geom.halfLength))
            return scene.add_mesh_simple(name, v, f, color=color)
        if kind == "Halfspace":
            n = np.asarray(geom.n, float)
            R = pin.Quaternion.FromTwoVectors(np.array([0.0, 0.0, 1.0]), n).matrix()
            scene.add_grid(name + "_grid", width=3.0, height=3.0, cell_size=0.1, section_size=0.5,
                           position=n * float(geom.d) + 1e-4 * n, wxyz=_wxyz(R))
            return scene.add_box(name, color=ENVIRONMENT_COLOR, dimensions=(3.0, 3.0, 0.01),
                                 position=n * (float(geom.d) - 0.005), wxyz=_wxyz(R))
        if kind.startswith("Convex"):
            pts = np.array([np.asarray(p) for p in geom.points])
            hull = ConvexHull(pts)
            return scene.add_mesh_simple(name, pts, _outward_faces(pts, hull), color=color, flat_shading=True)
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

    def update(self, geometry_placements, t: float, real_time_factor: float | None = None,
               contact_points: np.ndarray | None = None, contact_forces: np.ndarray | None = None) -> None:
        """geometry_placements: sequence of pin.SE3 (world) per geometry; contact_points (N, 3) m and
        contact_forces (N, 3) N in the world frame."""
        for g in self._moving:
            M = geometry_placements[g]
            h = self._handles[g]
            h.position = np.asarray(M.translation)
            h.wxyz = _wxyz(M.rotation)
        self.time_text.value = f"{t:.3f}"
        if real_time_factor is not None:
            self.rtf_text.value = f"{real_time_factor:.2f}"
        self._set_contacts(contact_points, contact_forces)

    def update_from_simulator(self, sim, real_time_factor: float | None = None) -> None:
        c = sim.contacts
        points, forces = (None, None) if c is None else (c.point, display_forces(c, sim.contact_forces_world()))
        self.update(sim.geometry_data.oMg, sim.t, real_time_factor, points, forces)

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
