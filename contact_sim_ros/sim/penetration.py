"""Deep interpenetration: a contact deeper than a fraction of the thinner of its two bodies fails the step.

A compliant engine (TAMSI, semi-implicit, SAP) under a force far beyond what its contact stiffness holds lets
bodies sink into each other: a 1e9 N squeeze leaves the finger pads 4.1 cm inside a 4 cm-radius mug with a
"converged" solution every step (issue 31, defect 7). No bound on speeds or distances sees it, the bodies barely
move. ``PenetrationCheck.check`` runs on the contacts of every (sub-)step, before the engine: a contact whose
penetration depth -phi exceeds ``fraction`` times the thickness of the thinner of its two geometries fails the
step like a solver failure (``Simulator.step``: the state is kept, the report's message starts with
``deep interpenetration:``, names the two bodies, the depth and the bound; the node counts it, logs it and pauses
after ``max_failed_steps`` such steps). Retrying with sub-steps cannot help (the step's start state is the
problem), so the Simulator does not.

The thickness of a geometry (m) is that of its body, the largest of the body's geometries' (a finger's pad counts
as thick as the finger; the world's geometries each count alone); a shape's thickness is its smallest extent: a
sphere's or capsule's diameter, a box's smallest side, a cylinder's or cone's smaller of diameter and length, an
ellipsoid's smallest diameter, a mesh's or convex hull's smallest side of its local bounding box, plus twice
coal's swept-sphere radius; a halfspace or a plane is infinitely thick. Cost per step: one compiled pass over the
N contacts (``deepest_excess``).

The last step's approach is allowed on top of the bound (issue 44): a thin body hitting another at speed sinks in
by about its approach speed times the time step before the contact stops it, a transient of one or two steps
however thin the bodies are (two 0.5 mm mesh plates dropped 5 cm onto each other, TAMSI at 1 ms: 0.50 mm deep at
impact, the upper plate's edge driven down at 0.5 m/s by the impact's spin; they then rest 0.004 mm apart, while
the bound alone, 0.5 mm, paused the simulation). So a contact's bound is ``fraction`` x thickness plus
``min(max(-v_n, 0) dt, thickness)``: ``v_n`` (m/s) its normal relative velocity at the step's start velocity (the
one that moved the bodies into this state over the last step of ``dt`` s, semi-implicit Euler), capped at the
thinner body's thickness (deeper than twice its thickness a body has passed through whatever its speed). A force
pressing bodies through each other moves them slowly (the 1e9 N squeeze: the fingers barely move) and a start
state has no velocity: both are held to the bound alone. The allowance is computed only when a contact exceeds the
bound alone (one matrix-vector product of the contacts' normal Jacobian rows): a normal step pays nothing for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import coal
import numpy as np

from ..errors import ConfigError
from .penetration_kernels import deepest_excess

# Why 1 (measured in-process, TAMSI, worst depth / thickness of the thinner body over each run): pick_shake_place
# 0.023, barrett_box 0.018, barrett_cylinder 0.030, franka_rod 0.009, the other shipped scenes <= 0.05, allegro_mug
# and iiwa_allegro_mug 0.69 from t = 0 (the thumb's base link inside the mug's convex hull, which fills the
# handle's opening); the 1e9 N squeeze through the mug: 2.05
DEFAULT_FRACTION = 1.0     # of the thinner body's thickness: deeper, the bodies have passed through each other
DEEP_PENETRATION = "deep interpenetration:"     # how a failed step's message starts
_NO_ALLOWANCE = np.zeros(0)                       # deepest_excess's allowance: none


def shape_thickness(shape) -> float:
    """The smallest extent (m) of a coal collision shape (see the module docstring); inf for unbounded shapes."""
    if isinstance(shape, (coal.Halfspace, coal.Plane)):
        return math.inf
    if isinstance(shape, coal.Sphere):
        size = 2.0 * shape.radius
    elif isinstance(shape, coal.Capsule):
        size = 2.0 * shape.radius
    elif isinstance(shape, (coal.Cylinder, coal.Cone)):
        size = 2.0 * min(shape.radius, shape.halfLength)
    elif isinstance(shape, coal.Box):
        size = 2.0 * float(np.min(shape.halfSide))
    elif isinstance(shape, coal.Ellipsoid):
        size = 2.0 * float(np.min(shape.radii))
    else:                                   # meshes, convex hulls: the local bounding box
        shape.computeLocalAABB()
        box = shape.aabb_local
        extent = np.asarray(box.max_, dtype=float) - np.asarray(box.min_, dtype=float)
        size = float(np.min(extent)) if np.all(np.isfinite(extent)) else math.inf
    return float(size) + 2.0 * max(float(shape.getSweptSphereRadius()), 0.0)


class PenetrationCheck:
    """The deep-interpenetration bound on one model's contacts (thickness table built once)."""

    def __init__(self, model, fraction: float = DEFAULT_FRACTION):
        self.fraction = float(fraction)
        geometry = model.collision_model.geometryObjects
        own = np.array([shape_thickness(g.geometry) for g in geometry], dtype=float)
        joints = np.array([g.parentJoint for g in geometry], dtype=int)
        # a geometry counts as thick as its body: the thickest of the geometries on the same moving joint (a
        # finger's 3 mm pad on its 14 mm link); the world's geometries (joint 0) each on its own
        self.thickness = own.copy()
        for j in np.unique(joints[joints > 0]):
            on = joints == j
            self.thickness[on] = own[on].max()
        self._names = list(model.geometry_names)
        # the compiled pass loaded now (from numba's cache: ~2.5 ms) with the argument types of a step's contacts,
        # not in the first step with a contact (a stall in a running simulation: the sphere's first touch-down
        # took 2.6 ms instead of ~10 us)
        deepest_excess(np.zeros(0), np.zeros(0, dtype=int), np.zeros(0, dtype=int), self.thickness, self.fraction,
                       _NO_ALLOWANCE)

    @staticmethod
    def make(model, value) -> "PenetrationCheck | None":
        """None / True: the default fraction; False: no check (returns None); a number in (0, inf]: the fraction
        of the thinner body's thickness (inf: off)."""
        if value is False:
            return None
        if value is None or value is True:
            return PenetrationCheck(model)
        try:
            fraction = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"penetration_limit: expected a fraction of the thinner body's thickness (> 0), "
                              f"None or False, got {value!r}") from None
        if math.isnan(fraction) or fraction <= 0.0:
            raise ConfigError(f"penetration_limit must be > 0 (a fraction of the thinner body's thickness; inf "
                              f"or False: off), got {value!r}")
        return None if math.isinf(fraction) else PenetrationCheck(model, fraction)

    def deepest(self, contacts, v=None, dt: float = 0.0) -> tuple[int, int, int, float, float] | None:
        """(geometry a, geometry b, the thinner of them, depth m, the approach allowed m) of the contact of
        ``contacts`` (a ContactSet) that exceeds its bound most, None if none does. ``v`` (nv,) the generalized
        velocity that moved the bodies into this state over the last step of ``dt`` s: each contact's approach
        ``max(-v_n, 0) dt``, capped at the thinner body's thickness, is allowed on top of the bound (see the module
        docstring); None (a start state): the bound alone."""
        if contacts is None or contacts.size == 0:
            return None
        sd, ga, gb = contacts.signed_distance, contacts.geometry_a, contacts.geometry_b
        k = deepest_excess(sd, ga, gb, self.thickness, self.fraction, _NO_ALLOWANCE)
        if k < 0:
            return None
        allowance = None
        if v is not None and dt > 0.0:          # a contact beyond the bound alone: was it the last step's approach?
            approach = -(contacts.jacobian[2::3] @ v)                                   # (N,) m/s, > 0 approaching
            thin = np.minimum(self.thickness[ga], self.thickness[gb])
            allowance = np.minimum(np.maximum(approach, 0.0) * dt, thin)
            k = deepest_excess(sd, ga, gb, self.thickness, self.fraction, allowance)
            if k < 0:
                return None
        a, b = int(ga[k]), int(gb[k])
        return (a, b, (a if self.thickness[a] <= self.thickness[b] else b), -float(sd[k]),
                0.0 if allowance is None else float(allowance[k]))

    def check(self, contacts, t: float, v=None, dt: float = 0.0) -> str:
        """'' if no contact of ``contacts`` (a ContactSet) is deeper than its bound, else the reason (at sim
        time ``t``, s). ``v``, ``dt``: the step's start velocity and time step (s), see ``deepest``."""
        deepest = self.deepest(contacts, v, dt)
        if deepest is None:
            return ""
        a, b, thin, depth, allowed = deepest
        approach = f" plus the last step's approach, {100 * allowed:.3g} cm," if allowed > 0.0 else ""
        return (f"{DEEP_PENETRATION} {self._names[a]!r} and {self._names[b]!r} overlap by {100 * depth:.3g} cm "
                f"> {self.fraction:g} x the thickness of the thinner one ({self._names[thin]!r}, "
                f"{100 * self.thickness[thin]:.3g} cm){approach} at t = {t:.6f} s: the contact cannot carry the "
                f"forces applied (a force far beyond the contact stiffness?)")


@dataclass(frozen=True)
class StartOverlap:
    """Two bodies deeper in each other at the start state than the bound (the first step would fail): their
    geometries, links (BODY frame names; a free object's name) and the depth (m) and the thinner one's thickness."""

    geometry_a: str
    geometry_b: str
    link_a: str
    link_b: str
    depth: float
    thickness: float
    joint_a: int           # Pinocchio joint moving each (0: the world, fixed)
    joint_b: int


def start_overlap(sim) -> StartOverlap | None:
    """The deepest overlap beyond ``sim``'s penetration bound at its current state (called before the first step:
    its start), None if there is none (or the check is off). The contacts come from a contact query of its own (the
    simulator's query keeps its state) on the simulator's kinematics of the state (``sim.pin_data``: joint
    placements and Jacobians; a Data of its own costs seconds to allocate for a model of many objects)."""
    from ..geometry.contact_query import ContactQuery      # deferred: the query's module imports this one's users
    from .sensors import body_frame_of_geometry
    check = sim._penetration
    if check is None:
        return None
    m = sim.model
    pm = m.pin_model
    query = ContactQuery(m, margin=sim.scene.contact_margin, broad_phase="auto")
    deepest = check.deepest(query.update(sim.pin_data, None, joint_jacobians=True, q=sim.q))
    if deepest is None:
        return None
    a, b, thin, depth, _ = deepest
    free = {body.joint_id: body.name for body in m.free_bodies}
    gos = m.collision_model.geometryObjects

    def link(g):
        j = int(gos[g].parentJoint)
        return free.get(j) or (pm.frames[body_frame_of_geometry(m, g)].name if j > 0 else check._names[g])
    return StartOverlap(check._names[a], check._names[b], link(a), link(b), depth, float(check.thickness[thin]),
                        int(gos[a].parentJoint), int(gos[b].parentJoint))
