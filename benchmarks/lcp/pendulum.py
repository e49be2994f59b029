"""The multi-link pendulum of Jain et al. 2012, section V-E, in minimal and in redundant coordinates.

n identical 1 kg solid spheres of radius r = 6 / n m joined by pin hinges (axis y) into a 12 m chain; pivot at
(0, 0, 10) m; floor z = 0; wall x = 4 m; initial angle pi/2 (chain horizontal towards -x), initial angular
velocity 1 rad/s towards the wall; gravity 9.8 m/s^2; restitution 0.5 for every contact; self-collisions
between spheres that are not neighbours.

* Minimal coordinates (MC): n revolute joints, contact mathematics of ``contact_sim_ros.engines.lcp_minimal``
  (eq. 28), Lambda = J M^-1 J^T from ``pin.computeMinverse`` (default ``lambda_route``; or articulated-body
  columns, ``pin.aba`` per contact direction), free velocity by ``pin.aba``: the mass matrix is never formed.
* Redundant coordinates (RC): n free-flyer bodies (6n coordinates) and 5 bilateral constraints per hinge
  (3 translations + 2 rotations), the mixed LCP of eq. 34 solved by the same ``ImpulseStepper`` (the
  bilateral multipliers eliminated by a Schur complement, or the whole mixed problem as one LCP: ``bilateral``),
  hinge drift stabilised by a Baumgarte term.

Per step, both modes do the same work where they can: the contact Jacobians (``pin.computeJointJacobians`` and
the contact kernel) only when some contact is within the margin (``any_contact_kernel``), M^-1 [J; Jb]^T handed
to the stepper as a callable, formed only when an impulse has to be computed (MC: a touching or colliding
contact; RC: every step, for the hinge rows).

Contact detection is analytic (spheres against the two planes and each other), identical for both modes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg.blas
from numba import njit

from contact_sim_ros.engines.lcp_minimal import ImpulseStepper

LENGTH = 12.0        # m
PIVOT_HEIGHT = 10.0  # m
WALL_X = 4.0         # m
MASS = 1.0           # kg
GRAVITY = 9.8        # m/s^2
RESTITUTION = 0.5
FRICTION = 0.3       # the paper does not state mu; planar problem, 4 friction directions
Y = np.array([0.0, 1.0, 0.0])


def sphere_inertia(r):
    return pin.Inertia(MASS, np.zeros(3), np.eye(3) * 0.4 * MASS * r * r)


def build_minimal(n):
    """Chain of revolute-Y joints. Joint k sits at the top of sphere k; the sphere centre is 0.. r below."""
    r = LENGTH / (2 * n)
    model = pin.Model()
    parent = 0
    for k in range(n):
        placement = pin.SE3(np.eye(3), np.array([0.0, 0.0, PIVOT_HEIGHT if k == 0 else -2 * r]))
        parent = model.addJoint(parent, pin.JointModelRY(), placement, f"hinge_{k}")
        model.appendBodyToJoint(parent, pin.Inertia(MASS, np.array([0.0, 0.0, -r]), np.eye(3) * 0.4 * MASS * r * r),
                                pin.SE3.Identity())
    model.gravity = pin.Motion(np.array([0.0, 0.0, -GRAVITY]), np.zeros(3))
    q = np.zeros(n)
    v = np.zeros(n)
    q[0] = np.pi / 2          # R_y(pi/2) maps the downward chain onto -x
    v[0] = -1.0               # towards +x (the wall)
    centre_offset = pin.SE3(np.eye(3), np.array([0.0, 0.0, -r]))
    return model, q, v, centre_offset


def build_redundant(n):
    """n free-flyers; the initial state is the minimal model's."""
    r = LENGTH / (2 * n)
    mc_model, q_mc, v_mc, offset = build_minimal(n)
    d = mc_model.createData()
    pin.forwardKinematics(mc_model, d, q_mc, v_mc)
    model = pin.Model()
    q = []
    v = []
    for k in range(n):
        jid = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), f"link_{k}")
        model.appendBodyToJoint(jid, sphere_inertia(r), pin.SE3.Identity())
        pose = d.oMi[k + 1] * offset
        q.append(pin.SE3ToXYZQUAT(pose))
        v.append(offset.actInv(d.v[k + 1]).vector)
    model.gravity = pin.Motion(np.array([0.0, 0.0, -GRAVITY]), np.zeros(3))
    return model, np.concatenate(q), np.concatenate(v)


@dataclass
class Trace:
    t: np.ndarray
    height: np.ndarray            # m, last link centre
    vertical_velocity: np.ndarray  # m/s, last link centre (the floor's normal velocity)
    wall_time: float              # s
    lcp_solves: int
    max_contacts: int
    failures: int


def support_mask(model):
    """(njoints - 1, nv) bool: dof j moves body k (j belongs to joint k or one of its ancestors)."""
    mask = np.zeros((model.njoints - 1, model.nv), dtype=bool)
    for k in range(1, model.njoints):
        for j in model.supports[k]:
            if j > 0:
                iv, nvj = model.joints[j].idx_v, model.joints[j].nv
                mask[k - 1, iv:iv + nvj] = True
    return mask


def contact_frames(normals):
    """(N, 3, 3) contact frames [t1, t2, n] (columns) for unit normals (N, 3): t2 along the hinge axis y
    projected on the tangent plane (x when n is along y), t1 = t2 x n."""
    t2 = Y[None, :] - normals[:, 1:2] * normals
    norm = np.linalg.norm(t2, axis=1)
    degenerate = norm < 1e-9
    if np.any(degenerate):
        alt = np.array([1.0, 0.0, 0.0])[None, :] - normals[:, 0:1] * normals
        t2[degenerate] = alt[degenerate]
        norm[degenerate] = np.linalg.norm(alt[degenerate], axis=1)
    t2 /= norm[:, None]
    t1 = np.cross(t2, normals)
    return np.stack([t1, t2, normals], axis=2)


def quaternion_matrices(quat):
    """(n, 3, 3) rotation matrices of unit quaternions (n, 4) in Pinocchio's (x, y, z, w) order."""
    x, y, z, w = quat.T
    R = np.empty((quat.shape[0], 3, 3))
    R[:, 0, 0] = 1 - 2 * (y * y + z * z)
    R[:, 0, 1] = 2 * (x * y - z * w)
    R[:, 0, 2] = 2 * (x * z + y * w)
    R[:, 1, 0] = 2 * (x * y + z * w)
    R[:, 1, 1] = 1 - 2 * (x * x + z * z)
    R[:, 1, 2] = 2 * (y * z - x * w)
    R[:, 2, 0] = 2 * (x * z - y * w)
    R[:, 2, 1] = 2 * (y * z + x * w)
    R[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return R


@njit(cache=True)
def contacts_kernel(centres, r, margin, wall_x, pairs, Jworld, support, J_out, phi_out):
    """Compiled ``PendulumSim.contacts_numpy``: fills J_out (3N, nv) and phi_out (N,) for the floor, the wall
    and the non-neighbour sphere pairs within ``margin``; returns N (same contacts, same order, same frames)."""
    n = centres.shape[0]
    nv = Jworld.shape[1]
    N = 0
    normal = np.empty(3)
    point = np.empty(3)
    R = np.empty((3, 3))
    for kind in range(3):
        count = n if kind < 2 else pairs.shape[0]
        for idx in range(count):
            if kind == 0:
                b, a = idx, -1
                gap = centres[b, 2] - r
                if gap >= margin:
                    continue
                normal[0], normal[1], normal[2] = 0.0, 0.0, 1.0
                point[0], point[1], point[2] = centres[b, 0], centres[b, 1], centres[b, 2] - r
            elif kind == 1:
                b, a = idx, -1
                gap = wall_x - centres[b, 0] - r
                if gap >= margin:
                    continue
                normal[0], normal[1], normal[2] = -1.0, 0.0, 0.0
                point[0], point[1], point[2] = centres[b, 0] + r, centres[b, 1], centres[b, 2]
            else:
                a, b = pairs[idx, 0], pairs[idx, 1]
                dx = centres[b, 0] - centres[a, 0]
                dy = centres[b, 1] - centres[a, 1]
                dz = centres[b, 2] - centres[a, 2]
                dist = np.sqrt(dx * dx + dy * dy + dz * dz)
                gap = dist - 2 * r
                if gap >= margin:
                    continue
                normal[0], normal[1], normal[2] = dx / dist, dy / dist, dz / dist
                for c in range(3):
                    point[c] = centres[a, c] + normal[c] * (r + 0.5 * gap)
            # contact frame: t2 = y projected on the tangent plane (x if n is along y), t1 = t2 x n
            t2x, t2y, t2z = -normal[1] * normal[0], 1.0 - normal[1] * normal[1], -normal[1] * normal[2]
            norm = np.sqrt(t2x * t2x + t2y * t2y + t2z * t2z)
            if norm < 1e-9:
                t2x, t2y, t2z = 1.0 - normal[0] * normal[0], -normal[0] * normal[1], -normal[0] * normal[2]
                norm = np.sqrt(t2x * t2x + t2y * t2y + t2z * t2z)
            t2x, t2y, t2z = t2x / norm, t2y / norm, t2z / norm
            R[0, 0] = t2y * normal[2] - t2z * normal[1]
            R[1, 0] = t2z * normal[0] - t2x * normal[2]
            R[2, 0] = t2x * normal[1] - t2y * normal[0]
            R[0, 1], R[1, 1], R[2, 1] = t2x, t2y, t2z
            R[0, 2], R[1, 2], R[2, 2] = normal[0], normal[1], normal[2]
            phi_out[N] = gap
            for j in range(nv):
                sb = 1.0 if support[b, j] else 0.0
                sa = 1.0 if (a >= 0 and support[a, j]) else 0.0
                w = sb - sa
                if w == 0.0:
                    for row in range(3):
                        J_out[3 * N + row, j] = 0.0
                    continue
                # world point velocity per unit dof j: lin + ang x p
                vx = Jworld[0, j] + Jworld[4, j] * point[2] - Jworld[5, j] * point[1]
                vy = Jworld[1, j] + Jworld[5, j] * point[0] - Jworld[3, j] * point[2]
                vz = Jworld[2, j] + Jworld[3, j] * point[1] - Jworld[4, j] * point[0]
                for row in range(3):
                    J_out[3 * N + row, j] = w * (R[0, row] * vx + R[1, row] * vy + R[2, row] * vz)
            N += 1
    return N


@njit(cache=True)
def any_contact_kernel(centres, r, margin, wall_x, pairs):
    """True if ``contacts_kernel`` would find a contact (floor, wall or non-neighbour pair within margin)."""
    for b in range(centres.shape[0]):
        if not (centres[b, 2] - r >= margin and wall_x - centres[b, 0] - r >= margin):   # as contacts_kernel
            return True
    for idx in range(pairs.shape[0]):
        a, b = pairs[idx, 0], pairs[idx, 1]
        dx = centres[b, 0] - centres[a, 0]
        dy = centres[b, 1] - centres[a, 1]
        dz = centres[b, 2] - centres[a, 2]
        if not (np.sqrt(dx * dx + dy * dy + dz * dz) - 2 * r >= margin):
            return True
    return False


@njit(cache=True)
def chain_centres_kernel(q, r, pivot_height, out):
    """Sphere centres (n, 3) of the planar chain (all hinges about y): absolute angle theta_k = q_0 + .. + q_k,
    joint k+1 = joint k + R_y(theta_k) (0, 0, -2r), centre k = joint k + R_y(theta_k) (0, 0, -r)."""
    theta = 0.0
    x, z = 0.0, pivot_height
    for k in range(q.shape[0]):
        theta += q[k]
        s, c = np.sin(theta), np.cos(theta)
        out[k, 0] = x - r * s
        out[k, 1] = 0.0
        out[k, 2] = z - r * c
        x -= 2 * r * s
        z -= 2 * r * c
    return out


@njit(cache=True)
def hinge_kernel(q, r, pivot_height, Jb, C):
    """Compiled ``PendulumSim.hinge_constraints_numpy``: fills the non-zero blocks of Jb (5n, 6n) and C (5n,)
    from the free-flyer configurations q (7n,) = n x (centre, quaternion x y z w)."""
    n = q.shape[0] // 7
    R = np.empty((n, 3, 3))
    for k in range(n):
        x, y, z, w = q[7 * k + 3], q[7 * k + 4], q[7 * k + 5], q[7 * k + 6]
        R[k, 0, 0] = 1 - 2 * (y * y + z * z)
        R[k, 0, 1] = 2 * (x * y - z * w)
        R[k, 0, 2] = 2 * (x * z + y * w)
        R[k, 1, 0] = 2 * (x * y + z * w)
        R[k, 1, 1] = 1 - 2 * (x * x + z * z)
        R[k, 1, 2] = 2 * (y * z - x * w)
        R[k, 2, 0] = 2 * (x * z - y * w)
        R[k, 2, 1] = 2 * (y * z + x * w)
        R[k, 2, 2] = 1 - 2 * (x * x + y * y)
    for k in range(n):
        row = 5 * k
        for sign, body in ((1.0, k), (-1.0, k - 1)):
            if body < 0:
                continue
            col = 6 * body
            a = r if sign > 0 else -r          # top (0, 0, r) of the child, bottom (0, 0, -r) of the parent
            for i in range(3):
                for j in range(3):
                    Jb[row + i, col + j] = sign * R[body, i, j]
                # -R [a e_z]x:  columns (-a R[:, 1], a R[:, 0], 0)
                Jb[row + i, col + 3] = sign * (-a * R[body, i, 1])
                Jb[row + i, col + 4] = sign * (a * R[body, i, 0])
                Jb[row + i, col + 5] = 0.0
            for jj in range(3):
                Jb[row + 3, col + jj] = 0.0
                Jb[row + 4, col + jj] = 0.0
                Jb[row + 3, col + 3 + jj] = sign * R[body, 0, jj]
                Jb[row + 4, col + 3 + jj] = sign * R[body, 2, jj]
        # positions: child top - parent bottom (pivot for k = 0)
        for i in range(3):
            top = q[7 * k + i] + r * R[k, i, 2]
            if k == 0:
                C[row + i] = top - (pivot_height if i == 2 else 0.0)
            else:
                C[row + i] = top - (q[7 * (k - 1) + i] - r * R[k - 1, i, 2])
        # axis misalignment y_parent x y_child (x, z components)
        if k == 0:
            px, py, pz = 0.0, 1.0, 0.0
        else:
            px, py, pz = R[k - 1, 0, 1], R[k - 1, 1, 1], R[k - 1, 2, 1]
        cx, cy, cz = R[k, 0, 1], R[k, 1, 1], R[k, 2, 1]
        C[row + 3] = py * cz - pz * cy
        C[row + 4] = px * cy - py * cx


class PendulumSim:
    """Time-stepping of the pendulum in 'minimal' or 'redundant' coordinates.

    Kinematics is vectorised over the links in both modes (no Python loop over links or contacts): sphere
    centres by the closed-form planar chain (minimal; the hinges all turn about y) or read from q
    (redundant), contact Jacobians from Pinocchio's world-frame joint Jacobians ``data.J`` masked by each
    body's supporting dofs, hinge constraint Jacobians (redundant) assembled block-wise from the link
    rotations.
    """

    def __init__(self, n, mode="minimal", dt=1e-3, n_directions=4, margin=0.05, erp_bilateral=0.2,
                 bilateral="schur", lambda_route="minverse"):
        """mode: 'minimal' or 'redundant'; bilateral (redundant only): 'schur' eliminates the hinge
        multipliers by a Schur complement before Lemke, 'split' hands the whole mixed LCP (eq. 34) to Lemke
        as one LCP (the paper's redundant-coordinate setup with a complementarity solver).
        lambda_route (minimal only): how M^-1 J^T is formed for Lambda = J M^-1 J^T: 'minverse'
        (pin.computeMinverse, O(N^2) in C++: the fastest for the table's N <= 30, see the lambda benchmark)
        or 'aba' (one articulated-body sweep per contact direction, O(N) each, 3 Python calls per contact)."""
        if lambda_route not in ("minverse", "aba"):
            raise ValueError(f"unknown lambda_route {lambda_route!r}; valid: minverse, aba")
        self.lambda_route = lambda_route
        self.n, self.mode, self.dt = n, mode, dt
        self.r = LENGTH / (2 * n)
        self.margin = margin
        self.erp_b = erp_bilateral
        if mode == "minimal":
            self.model, self.q, self.v, self.offset = build_minimal(n)
            self.centre_local = np.array([0.0, 0.0, -self.r])
        elif mode == "redundant":
            self.model, self.q, self.v = build_redundant(n)
            self.centre_local = np.zeros(3)
        else:
            raise ValueError(f"unknown mode {mode!r}; valid modes: minimal, redundant")
        self.data = self.model.createData()
        self.zero_g = self.model.copy()
        self.zero_g.gravity = pin.Motion.Zero()
        self.zero_g_data = self.zero_g.createData()
        self.nv = self.model.nv
        self.zero_v = np.zeros(self.nv)
        self.zero_tau = np.zeros(self.nv)
        self.stepper = ImpulseStepper(n_directions=n_directions, bilateral=bilateral)
        self.pairs = np.array([(i, j) for i in range(n) for j in range(i + 2, n)], dtype=int).reshape(-1, 2)
        self.support = support_mask(self.model)
        max_contacts = 2 * n + len(self.pairs)
        self._J_buf = np.empty((3 * max_contacts, self.nv))
        self._phi_buf = np.empty(max_contacts)
        self._friction = np.full(max_contacts, FRICTION)
        self._restitution = np.full(max_contacts, RESTITUTION)
        self._zero_bias = np.zeros(3 * max_contacts)
        self._no_columns = np.zeros((self.nv, 0))
        if mode == "redundant":
            self.inv_mass_diag = np.tile(np.r_[np.full(3, 1.0 / MASS), np.full(3, 1.0 / (0.4 * MASS * self.r ** 2))], n)
            self.Jb = np.zeros((5 * n, self.nv))
            self.Cb = np.zeros(5 * n)
        self.t = 0.0
        self.lcp_solves = 0
        self.failures = 0

    # ------------------------------------------------------------------ kinematics helpers
    def _centres(self):
        """(n, 3) sphere centres (m) at the current q."""
        if self.mode == "redundant":
            return self.q.reshape(self.n, 7)[:, :3].copy()
        return chain_centres_kernel(self.q, self.r, PIVOT_HEIGHT, np.empty((self.n, 3)))

    def _centres_numpy(self):
        """Vectorised numpy version of ``_centres`` (minimal mode)."""
        theta = np.cumsum(self.q)                   # absolute link angles about y
        s, c = np.sin(theta), np.cos(theta)
        centres = np.zeros((self.n, 3))
        # joint k origin = pivot + sum_{j<k} R_y(theta_j) (0, 0, -2r); centre = origin + R_y(theta_k) (0, 0, -r)
        centres[:, 0] = -2 * self.r * (np.cumsum(s) - s) - self.r * s
        centres[:, 2] = PIVOT_HEIGHT - 2 * self.r * (np.cumsum(c) - c) - self.r * c
        return centres

    def _point_jacobians(self, links, points):
        """(N, 3, nv) world-frame Jacobians of the points (N, 3) fixed on ``links`` (N,), from data.J
        (computeJointJacobians): v_p = v_o + w x p for the dofs supporting the link, 0 elsewhere."""
        Jw = self.data.J
        lin, ang = Jw[:3], Jw[3:]
        Jp = lin[None, :, :] + np.cross(ang.T[None, :, :], points[:, None, :], axis=2).transpose(0, 2, 1)
        return Jp * self.support[links][:, None, :]

    def contacts(self, centres):
        """(J (3N, nv), phi (N,)) for floor, wall and non-neighbour sphere pairs within the margin, in the
        contact frames (t1, t2, n); needs data.J at the current q. Compiled kernel (``contacts_kernel``);
        ``contacts_numpy`` is the vectorised reference it is tested against."""
        N = contacts_kernel(centres, self.r, self.margin, WALL_X, self.pairs, self.data.J, self.support,
                            self._J_buf, self._phi_buf)
        return self._J_buf[:3 * N].copy(), self._phi_buf[:N].copy()

    def contacts_numpy(self, centres):
        """Vectorised numpy version of ``contacts`` (same contacts, same order)."""
        r = self.r
        floor = np.flatnonzero(centres[:, 2] - r < self.margin)
        wall = np.flatnonzero(WALL_X - centres[:, 0] - r < self.margin)
        if len(self.pairs):
            diff = centres[self.pairs[:, 1]] - centres[self.pairs[:, 0]]
            dist = np.linalg.norm(diff, axis=1)
            close = np.flatnonzero(dist - 2 * r < self.margin)
        else:
            close = np.zeros(0, dtype=int)
        N = floor.size + wall.size + close.size
        if N == 0:
            return np.zeros((0, self.nv)), np.zeros(0)
        normals = np.empty((N, 3))
        points = np.empty((N, 3))
        phi = np.empty(N)
        nfl, nw = floor.size, wall.size
        normals[:nfl] = (0.0, 0.0, 1.0)
        points[:nfl] = centres[floor] - (0.0, 0.0, r)
        phi[:nfl] = centres[floor, 2] - r
        normals[nfl:nfl + nw] = (-1.0, 0.0, 0.0)
        points[nfl:nfl + nw] = centres[wall] + (r, 0.0, 0.0)
        phi[nfl:nfl + nw] = WALL_X - centres[wall, 0] - r
        i_link, j_link = self.pairs[close, 0], self.pairs[close, 1]
        if close.size:
            nrm = diff[close] / dist[close, None]
            gap = dist[close] - 2 * r
            normals[nfl + nw:] = nrm
            points[nfl + nw:] = centres[i_link] + nrm * (r + 0.5 * gap)[:, None]
            phi[nfl + nw:] = gap
        R = contact_frames(normals)
        # body B of each contact (impulse acts on B): the sphere for floor/wall, sphere j for pairs
        b_links = np.concatenate([floor, wall, j_link])
        Jrel = self._point_jacobians(b_links, points)
        if close.size:
            Jrel[nfl + nw:] -= self._point_jacobians(i_link, points[nfl + nw:])
        J = np.einsum("nab,nav->nbv", R, Jrel).reshape(3 * N, self.nv)
        return J, phi

    def hinge_constraints(self):
        """Redundant mode: (Jb (5n, nv), C (5n,)) for the pivot and the n - 1 hinges, world frame rows
        (3 point-coincidence rows, angular velocity rows x and z); C's angular rows are the x, z components
        of y_parent x y_child (the hinge axes' misalignment, = the relative rotation to first order).
        Compiled kernel (``hinge_kernel``); ``hinge_constraints_numpy`` is the reference it is tested against."""
        hinge_kernel(self.q, self.r, PIVOT_HEIGHT, self.Jb, self.Cb)
        return self.Jb, self.Cb

    def hinge_constraints_numpy(self):
        """Vectorised numpy version of ``hinge_constraints``."""
        n, r = self.n, self.r
        qs = self.q.reshape(n, 7)
        centres = qs[:, :3]
        R = quaternion_matrices(qs[:, 3:])
        ez = R[:, :, 2]
        # point velocity of centre + R a, a = (0, 0, +-r):  R v_lin - [R a]x R w = R v_lin - R [a]x w
        Sz = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])   # [e_z]x
        top_block = np.concatenate([R, -r * R @ Sz], axis=2)                  # (n, 3, 6): d(top)/dv_k
        bottom_block = np.concatenate([R, r * R @ Sz], axis=2)                # d(bottom)/dv_k
        ang_block = np.concatenate([np.zeros((n, 2, 3)), R[:, (0, 2), :]], axis=2)   # world w_x, w_z rows
        Jb = self.Jb
        J4 = Jb.reshape(n, 5, n, 6)
        k = np.arange(n)
        J4[k, :3, k, :] = top_block
        J4[k, 3:, k, :] = ang_block
        J4[k[1:], :3, k[:-1], :] = -bottom_block[:-1]
        J4[k[1:], 3:, k[:-1], :] = -ang_block[:-1]
        top = centres + r * ez
        bottom = centres - r * ez
        C = self.Cb.reshape(n, 5)
        C[0, :3] = top[0] - (0.0, 0.0, PIVOT_HEIGHT)
        C[1:, :3] = top[1:] - bottom[:-1]
        y_axes = R[:, :, 1]
        parent_y = np.vstack([Y, y_axes[:-1]])
        mis = np.cross(parent_y, y_axes)
        C[:, 3] = mis[:, 0]
        C[:, 4] = mis[:, 2]
        return Jb, self.Cb

    # ------------------------------------------------------------------ stepping
    def step(self):
        m, d, dt = self.model, self.data, self.dt
        centres = self._centres()
        if any_contact_kernel(centres, self.r, self.margin, WALL_X, self.pairs):
            pin.computeJointJacobians(m, d, self.q)              # forward kinematics + world data.J
            J, phi = self.contacts(centres)
        else:                                                    # no contact within the margin: no Jacobian
            J, phi = self._J_buf[:0], self._phi_buf[:0]
        N = phi.shape[0]
        a_free = pin.aba(m, d, self.q, self.v, self.zero_tau)    # O(N) free acceleration (eq. 2)
        v_free = self.v + dt * a_free
        mu, e, bias = self._friction[:N], self._restitution[:N], self._zero_bias[:3 * N]
        if self.mode == "minimal":
            if N == 0:
                X = self._no_columns
            elif self.lambda_route == "aba":
                def X():                                           # M^-1 J^T column by column, O(N) each
                    out = np.empty((self.nv, 3 * N))
                    for c in range(3 * N):
                        out[:, c] = pin.aba(self.zero_g, self.zero_g_data, self.q, self.zero_v, J[c])
                    return out
            else:
                def X():                                           # M^-1 (upper triangle) in C++, O(N^2)
                    Minv = pin.computeMinverse(self.zero_g, self.zero_g_data, self.q)
                    return scipy.linalg.blas.dsymm(1.0, Minv, J.T, side=0, lower=0)
            # X is formed only when the stepper needs an impulse (a touching or colliding contact)
            out = self.stepper.step(dt, self.v, v_free, X, J, bias, phi, mu, e, t=self.t)
        else:
            Jb, C = self.hinge_constraints()

            def X():                                               # block-diagonal constant M
                return self.inv_mass_diag[:, None] * np.vstack([J, Jb]).T
            out = self.stepper.step(dt, self.v, v_free, X, J, bias, phi, mu, e, Jb=Jb, b_bias=self.erp_b * C / dt,
                                    t=self.t)
        self.lcp_solves += out.lcp_solves
        if not out.status.ok:
            self.failures += 1
        self.q = pin.integrate(m, self.q, dt * out.v_displacement)
        self.v = out.v_next
        self.t += dt
        return N

    def last_link_state(self):
        """(height m, vertical velocity m/s) of the last sphere's centre."""
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, self.q, self.v)
        k = self.n
        centre = d.oMi[k].act(self.centre_local)
        vel = d.oMi[k].rotation @ (d.v[k].linear + np.cross(d.v[k].angular, self.centre_local))
        return centre[2], vel[2]

    def run(self, duration, record=True):
        steps = int(round(duration / self.dt))
        t = np.empty(steps + 1)
        h = np.empty(steps + 1)
        vz = np.empty(steps + 1)
        t[0] = 0.0
        h[0], vz[0] = self.last_link_state()
        max_contacts = 0
        start = time.perf_counter()
        for k in range(steps):
            max_contacts = max(max_contacts, self.step())
            if record:
                t[k + 1] = self.t
                h[k + 1], vz[k + 1] = self.last_link_state()
        wall = time.perf_counter() - start
        return Trace(t, h, vz, wall, self.lcp_solves, max_contacts, self.failures)
