"""The 2-D parallel gripper picking up a cylinder: Pang & Tedrake 2018, section V-A, eqs. 24-30.

A planar Pinocchio model (gravity -y): the cylinder's centre (x_c, y_c) on two prismatic joints (unactuated,
no rotation, as in the paper); the gripper height y_g (prismatic y, actuated) carrying the two fingers x_l, x_r
(prismatic x, actuated). The ContactSet is built by hand each step from the paper's distance functions
(eq. 24) and tangents (eq. 25), so that the engine sees exactly the paper's Jacobians (eqs. 26-27) with
friction_directions = 2 (d = +-t1, E and U of eq. 28).

Used by test/test_engine_quasistatic.py and benchmarks/quasistatic/run.py.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contact_sim_ros.engines.base import Actuation, StepInputs
from contact_sim_ros.geometry.contact_set import ContactSet
from contact_sim_ros.model.multibody_model import MultibodyModel

MASS = 1.0          # kg
RADIUS = 0.05       # m
MU = 0.5
H = 0.01            # s
STEPS = 60
K = 1.0e4           # N/m  (= 10 N / (0.1 m/s x 0.01 s))
GRAVITY = 9.81      # m/s^2

# velocity order of the model built below
V_XC, V_YC, V_YG, V_XL, V_XR = range(5)


def build_model() -> MultibodyModel:
    """Planar gripper + cylinder as ONE Pinocchio model (all joints 1-dof, v = qdot)."""
    m = pin.Model()
    m.gravity.linear = np.array([0.0, -GRAVITY, 0.0])
    tiny = pin.Inertia(1e-6, np.zeros(3), 1e-9 * np.eye(3))
    jx = m.addJoint(0, pin.JointModelPX(), pin.SE3.Identity(), "cylinder_x")
    m.appendBodyToJoint(jx, tiny, pin.SE3.Identity())
    jy = m.addJoint(jx, pin.JointModelPY(), pin.SE3.Identity(), "cylinder_y")
    m.appendBodyToJoint(jy, pin.Inertia(MASS, np.zeros(3), 1e-3 * np.eye(3)), pin.SE3.Identity())
    jg = m.addJoint(0, pin.JointModelPY(), pin.SE3.Identity(), "gripper_y")
    m.appendBodyToJoint(jg, pin.Inertia(0.1, np.zeros(3), 1e-4 * np.eye(3)), pin.SE3.Identity())
    for name in ("finger_left_x", "finger_right_x"):
        j = m.addJoint(jg, pin.JointModelPX(), pin.SE3.Identity(), name)
        m.appendBodyToJoint(j, pin.Inertia(0.05, np.zeros(3), 1e-5 * np.eye(3)), pin.SE3.Identity())
    nv = m.nv
    assert nv == 5
    actuated = np.array([False, False, True, True, True])
    names = ("gripper_y", "finger_left_x", "finger_right_x")
    nj = len(names)

    def ro(a):
        a = np.asarray(a)
        a.setflags(write=False)
        return a

    return MultibodyModel(
        pin_model=m, collision_model=pin.GeometryModel(), source="<planar gripper, Pang & Tedrake 2018 V-A>",
        joint_names=names, joint_q_index=ro(np.array([2, 3, 4])), joint_v_index=ro(np.array([2, 3, 4])),
        position_lower=ro(np.full(nj, -1.0)), position_upper=ro(np.full(nj, 1.0)),
        velocity_limit=ro(np.full(nj, 1.0)), effort_limit=ro(np.full(nj, 100.0)), mimic_joints=(),
        joint_damping=ro(np.zeros(nv)), joint_friction=ro(np.zeros(nv)), actuated=ro(actuated),
        free_bodies=(), tree_velocity_slices=(slice(0, 2), slice(2, 5)),
        geometry_names=("finger_left", "finger_right", "table", "cylinder"),
        geometry_parent_joint=ro(np.array([4, 5, 0, 2])),
        geometry_stiffness=ro(np.full(4, K)), geometry_dissipation=ro(np.zeros(4)),
        geometry_friction=ro(np.full(4, MU)), geometry_restitution=ro(np.zeros(4)),
        collision_pairs=ro(np.zeros((0, 2), dtype=int)), gravity=ro(np.array([0.0, -GRAVITY, 0.0])))


def initial_q() -> np.ndarray:
    """x_c = 0, y_c = r, y_g = 0 (fingertips at the table), x_l = -r - 0.02, x_r = r + 0.02 (section V-A)."""
    q = np.zeros(5)
    q[V_YC] = RADIUS
    q[V_XL] = -RADIUS - 0.02
    q[V_XR] = RADIUS + 0.02
    return q


def contacts(q: np.ndarray, stiffness: float = K) -> ContactSet:
    """Contacts 1 (left finger -> cylinder), 2 (right finger -> cylinder), 3 (table -> cylinder); eq. 24-25.

    The contact frame columns are (t1, t2, n) with t1 the in-plane tangent of eq. 25 and t2 = n x t1 (out of
    plane); the Jacobian rows are R^T (v_B - v_A) of the contact points (B = cylinder)."""
    phi = np.array([q[V_XC] - q[V_XL] - RADIUS, q[V_XR] - q[V_XC] - RADIUS, q[V_YC] - RADIUS])
    ex, ey = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    normals = np.array([ex, -ex, ey])
    t1 = np.array([ey, ey, ex])
    t2 = np.cross(normals, t1)
    R = np.stack([t1, t2, normals], axis=2)          # (3, 3, 3): columns t1, t2, n
    # point velocity Jacobians (3 x nv), world frame
    Jcyl = np.zeros((3, 5))
    Jcyl[0, V_XC] = Jcyl[1, V_YC] = 1.0
    Jl = np.zeros((3, 5))
    Jl[0, V_XL] = Jl[1, V_YG] = 1.0
    Jr = np.zeros((3, 5))
    Jr[0, V_XR] = Jr[1, V_YG] = 1.0
    rel = [Jcyl - Jl, Jcyl - Jr, Jcyl]
    J = np.concatenate([R[i].T @ rel[i] for i in range(3)], axis=0)
    point = np.array([[q[V_XC] - RADIUS, q[V_YC], 0.0], [q[V_XC] + RADIUS, q[V_YC], 0.0],
                      [q[V_XC], 0.0, 0.0]])
    return ContactSet(geometry_a=np.array([0, 1, 2]), geometry_b=np.array([3, 3, 3]),
                      joint_a=np.array([4, 5, 0]), joint_b=np.array([2, 2, 2]), point=point, normal=normals,
                      signed_distance=phi, rotation=R, jacobian=J, velocity_bias=np.zeros(9),
                      stiffness=np.full(3, stiffness), dissipation=np.zeros(3), friction=np.full(3, MU),
                      restitution=np.zeros(3))


def command_eq29(step: int) -> np.ndarray:
    """Velocity command (m/s) of eq. 29 for 1-based step l: (x_l, x_r, y_g) dot."""
    return np.array([0.1, -0.1, 0.1]) if step <= 39 else np.array([-0.1, 0.1, 0.0])


def command_eq30(step: int) -> np.ndarray:
    """Velocity command of eq. 30 (LCP run: stop squeezing after step 20)."""
    return np.array([0.1, -0.1, 0.1]) if step <= 20 else np.zeros(3)


def command_eq30_lifting(step: int) -> np.ndarray:
    """Eq. 30 with the gripper still moving up after step 20, as the paper's text describes Fig. 6
    ("the cylinder stays on the table even though the gripper is constantly moving up")."""
    return np.array([0.1, -0.1, 0.1]) if step <= 20 else np.array([0.0, 0.0, 0.1])


def step_inputs(model: MultibodyModel, data, t: float, q: np.ndarray, command_xl_xr_yg: np.ndarray,
                stiffness: float = K) -> StepInputs:
    """StepInputs at q with a velocity command (kp = 0): velocity_target on (x_l, x_r, y_g)."""
    nv = model.nv
    g = pin.computeGeneralizedGravity(model.pin_model, data, q).copy()
    act = Actuation.zeros(nv)
    act.velocity_target[[V_XL, V_XR, V_YG]] = command_xl_xr_yg
    return StepInputs(t=t, dt=H, q=q.copy(), v=np.zeros(nv), mass_matrix=pin.crba(model.pin_model, data, q).copy(),
                      generalized_force=-g, gravity_force=g, joint_damping=np.zeros(nv), actuation=act,
                      contacts=contacts(q, stiffness))


def simulate(engine, command=command_eq29, steps: int = STEPS, stiffness: float = K):
    """Run the paper's 60 steps. Returns a dict of arrays: q (steps+1, 5), phi (steps+1, 3), normal impulse
    / h (steps, 3) in N, friction (steps, 3) N, status list, solver times (s)."""
    model = engine.model
    data = model.pin_model.createData()
    q = initial_q()
    qs, phis, normal_force, friction_force, statuses, times, messages = [q.copy()], [], [], [], [], [], []
    phis.append(contacts(q).signed_distance.copy())
    for step in range(1, steps + 1):
        inputs = step_inputs(model, data, (step - 1) * H, q, command(step), stiffness)
        result = engine.step(inputs)
        statuses.append(result.stats.status)
        messages.append(result.stats.message)
        times.append(getattr(engine, "last_solve_info", None).solver_time_s
                     if hasattr(engine, "last_solve_info") else result.stats.solve_time_s)
        if result.stats.status.ok:
            q = q + H * result.v_next
        normal_force.append(result.contact_impulse[:, 2] / H)
        friction_force.append(result.contact_impulse[:, 0] / H)
        qs.append(q.copy())
        phis.append(contacts(q).signed_distance.copy())
    return {"q": np.array(qs), "phi": np.array(phis), "normal_force": np.array(normal_force),
            "friction_force": np.array(friction_force), "status": statuses, "solver_time_s": np.array(times),
            "message": messages}
