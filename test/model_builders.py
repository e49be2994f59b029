"""Hand-built MultibodyModels for tests and benchmarks (the same structure the loader produces)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contact_sim_ros.model.materials import ContactMaterial
from contact_sim_ros.model.multibody_model import FreeBody, MultibodyModel


def default_pairs(geom_model: pin.GeometryModel) -> np.ndarray:
    """All pairs (a < b) on different joints, except static-static pairs."""
    parents = [g.parentJoint for g in geom_model.geometryObjects]
    pairs = [(a, b) for a in range(len(parents)) for b in range(a + 1, len(parents))
             if parents[a] != parents[b] and not (parents[a] == 0 and parents[b] == 0)]
    return np.array(pairs, dtype=int).reshape(-1, 2)


def make_model(pin_model: pin.Model, geom_model: pin.GeometryModel, pairs=None,
               material: ContactMaterial = ContactMaterial(), geometry_materials: dict | None = None,
               mimic_joints=(), source: str = "<test>") -> MultibodyModel:
    """MultibodyModel from a Pinocchio model + collision model. 1-dof joints become actuated robot joints,
    free-flyer joints free bodies; ``geometry_materials`` maps geometry names to ContactMaterial overrides."""
    names, q_idx, v_idx, free = [], [], [], []
    actuated = np.zeros(pin_model.nv, dtype=bool)
    for j in range(1, pin_model.njoints):
        joint = pin_model.joints[j]
        short = joint.shortname()
        if short == "JointModelFreeFlyer":
            inertia = pin_model.inertias[j]
            free.append(FreeBody(pin_model.names[j], j, pin_model.names[j], slice(joint.idx_q, joint.idx_q + 7),
                                 slice(joint.idx_v, joint.idx_v + 6), float(inertia.mass)))
        elif joint.nv == 1 and "Mimic" not in short:
            names.append(pin_model.names[j])
            q_idx.append(joint.idx_q)
            v_idx.append(joint.idx_v)
            actuated[joint.idx_v] = True
    # trees: joints hanging off the universe and their subtrees
    root_of = [0] * pin_model.njoints
    for j in range(1, pin_model.njoints):
        p = pin_model.parents[j]
        root_of[j] = j if p == 0 else root_of[p]
    slices = []
    for root in sorted(set(root_of[1:])):
        idx = [k for j in range(1, pin_model.njoints) if root_of[j] == root
               for k in range(pin_model.joints[j].idx_v, pin_model.joints[j].idx_v + pin_model.joints[j].nv)]
        if idx:
            slices.append(slice(min(idx), max(idx) + 1))
    geometry_materials = geometry_materials or {}
    mats = [geometry_materials.get(g.name, material) for g in geom_model.geometryObjects]
    nj = len(names)
    ro = lambda a: _readonly(np.asarray(a))  # noqa: E731
    return MultibodyModel(
        pin_model=pin_model, collision_model=geom_model, source=source,
        joint_names=tuple(names), joint_q_index=ro(np.array(q_idx, int)), joint_v_index=ro(np.array(v_idx, int)),
        position_lower=ro(np.full(nj, -np.inf)), position_upper=ro(np.full(nj, np.inf)),
        velocity_limit=ro(np.full(nj, np.inf)), effort_limit=ro(np.full(nj, np.inf)),
        mimic_joints=tuple(mimic_joints),
        joint_damping=ro(np.zeros(pin_model.nv)), joint_friction=ro(np.zeros(pin_model.nv)), actuated=ro(actuated),
        free_bodies=tuple(free), tree_velocity_slices=tuple(slices),
        geometry_names=tuple(g.name for g in geom_model.geometryObjects),
        geometry_parent_joint=ro(np.array([g.parentJoint for g in geom_model.geometryObjects], int)),
        geometry_stiffness=ro(np.array([m.stiffness for m in mats], float)),
        geometry_dissipation=ro(np.array([m.dissipation for m in mats], float)),
        geometry_friction=ro(np.array([m.friction for m in mats], float)),
        geometry_restitution=ro(np.array([m.restitution for m in mats], float)),
        collision_pairs=ro(default_pairs(geom_model) if pairs is None else np.asarray(pairs, int).reshape(-1, 2)),
        gravity=ro(np.array([0.0, 0.0, -9.81])),
    )


def _readonly(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.setflags(write=False)
    return a


def free_body_scene(free=(), static=(), **kwargs) -> MultibodyModel:
    """Scene of free bodies and static geometry.

    free: iterable of (name, coal shape, mass kg); static: iterable of (name, coal shape, pin.SE3 placement).
    Static geometry comes first in the geometry list (so in a static-vs-free pair A is static), then the free
    bodies in order; each free body has one geometry at its joint origin.
    """
    pm = pin.Model()
    gm = pin.GeometryModel()
    for name, shape, placement in static:
        gm.addGeometryObject(pin.GeometryObject(name, 0, placement, shape))
    for name, shape, mass in free:
        jid = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), name)
        pm.appendBodyToJoint(jid, pin.Inertia.FromSphere(mass, 0.05), pin.SE3.Identity())
        gm.addGeometryObject(pin.GeometryObject(name, jid, pin.SE3.Identity(), shape))
    return make_model(pm, gm, **kwargs)


def configuration(model: MultibodyModel, poses: dict) -> np.ndarray:
    """q with the free bodies named in ``poses`` (name -> pin.SE3) placed; others at the neutral pose."""
    q = pin.neutral(model.pin_model)
    for name, pose in poses.items():
        q[model.free_body(name).q_slice] = pin.SE3ToXYZQUAT(pose)
    return q


def pose(xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0)) -> pin.SE3:
    return pin.SE3(pin.rpy.rpyToMatrix(*map(float, rpy)), np.asarray(xyz, dtype=float))
