"""ContactSet: the result of one contact query (all arrays vectorised over the N contact points).

Conventions (used by every engine):

* A contact is between geometry A (``geometry_a``) and geometry B (``geometry_b``).
* ``normal`` is the unit normal in the world frame pointing from A towards B.
* ``signed_distance`` phi (m) is positive when separated and negative in penetration;
  penetration depth is ``-signed_distance``.
* ``point`` is the contact point in the world frame: the midpoint of the two witness points.
* The contact frame C has world rotation ``rotation[i] = [t1 t2 n]`` (columns): two unit tangents and the
  normal; contact-frame vectors are ordered (t1, t2, n).
* ``jacobian`` (3N x nv, rows [t1, t2, n] of contact 0, then contact 1, ...) maps generalized velocities to
  the velocity of B's material point relative to A's at the contact, expressed in the contact frame:
  ``v_c = jacobian @ v + velocity_bias``. ``velocity_bias`` (3N,) holds the part due to prescribed motion
  (e.g. a conveyor belt's surface velocity). The normal component v_n > 0 means separating, and to first
  order d(phi)/dt = v_n.
* A contact impulse gamma (N*s, contact frame) acts on B; -gamma acts on A. The generalized impulse is
  ``jacobian.T @ gamma`` (flattened).
* Material values are the pair's combined values (``model.materials.combine_materials``).
* ``jacobian_columns`` (optional, N x kmax int): per contact the generalized velocities (columns of
  ``jacobian``) its three rows use, ascending, then -1; its rows are exactly zero in every other column. The
  contact query's compiled kernel fills it (a free body's contact with the world uses 6 of the clutter's 240
  columns), so that an engine can read the rows' few columns instead of scanning them; None: not known.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(eq=False)
class ContactSet:
    geometry_a: np.ndarray        # (N,) int geometry index in the collision model
    geometry_b: np.ndarray        # (N,) int
    joint_a: np.ndarray           # (N,) int Pinocchio joint carrying A (0 = static world)
    joint_b: np.ndarray           # (N,) int Pinocchio joint carrying B
    point: np.ndarray             # (N, 3) m, world frame
    normal: np.ndarray            # (N, 3) unit, world frame, from A to B
    signed_distance: np.ndarray   # (N,) m, negative in penetration
    rotation: np.ndarray          # (N, 3, 3) world_R_contact, columns (t1, t2, n)
    jacobian: np.ndarray          # (3N, nv) contact-frame relative velocity Jacobian
    velocity_bias: np.ndarray     # (3N,) m/s, contact-frame relative velocity from prescribed motion
    stiffness: np.ndarray         # (N,) N/m
    dissipation: np.ndarray       # (N,) s/m, Hunt & Crossley
    friction: np.ndarray          # (N,) Coulomb coefficient
    restitution: np.ndarray       # (N,) in [0, 1]
    jacobian_columns: np.ndarray | None = None   # (N, kmax) int, see the module docstring; None: not known

    @property
    def size(self) -> int:
        """Number of contact points N."""
        return int(self.signed_distance.shape[0])

    def __len__(self) -> int:
        return self.size

    @classmethod
    def empty(cls, nv: int) -> "ContactSet":
        z = np.zeros(0)
        zi = np.zeros(0, dtype=int)
        return cls(zi, zi.copy(), zi.copy(), zi.copy(), np.zeros((0, 3)), np.zeros((0, 3)), z.copy(),
                   np.zeros((0, 3, 3)), np.zeros((0, nv)), z.copy(), z.copy(), z.copy(), z.copy(), z.copy())

    def relative_velocity(self, v: np.ndarray) -> np.ndarray:
        """Contact-frame relative velocities (N, 3) for generalized velocity v (m/s)."""
        return (self.jacobian @ v + self.velocity_bias).reshape(-1, 3)

    def world_forces(self, impulse: np.ndarray, dt: float) -> np.ndarray:
        """World-frame forces (N, 3) on B from contact-frame impulses (N, 3) over a step dt (N)."""
        return np.einsum("nij,nj->ni", self.rotation, impulse) / dt
