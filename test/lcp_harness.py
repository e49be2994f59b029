"""Hand-built single-free-body scenes for the LCP engine tests (no contact query, no simulator needed).

A free-flyer body (sphere of radius r or box with half extents) above the plane z = 0 under gravity
``gravity`` (tilting gravity models an incline). Contacts: the sphere's lowest point or the box's corners,
contact frame (t1, t2, n) = (x, y, z) of the world, signed distance = height of the point.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contact_sim_ros.engines.base import Actuation, StepInputs
from contact_sim_ros.geometry.contact_set import ContactSet
from contact_sim_ros.model.multibody_model import FreeBody, MultibodyModel


def free_body_model(mass: float, inertia: np.ndarray, gravity) -> MultibodyModel:
    model = pin.Model()
    jid = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "body")
    model.appendBodyToJoint(jid, pin.Inertia(mass, np.zeros(3), inertia), pin.SE3.Identity())
    model.gravity = pin.Motion(np.asarray(gravity, float), np.zeros(3))
    nv = model.nv
    empty = np.zeros(0)
    return MultibodyModel(
        pin_model=model, collision_model=pin.GeometryModel(), source="<test>", joint_names=(),
        joint_q_index=np.zeros(0, int), joint_v_index=np.zeros(0, int), position_lower=empty,
        position_upper=empty, velocity_limit=empty, effort_limit=empty, mimic_joints=(),
        joint_damping=np.zeros(nv), joint_friction=np.zeros(nv), actuated=np.zeros(nv, bool),
        free_bodies=(FreeBody("body", jid, "body", slice(0, 7), slice(0, 6), mass),),
        tree_velocity_slices=(slice(0, 6),), geometry_names=(), geometry_parent_joint=np.zeros(0, int),
        geometry_stiffness=empty, geometry_dissipation=empty, geometry_friction=empty,
        geometry_restitution=empty, collision_pairs=np.zeros((0, 2), int), gravity=np.asarray(gravity, float))


class FreeBodyScene:
    """Steps an engine on a single body with hand-built contact sets."""

    def __init__(self, engine_cls, points_local, mass, inertia, gravity, mu, e, margin=0.02, options=None,
                 sphere_radius=0.0):
        self.model = free_body_model(mass, inertia, gravity)
        self.pin_model = self.model.pin_model
        self.data = self.pin_model.createData()
        self.engine = engine_cls(self.model, options)
        self.points = np.atleast_2d(np.asarray(points_local, float))
        self.radius = sphere_radius     # > 0: the single point is the sphere centre, contact at its bottom
        self.mu, self.e, self.margin = mu, e, margin
        self.q = pin.neutral(self.pin_model)
        self.v = np.zeros(6)
        self.t = 0.0
        self.last = None

    def contacts(self):
        m, d = self.pin_model, self.data
        pin.forwardKinematics(m, d, self.q)
        pin.computeJointJacobians(m, d, self.q)
        oMi = d.oMi[1]
        rows, phis, pts = [], [], []
        for p in self.points:
            world = oMi.act(p)
            if self.radius > 0.0:
                offset_local = oMi.rotation.T @ np.array([0.0, 0.0, -self.radius])
                p = p + offset_local
                world = oMi.act(p)
            if world[2] > self.margin:
                continue
            J = pin.getFrameJacobian(m, d, 1, pin.SE3(np.eye(3), p), pin.LOCAL_WORLD_ALIGNED)[:3]
            rows.append(J)
            phis.append(world[2])
            pts.append(world)
        n = len(phis)
        if n == 0:
            return ContactSet.empty(6)
        ones = np.ones(n)
        return ContactSet(
            geometry_a=np.zeros(n, int), geometry_b=np.ones(n, int), joint_a=np.zeros(n, int),
            joint_b=np.ones(n, int), point=np.array(pts), normal=np.tile([0.0, 0.0, 1.0], (n, 1)),
            signed_distance=np.array(phis), rotation=np.tile(np.eye(3), (n, 1, 1)),
            jacobian=np.vstack(rows), velocity_bias=np.zeros(3 * n), stiffness=1e5 * ones,
            dissipation=10.0 * ones, friction=self.mu * ones, restitution=self.e * ones)

    def step(self, dt):
        m, d = self.pin_model, self.data
        contacts = self.contacts()
        M = pin.crba(m, d, self.q)
        M = np.triu(M) + np.triu(M, 1).T
        nle = pin.nonLinearEffects(m, d, self.q, self.v)
        g = pin.computeGeneralizedGravity(m, d, self.q)
        inputs = StepInputs(t=self.t, dt=dt, q=self.q.copy(), v=self.v.copy(), mass_matrix=M,
                            generalized_force=-nle, gravity_force=g, joint_damping=np.zeros(6),
                            actuation=Actuation.zeros(6), contacts=contacts)
        result = self.engine.step(inputs)
        assert result.stats.status.ok, result.stats.message
        self.q = result.q_next if result.q_next is not None else pin.integrate(m, self.q, dt * result.v_next)
        self.v = result.v_next.copy()
        self.t += dt
        self.last = result
        return result

    @property
    def position(self):
        return self.q[:3]

    def world_velocity(self):
        R = pin.Quaternion(self.q[3:7]).toRotationMatrix()
        return R @ self.v[:3]
