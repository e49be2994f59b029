"""The gravity feed-forward of the actuated joints: g(q) (N*m or N), the joint torques and forces that hold the
robot against gravity, which the node's ``gravity_compensation`` adds to position- and velocity-controlled joints
(as the iiwa's and the Panda's own controllers do; sim/default_gains.py explains why the PD does not carry it).

It is computed on the model without its free objects: a free object hangs on the world by a free flyer, so its
weight acts on no joint and the actuated joints' g(q) does not depend on it (an object with joints of its own, a
URDF object with a hinged lid, keeps its free flyer: the lid's g depends on how the object is turned). ``pin.buildReducedModel`` locks those
free flyers away; the robots' g(q) is then the same to round-off (differences of 1e-14 N*m on the iiwa;
test/test_gravity_feed_forward.py holds every preset to 1e-12), and it costs a robot-sized RNEA and a
robot-sized Pinocchio Data instead of the whole world's: Pinocchio 4.1's Data holds four nv^3 tensors
(pinocchio#2949), ~0.45 GB for the iiwa_wsg beside a 40-object bin (nv 249) where the robot alone has nv = 9, and
g(q) there takes 1.2 instead of 3.6 us. A model without free objects on the world is used as it is (the same
numbers as ``pin.computeGeneralizedGravity`` on it, bit for bit).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin


class GravityFeedForward:
    """g(q) of a MultibodyModel's actuated joints (``joint_names`` order), on its robots alone (module
    docstring)."""

    @staticmethod
    def of(model) -> "GravityFeedForward | None":
        """The feed-forward of ``model``, or None when it has no actuated joint (nothing to hold)."""
        return GravityFeedForward(model) if len(model.joint_names) else None

    def __init__(self, model):
        pm = model.pin_model
        # free objects on the world that carry no joint (an articulated object's own joints feel its base's tilt)
        carriers = {pm.parents[j] for j in range(1, pm.njoints)}
        world_objects = [b.joint_id for b in model.free_bodies
                         if pm.parents[b.joint_id] == 0 and b.joint_id not in carriers]
        reduced = pin.buildReducedModel(pm, world_objects, pin.neutral(pm)) if world_objects else pm
        # the reduced model's q is one block of the whole model's q (the loader puts the robots first, the objects
        # after them): a view of it, no gather; any other layout keeps the whole model
        self._q_block = None
        if reduced is not pm:
            first = pm.joints[pm.getJointId(reduced.names[1])].idx_q
            block = all(pm.joints[pm.getJointId(reduced.names[j])].idx_q == first + reduced.joints[j].idx_q
                        for j in range(1, reduced.njoints))
            if block:
                self._q_block = slice(first, first + reduced.nq)
            else:
                reduced = pm
        self.model = reduced                            # the robots (the whole model when it has no free object)
        self._data = pin.Data(reduced)
        self._v_index = np.array([reduced.joints[reduced.getJointId(name)].idx_v for name in model.joint_names],
                                 dtype=np.intp)

    def compute(self, q: np.ndarray, out: np.ndarray) -> np.ndarray:
        """g (N*m or N) of the actuated joints at the whole model's configuration ``q`` (nq,), into ``out``
        (len(joint_names),); returns ``out``."""
        if self._q_block is not None:
            q = q[self._q_block]
        return pin.computeGeneralizedGravity(self.model, self._data, q).take(self._v_index, out=out)
