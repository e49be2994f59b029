"""The Pinocchio model of a scene's robots alone, for what concerns the robots only (the gravity feed-forward of
the actuated joints, a wrist F/T sensor).

A free object hangs on the world by a free flyer: nothing it does acts on a robot's joint except through contact,
so a robot's RNEA (g(q), the wrench through a joint) does not need it. ``pin.buildReducedModel`` locks those free
flyers away; what is left costs a robot-sized RNEA and a robot-sized ``pin.Data``: Pinocchio 4.1's Data holds four
nv^3 tensors (pinocchio#2949), ~0.45 GB for the iiwa_wsg beside a 40-object bin (nv 249) where the robot alone
has nv = 9. An object with joints of its own (a URDF object with a hinged lid) keeps its free flyer: its joints'
dynamics depend on how it is turned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin


@dataclass(frozen=True)
class RobotsOnly:
    """``model``: the robots' Pinocchio model (the whole model when nothing is locked away). Its q and v are the
    blocks ``q_block`` and ``v_block`` of the whole model's (None: the whole model itself); ``joint_of[j]`` is the
    joint of ``model`` that is joint j of the whole model (-1: locked away)."""

    model: pin.Model
    q_block: slice | None
    v_block: slice | None
    joint_of: np.ndarray

    @staticmethod
    def whole(pin_model: pin.Model) -> "RobotsOnly":
        """The whole model itself: nothing locked away."""
        return RobotsOnly(pin_model, None, None, np.arange(pin_model.njoints))

    def q(self, q_whole: np.ndarray) -> np.ndarray:
        """The robots' configuration (a view of the whole model's ``q_whole``)."""
        return q_whole if self.q_block is None else q_whole[self.q_block]

    def v(self, v_whole: np.ndarray) -> np.ndarray:
        """The robots' velocity or acceleration (a view of the whole model's)."""
        return v_whole if self.v_block is None else v_whole[self.v_block]


def robots_only(model) -> RobotsOnly:
    """The robots of a MultibodyModel alone (module docstring). Its robots' coordinates must be one block of q and
    of v (the loader puts the robots first and the objects after them); any other layout keeps the whole model."""
    pm = model.pin_model
    carriers = {pm.parents[j] for j in range(1, pm.njoints)}
    locked = [b.joint_id for b in model.free_bodies if pm.parents[b.joint_id] == 0 and b.joint_id not in carriers]
    whole = RobotsOnly.whole(pm)
    if not locked or len(locked) == pm.njoints - 1:
        return whole
    reduced = pin.buildReducedModel(pm, locked, pin.neutral(pm))
    joint_of = np.full(pm.njoints, -1, dtype=np.intp)
    joint_of[0] = 0
    first = pm.joints[pm.getJointId(reduced.names[1])]
    for j in range(1, reduced.njoints):
        full_id = pm.getJointId(reduced.names[j])
        full, kept = pm.joints[full_id], reduced.joints[j]
        if full.idx_q != first.idx_q + kept.idx_q or full.idx_v != first.idx_v + kept.idx_v:
            return whole
        joint_of[full_id] = j
    return RobotsOnly(reduced, slice(first.idx_q, first.idx_q + reduced.nq),
                      slice(first.idx_v, first.idx_v + reduced.nv), joint_of)
