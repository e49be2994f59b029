"""The multi-link pendulum of Jain et al. 2012, section V-E, in minimal and in redundant coordinates.

n identical 1 kg solid spheres of radius r = 6 / n m joined by pin hinges (axis y) into a 12 m chain; pivot at
(0, 0, 10) m; floor z = 0; wall x = 4 m; initial angle pi/2 (chain horizontal towards -x), initial angular
velocity 1 rad/s towards the wall; gravity 9.8 m/s^2; restitution 0.5 for every contact; self-collisions
between spheres that are not neighbours.

* Minimal coordinates (MC): n revolute joints, contact mathematics of ``contact_sim_ros.engines.lcp_minimal``
  (eq. 28), Lambda from M^-1 J^T columns by the articulated-body algorithm (``pin.aba``), free velocity by
  ``pin.aba`` too: the mass matrix is never formed.
* Redundant coordinates (RC): n free-flyer bodies (6n coordinates) and 5 bilateral constraints per hinge
  (3 translations + 2 rotations), the mixed LCP of eq. 34 solved by the same ``ImpulseStepper`` (the
  bilateral multipliers eliminated by a Schur complement), hinge drift stabilised by a Baumgarte term.

Contact detection is analytic (spheres against the two planes and each other), identical for both modes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

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


class PendulumSim:
    """Time-stepping of the pendulum in 'minimal' or 'redundant' coordinates."""

    def __init__(self, n, mode="minimal", dt=1e-3, n_directions=4, margin=0.05, erp_bilateral=0.2,
                 bilateral="schur"):
        """mode: 'minimal' or 'redundant'; bilateral (redundant only): 'schur' eliminates the hinge
        multipliers by a Schur complement before Lemke, 'split' hands the whole mixed LCP (eq. 34) to Lemke
        as one LCP (the paper's redundant-coordinate setup with a complementarity solver)."""
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
        if mode == "redundant":
            self.inv_mass_diag = np.tile(np.r_[np.full(3, 1.0 / MASS), np.full(3, 1.0 / (0.4 * MASS * self.r ** 2))], n)
        self.t = 0.0
        self.lcp_solves = 0
        self.failures = 0

    # ------------------------------------------------------------------ kinematics helpers
    def _centres(self):
        d = self.data
        return np.array([d.oMi[k + 1].act(self.centre_local) for k in range(self.n)])

    def _point_jacobian(self, link, world_point):
        d = self.data
        local = d.oMi[int(link) + 1].actInv(world_point)
        return pin.getFrameJacobian(self.model, d, int(link) + 1, pin.SE3(np.eye(3), local), pin.LOCAL_WORLD_ALIGNED)[:3]

    @staticmethod
    def _frame(normal):
        t2 = Y - (Y @ normal) * normal
        norm = np.linalg.norm(t2)
        if norm < 1e-9:
            t2 = np.array([1.0, 0.0, 0.0]) - normal[0] * normal
            norm = np.linalg.norm(t2)
        t2 /= norm
        t1 = np.cross(t2, normal)
        return np.column_stack([t1, t2, normal])

    def contacts(self, centres):
        """(J (3N, nv), phi (N,)) for floor, wall and non-neighbour sphere pairs within the margin."""
        r = self.r
        rows, phis = [], []
        floor = centres[:, 2] - r
        for k in np.flatnonzero(floor < self.margin):
            n = np.array([0.0, 0.0, 1.0])
            R = self._frame(n)
            rows.append(R.T @ self._point_jacobian(k, centres[k] - r * n))
            phis.append(floor[k])
        wall = WALL_X - centres[:, 0] - r
        for k in np.flatnonzero(wall < self.margin):
            n = np.array([-1.0, 0.0, 0.0])
            R = self._frame(n)
            rows.append(R.T @ self._point_jacobian(k, centres[k] - r * n))
            phis.append(wall[k])
        if len(self.pairs):
            diff = centres[self.pairs[:, 1]] - centres[self.pairs[:, 0]]
            dist = np.linalg.norm(diff, axis=1)
            gap = dist - 2 * r
            for p in np.flatnonzero(gap < self.margin):
                i, j = (int(x) for x in self.pairs[p])
                n = diff[p] / dist[p]
                R = self._frame(n)
                point = centres[i] + n * (r + 0.5 * gap[p])
                rows.append(R.T @ (self._point_jacobian(j, point) - self._point_jacobian(i, point)))
                phis.append(gap[p])
        if not rows:
            return np.zeros((0, self.nv)), np.zeros(0)
        return np.vstack(rows), np.array(phis)

    def hinge_constraints(self):
        """Redundant mode: (Jb (5n, nv), C (5n,)) for the pivot and the n - 1 hinges, world frame rows
        (3 point-coincidence rows, angular velocity rows x and z)."""
        d = self.data
        r = self.r
        n = self.n
        Jb = np.zeros((5 * n, self.nv))
        C = np.zeros(5 * n)
        top = np.array([0.0, 0.0, r])
        for k in range(n):
            Jk_full = pin.getFrameJacobian(self.model, d, k + 1, pin.SE3(np.eye(3), top), pin.LOCAL_WORLD_ALIGNED)
            p_top = d.oMi[k + 1].act(top)
            if k == 0:
                Jb[0:3] = Jk_full[:3]
                C[0:3] = p_top - np.array([0.0, 0.0, PIVOT_HEIGHT])
                Jb[3] = Jk_full[3]
                Jb[4] = Jk_full[5]
                Rerr = d.oMi[1].rotation
            else:
                bottom_parent = d.oMi[k].act(-top)
                Jp_full = pin.getFrameJacobian(self.model, d, k, pin.SE3(np.eye(3), -top), pin.LOCAL_WORLD_ALIGNED)
                rows = slice(5 * k, 5 * k + 3)
                Jb[rows] = Jk_full[:3] - Jp_full[:3]
                C[rows] = p_top - bottom_parent
                Jb[5 * k + 3] = Jk_full[3] - Jp_full[3]
                Jb[5 * k + 4] = Jk_full[5] - Jp_full[5]
                Rerr = d.oMi[k + 1].rotation @ d.oMi[k].rotation.T
            w = pin.log3(Rerr)
            C[5 * k + 3] = w[0]
            C[5 * k + 4] = w[2]
        return Jb, C

    # ------------------------------------------------------------------ stepping
    def step(self):
        m, d, dt = self.model, self.data, self.dt
        pin.forwardKinematics(m, d, self.q)
        pin.computeJointJacobians(m, d, self.q)
        centres = self._centres()
        J, phi = self.contacts(centres)
        N = phi.shape[0]
        a_free = pin.aba(m, d, self.q, self.v, self.zero_tau)    # O(N) free acceleration (eq. 2)
        v_free = self.v + dt * a_free
        if self.mode == "minimal":
            X = np.empty((self.nv, 3 * N))
            for c in range(3 * N):                                 # M^-1 J^T column by column, O(N) each
                X[:, c] = pin.aba(self.zero_g, self.zero_g_data, self.q, self.zero_v, J[c])
            out = self.stepper.step(dt, self.v, v_free, X, J, np.zeros(3 * N), phi, np.full(N, FRICTION),
                                    np.full(N, RESTITUTION), t=self.t)
        else:
            Jb, C = self.hinge_constraints()
            X = self.inv_mass_diag[:, None] * np.vstack([J, Jb]).T  # block-diagonal constant M
            out = self.stepper.step(dt, self.v, v_free, X, J, np.zeros(3 * N), phi, np.full(N, FRICTION),
                                    np.full(N, RESTITUTION), Jb=Jb, b_bias=self.erp_b * C / dt, t=self.t)
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
