"""The gravity feed-forward of the actuated joints: g(q) (N*m or N), the joint torques and forces that hold the
robot against gravity, which the node's ``gravity_compensation`` adds to position- and velocity-controlled joints
(as the iiwa's and the Panda's own controllers do; sim/default_gains.py explains why the PD does not carry it).

Computed on the robots alone (model/robots_only.py: the free objects locked away; their weight acts on no joint):
the same g(q) to round-off (differences of 1e-14 N*m on the iiwa; test/test_gravity_feed_forward.py holds every
preset to 1e-12) with a robot-sized RNEA and Pinocchio Data (iiwa_wsg beside a 40-object bin: nv 9 instead of
249, ~0.45 GB less, g(q) 1.2 instead of 3.6 us). A model without free objects is used as it is (the same numbers
as ``pin.computeGeneralizedGravity`` on it, bit for bit).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .. import native_build
from ..model.robots_only import robots_only


class GravityFeedForward:
    """g(q) of a MultibodyModel's actuated joints (``joint_names`` order), on its robots alone (module
    docstring)."""

    @staticmethod
    def of(model) -> "GravityFeedForward | None":
        """The feed-forward of ``model``, or None when it has no actuated joint (nothing to hold)."""
        return GravityFeedForward(model) if len(model.joint_names) else None

    def __init__(self, model):
        self.robots = robots_only(model)
        rm = self.robots.model
        self._data = pin.Data(rm)
        self._v_index = np.array([rm.joints[rm.getJointId(name)].idx_v for name in model.joint_names],
                                 dtype=np.int64)
        # the same Pinocchio call compiled, without its numpy result (sim/rigid_body_dynamics.cpp, when built)
        module = native_build.RIGID_BODY.load()
        self._rigid = None if module is None else module.RigidBodyDynamics(
            rm, self._data, np.zeros((rm.nv, rm.nv)), np.zeros(rm.nv), np.zeros(rm.nv))

    @property
    def model(self) -> pin.Model:
        """The robots' Pinocchio model (the whole model when it has no free object)."""
        return self.robots.model

    def compute(self, q: np.ndarray, out: np.ndarray) -> np.ndarray:
        """g (N*m or N) of the actuated joints at the whole model's configuration ``q`` (nq,), into ``out``
        (len(joint_names),); returns ``out``."""
        robots = self.robots
        if self._rigid is not None:
            self._rigid.joint_gravity(robots.q(q), self._v_index, out)
            return out
        return pin.computeGeneralizedGravity(robots.model, self._data, robots.q(q)).take(self._v_index, out=out)
