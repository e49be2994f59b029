"""The whole TAMSI (or Lagged, Similar, SAP) step of a tree (any Pinocchio model: revolute, prismatic, planar,
free-flyer, fixed joints, mimic couplings, robots beside free objects) in ONE compiled call (issue 45 item 2), for
scenes whose contact pairs are compiled analytic kinds (``ContactQuery.all_compiled``: sphere-halfspace,
sphere-sphere, sphere-box, box-halfspace;
the box on planar joints of ``benchmarks/peers``), or coal's (mesh) pairs while the compiled bounding-volume test
(geometry/pair_bounds) keeps every one of them beyond the margin (a robot held clear of everything: the iiwa + WSG
of ``benchmarks/peers``); when one of them may be near, the call does nothing else and says so (``NEAR``), and the
Simulator runs the staged step. With coal's narrow phase compiled (``ContactQuery.compiled_narrow_phase``), coal's
pairs of any kind run inside the call instead (the query's whole update, its bounding-volume decision included:
geometry/contact_pass_kernels.coal_contact_pass, coal through narrow_phase.cpp's C entry point): the UR5, the UR5 +
20 objects, the campaign's bottle, grasps; NEAR then only when coal fails or the rows exceed the query's buffers.

Three parts:

* **The C-ABI bridge** to the Simulator's Pinocchio calls (sim/rigid_body_dynamics.cpp): that module exports plain
  C functions (``c_functions()``: their addresses) taking a ``RigidBodyDynamics``' address (its ``handle()``) and
  raw float64 / int64 buffers. ``rbd_kinematics``, ``rbd_read_kinematics``, ``rbd_dynamics``, ``rbd_integrate``
  and ``rbd_frame_jacobian`` below call them from numba through contact_sim_ros.jit's ``c_call*`` intrinsics
  (``inttoptr`` of the address, then a call): the address is a runtime argument, so the kernels stay in numba's
  on-disk cache (a ctypes function object baked in as a global would not). The same Pinocchio functions on the
  same arguments as the Boost.Python methods and the pin.* calls: bit-identical results (test/test_tree_step.py).
* **The fused step** ``tree_tamsi_step``: the stages of sim/stages.py in the order ``Simulator._advance`` runs them
  for such a scene, calling the same compiled functions: the bounding-volume test of coal's pairs (if any), the
  joint Jacobians and the analytic pairs' joint placements of the current kinematics (Pinocchio's Data, computed
  at the end of the last step), the query's compiled pairs and contacts (``ContactQuery.compiled_pass_arguments``),
  their velocity bias on moving surfaces (``surface_velocity_bias``; the Simulator writes the surfaces' velocities
  and applies the scene's scripted joint commands before the call), the penetration bound's pass, the dynamics
  (crba WORLD, nle, g, difference), the scripted wrenches on links
  (J^T [f; m] with pin.getFrameJacobian's world-aligned J and numba's ``np.dot``: the same BLAS gemv as the
  staged step's numpy matmul; their values are written by the Simulator before the call; a wrench on a free body
  is applied by the Simulator into ``data.external`` instead), ``step_kernels.prepare_step`` and the default
  servo's feed-forward, TAMSI's Newton iteration (``tamsi_kernels.newton_step_packed``), the integration
  (pin.integrate, or q0 + dt v on a vector-space model) and ``step_kernels.finish_step``, then the kinematics of
  the new state. Trajectories are bit-identical to the staged step's (``benchmarks/peers/step_hashes.py``,
  test/test_tree_step.py).
* **The same step with an ICF engine** ``tree_icf_step`` (Lagged, Similar, SAP): the same stages (``_tree_stages``,
  ``_tree_finish``) around ``icf_kernels.icf_step`` called as ``ConvexICFEngine._do_step_into`` calls it (the
  contacts' Jacobian columns, the engine's scratch, stiction tolerances and options in the table: the engine's
  ``kernel_scratch``). Bit-identical to the staged step too.
* **Free bodies only** (a model whose every joint is a free flyer on the world: ``StepParts.free_bodies``, when
  the fused free-body TAMSI step of sim/free_body_step.py does not take the scene: an ICF engine, or pairs other
  than sphere-halfspace): the same call with the staged step's FreeBodies kernels in place of the Pinocchio calls
  (``I_FREE_BODIES``): ``free_body_kinematics`` for the analytic pairs' joint placements and the joint Jacobians
  (equal to computeJointJacobians' bit for bit when the joint placements are the identity, as the scenes' free
  objects'), ``free_body_bias_force`` for nle (and g), the constant M, ``integrate_rotations`` before the
  frozen-frame ``finish_step``. Pinocchio's Data is then neither read nor written, except with coal's pairs in the
  call (the clutter's box-box pairs: coal's narrow phase reads its joint placements) or a joint placement that is
  not the identity: the call then reads the Data's J and computes the new state's kinematics as a tree's
  (``I_PIN_KINEMATICS``). The scene's scripted wrenches are written into data.external by the Simulator
  (stages.external_forces).

Every array the call reads or writes besides the state and the result slot is fixed while the table lives (the
query's, the engine's, the Simulator's data and this module's scratch) and is passed by address: one (K, 4)
int64 ``table`` of (address, dims) rows (the T_* constants), viewed inside with ``numba.carray`` (no per-array
unboxing, ~0.05 us each, in the call: ~90 arrays). ``TreeStep`` holds a reference to every one of them, so
the addresses stay valid while it lives; a staged step that grows the query's buffers or the engine's scratch
makes the Simulator build the table again (``TreeStep.current``).

The on-disk cache stamps this module's kernels with its own source and every kernel module it imports
(contact_sim_ros.jit.source_stamp): an edit of a callee (engines/tamsi_kernels.py, geometry/contact_kernels.py,
sim/step_kernels.py, ...) compiles ``tree_tamsi_step`` again.
"""

from __future__ import annotations

import numpy as np

from ..jit import c_call3, c_call5, c_call6, c_call9, carray, int_pointer, njit
from ..address_table import float_view1 as _f1, float_view2 as _f2, float_view3 as _f3, int_view1 as _i1
from ..address_table import int_view2 as _i2, table_row
from ..engines import icf_kernels, tamsi_kernels
from ..geometry import contact_kernels, contact_pass_kernels, pair_bound_kernels
from . import step_kernels
from .free_body_step import free_body_bias_force, free_body_kinematics, integrate_rotations
from .penetration_kernels import deepest_excess

# the ICF engines (engines/lagged.py's ConvexICFEngine: tree_icf_step) by their registry names, as TAMSI by its (a
# kernel module imports no engine)
ICF_ENGINES = frozenset(("lagged", "similar", "sap"))
# the order of rigid_body_dynamics.cpp's c_functions()
FN_KINEMATICS, FN_READ_KINEMATICS, FN_DYNAMICS, FN_INTEGRATE, FN_FRAME_JACOBIAN = range(5)
N_FUNCTIONS = 5


# ------------------------------------------------------------------------------------------ the C-ABI bridge
# ``functions``: int64 (N_FUNCTIONS,) the addresses of c_functions(); ``handle``: a RigidBodyDynamics' handle().
# Every array C-contiguous float64 (int64 where said) of the sizes named (not checked: a wrong size reads or writes
# past it).

@njit(cache=True)
def rbd_kinematics(functions, handle, q, v):
    """pin.forwardKinematics(q, v) + pin.computeJointJacobians into the handle's Pinocchio Data; q (nq,), v (nv,)."""
    return c_call3(functions[FN_KINEMATICS], handle, q.ctypes.data, v.ctypes.data)


@njit(cache=True)
def rbd_read_kinematics(functions, handle, jacobian, placement, joints, slots):
    """The Data's joint Jacobians J (6, nvExtended) into ``jacobian`` and the joint placements oMi[joints[k]] as
    4 x 4 homogeneous matrices into placement[slots[k]] (joints, slots int64)."""
    return c_call6(functions[FN_READ_KINEMATICS], handle, jacobian.ctypes.data, placement.ctypes.data,
                    joints.ctypes.data, slots.ctypes.data, joints.shape[0])


@njit(cache=True)
def rbd_dynamics(functions, handle, q, v, q_target, mass_matrix, nle, gravity, position_error, with_gravity):
    """M = crba(q) WORLD (symmetric), nle(q, v), g(q) when ``with_gravity``, difference(q, q_target) into the
    (nv, nv) and (nv,) buffers."""
    return c_call9(functions[FN_DYNAMICS], handle, q.ctypes.data, v.ctypes.data, q_target.ctypes.data,
                    mass_matrix.ctypes.data, nle.ctypes.data, gravity.ctypes.data, position_error.ctypes.data,
                    1 if with_gravity else 0)


@njit(cache=True)
def rbd_frame_jacobian(functions, handle, frame, jacobian_t):
    """pin.getFrameJacobian(frame, LOCAL_WORLD_ALIGNED) (6, nv) at the Data's current kinematics, transposed into
    ``jacobian_t`` (nv, 6) (the memory of the binding's column-major result)."""
    return c_call3(functions[FN_FRAME_JACOBIAN], handle, frame, jacobian_t.ctypes.data)


@njit(cache=True)
def rbd_integrate(functions, handle, q, v, dt, q_next):
    """q_next = pin.integrate(q, dt * v) (nq,)."""
    return c_call5(functions[FN_INTEGRATE], handle, q.ctypes.data, v.ctypes.data, dt, q_next.ctypes.data)


# --------------------------------------------------------------------------------------- the address table
# rows of ``table`` (K, 4): (address, dim 0, dim 1, dim 2) of one C-contiguous array
(T_INTS, T_SCALARS, T_J, T_PLACEMENT, T_SLOT_JOINTS, T_SLOT_INDEX, T_M, T_NLE, T_GRAVITY, T_ERROR, T_Q_TARGET,
 T_ROWS, T_FREE_V, T_TREE_PTR, T_FINISH_INDEX, T_FINISH_VALUES, T_FF_FRICTION, T_FF_DAMPING, T_FF, T_FF_SCRATCH,
 T_ACT_EFFORT, T_AN_INT, T_AN_FLOAT, T_SP_INT, T_SP_FLOAT, T_BH_INT, T_BH_FLOAT, T_PAIR_OUT, T_RAW, T_B_PAIR,
 T_B_START, T_B_MID, T_B_NORMAL, T_B_DEPTH, T_B_WA, T_B_WB, T_B_GEOMETRY, T_B_PLACEMENT, T_BH_SLOTS, T_BH_WORK,
 T_BH_IWORK, T_BH_MIN_GAP, T_C_TYPE, T_C_HALF, T_C_RADIUS, T_C_HALF_LENGTH, T_C_PLANE_NORMAL, T_C_PLANE_OFFSET,
 T_C_FACE_START, T_C_FACE_NORMAL, T_C_FACE_OFFSET, T_PAIR_IDS, T_PAIR_MATERIAL, T_JOINT_COLUMNS, T_COLUMN_DOF,
 T_IDS, T_POINT, T_NORMAL, T_PHI, T_ROTATION, T_JACOBIAN, T_MATERIAL, T_REL, T_COLUMNS, T_BIAS, T_PR_PAIR, T_PR_A,
 T_PR_B, T_PR_N, T_MR_PAIR, T_MR_A, T_MR_B, T_MR_N, T_THICKNESS, T_FIXED, T_IFIXED, T_CONTACT,
 T_ICONTACT, T_BOUND_JOINT_INT, T_BOUND_JOINT_FLOAT, T_BOUND_GEOMETRY_INT, T_BOUND_GEOMETRY_FLOAT, T_BOUND_PAIRS,
 T_BOUND_PLACEMENT, T_BOUND_WORLD, T_BOUND_LOCAL, T_WRENCH_FRAME, T_WRENCH, T_FRAME_JT, T_WRENCH_FORCE,
 T_ENGINE_OPTIONS, T_BODY_INT, T_BODY_FLOAT, T_BODY_GRAVITY, T_ZERO_V, T_SURFACE_VELOCITY) = range(96)
N_TABLE = 96
# T_SURFACE_VELOCITY: data.surface_velocity (G, 3) m/s world, the moving surfaces' velocities at the step's start
# (written by the Simulator before the call, stages.surface_velocities); read when I_SURFACE_VELOCITY
# T_BODY_*: a model of free bodies only (I_FREE_BODIES; sim/free_body_step.FreeBodies): its body_int, body_float,
# gravity (3,) m/s^2, and (nv,) zeros (the velocity of g(q) = nle(q, 0)); one-entry dummies otherwise
# the engine's scratch rows: TAMSI's four buffers (``TamsiEngine.kernel_scratch``; T_ENGINE_OPTIONS unused), or an
# ICF engine's (``ConvexICFEngine.kernel_scratch``: icf_step's fwork, iwork, stiction, structure and options)
T_ICF_FWORK, T_ICF_IWORK, T_ICF_STICTION, T_ICF_STRUCTURE = T_FIXED, T_IFIXED, T_CONTACT, T_ICONTACT
# entries of the T_INTS array: the C functions' addresses, the RigidBodyDynamics handle, then flags: ... whether
# coal's pairs are first tested with bounding volumes (T_BOUND_*; any within the margin: the call returns NEAR
# and does nothing else), how many scripted wrenches on links the call applies (T_WRENCH_*), whether the engine is
# Lagged (tree_icf_step writes the lagged normal impulses)
I_FUNCTIONS = 0
I_HANDLE = N_FUNCTIONS
I_VECTOR_SPACE, I_WITH_GRAVITY, I_FEED_FORWARD, I_PENETRATION, I_BOUNDS, I_WRENCHES, I_LAGGED = range(
    I_HANDLE + 1, I_HANDLE + 8)
# the address and row count of the query's CoalPass table when its coal pairs run in the call (0: none)
I_COAL_PASS, I_COAL_ROWS = I_HANDLE + 8, I_HANDLE + 9
# a model of free bodies only: the staged step's FreeBodies kernels instead of Pinocchio's calls (the joint
# placements, nle and g(q), the constant M, the quaternions' integration; the joint Jacobians too unless
# I_PIN_KINEMATICS); and whether the call reads the Data's kinematics at q0 and computes the new state's (a tree:
# always; free bodies: for coal's narrow phase, which reads the Data's joint placements, or when a joint placement
# is not the identity: FreeBodies' J then differs from computeJointJacobians' in round-off)
I_FREE_BODIES, I_PIN_KINEMATICS = I_HANDLE + 10, I_HANDLE + 11
# whether the scene has moving surfaces: the contacts' velocity bias from T_SURFACE_VELOCITY (else zero)
I_SURFACE_VELOCITY = I_HANDLE + 12
N_INTS = I_HANDLE + 13
# tree_tamsi_step's finish code when a coal pair may be within the margin (nothing computed: the staged step runs)
NEAR = -2
# entries of T_SCALARS: contact margin (m), patch tolerance (m), the deepest-point tolerance (m), prepare_step's
# stiction tolerance (0: no joint friction), the feed-forward's joint stiction tolerance (m/s or rad/s), the
# penetration bound's fraction
S_MARGIN, S_PATCH_TOLERANCE, S_DEEPEST, S_STICTION, S_JOINT_STICTION, S_FRACTION, S_CASTER_TOLERANCE, S_BOUND_LIMIT = \
    range(8)
N_SCALARS = 8


@njit(cache=True)
def compiled_contacts(t, J, placement, margin):
    """The contact query's ``update`` for an all-compiled query (``ContactQuery.compiled_pass_arguments``) with the
    joint placements in ``placement`` and the joint Jacobians ``J``: the analytic pairs' raw rows, the one-point
    rows in pair order, the box patches' rows after them, then ``finish_contacts`` into the query's buffers and
    a zero velocity bias. Returns (n contacts, colliding pairs)."""
    scalars = _f1(t, T_SCALARS)
    pair_out, raw = _i1(t, T_PAIR_OUT), _f3(t, T_RAW)
    an_int = _i2(t, T_AN_INT)
    r = 0
    if an_int.shape[0] > 0:
        r = contact_kernels.sphere_halfspace_raw(placement, an_int, _f2(t, T_AN_FLOAT), margin, pair_out, raw)
    sp_int = _i2(t, T_SP_INT)
    if sp_int.shape[0] > 0:
        r = contact_kernels.sphere_primitive_raw(placement, sp_int, _f2(t, T_SP_FLOAT), margin, pair_out, raw, r)
    bh_int = _i2(t, T_BH_INT)
    n_patches = 0
    b_pair, b_start, b_mid, b_normal = _i1(t, T_B_PAIR), _i1(t, T_B_START), _f2(t, T_B_MID), _f2(t, T_B_NORMAL)
    b_depth, b_wa, b_wb, b_geometry = _f1(t, T_B_DEPTH), _f2(t, T_B_WA), _f2(t, T_B_WB), _i2(t, T_B_GEOMETRY)
    b_placement = _f3(t, T_B_PLACEMENT)
    if bh_int.shape[0] > 0:
        r, n_patches = contact_kernels.box_halfspace_contacts(
            placement, bh_int, _f2(t, T_BH_FLOAT), margin, scalars[S_PATCH_TOLERANCE], pair_out, raw, r, b_pair,
            b_start, b_mid, b_normal, b_depth, b_wa, b_wb, b_geometry, b_placement, _f2(t, T_BH_WORK),
            _i2(t, T_BH_IWORK))
    m_pair, m_a, m_b, m_n = _i1(t, T_MR_PAIR), _f2(t, T_MR_A), _f2(t, T_MR_B), _f2(t, T_MR_N)
    # the one-point rows in pair order (a pair gives at most one: no ties), as update's stable argsort
    for i in range(r):
        m_pair[i] = pair_out[i]
    for i in range(1, r):
        key = m_pair[i]
        j = i - 1
        while j >= 0 and m_pair[j] > key:
            m_pair[j + 1] = m_pair[j]
            j -= 1
        m_pair[j + 1] = key
    for i in range(r):
        row = 0
        while pair_out[row] != m_pair[i]:
            row += 1
        for k in range(3):
            m_a[i, k] = raw[0, row, k]
            m_b[i, k] = raw[1, row, k]
            m_n[i, k] = raw[2, row, k]
    rows = r
    if n_patches > 0:
        p_pair, p_a, p_b, p_n = _i1(t, T_PR_PAIR), _f2(t, T_PR_A), _f2(t, T_PR_B), _f2(t, T_PR_N)
        slots = _i2(t, T_BH_SLOTS)
        rp = contact_kernels.patch_contacts(
            b_pair[:n_patches], b_start, b_mid, b_normal, b_depth, b_wa, b_wb, b_geometry[0], b_geometry[1],
            slots[0], slots[1], b_placement, _i1(t, T_C_TYPE), _f2(t, T_C_HALF), _f1(t, T_C_RADIUS),
            _f1(t, T_C_HALF_LENGTH), _f2(t, T_C_PLANE_NORMAL), _f1(t, T_C_PLANE_OFFSET), _i1(t, T_C_FACE_START),
            _f2(t, T_C_FACE_NORMAL), _f1(t, T_C_FACE_OFFSET), scalars[S_CASTER_TOLERANCE], scalars[S_DEEPEST],
            _f1(t, T_BH_MIN_GAP), p_pair, p_a, p_b, p_n)
        contact_kernels.append_raw_rows(m_pair, m_a, m_b, m_n, rows, p_pair, p_a, p_b, p_n, rp)
        rows += rp
    n = 0
    if rows > 0:
        n = contact_kernels.finish_contacts(
            m_pair[:rows], m_a[:rows], m_b[:rows], m_n[:rows], margin, _i2(t, T_PAIR_IDS), _f2(t, T_PAIR_MATERIAL),
            J, _i1(t, T_JOINT_COLUMNS), _i1(t, T_COLUMN_DOF), _i2(t, T_IDS), _f2(t, T_POINT), _f2(t, T_NORMAL),
            _f1(t, T_PHI), _f3(t, T_ROTATION), _f2(t, T_JACOBIAN), _f2(t, T_MATERIAL), _f2(t, T_REL),
            _i2(t, T_COLUMNS))
        bias = _f1(t, T_BIAS)
        for i in range(3 * n):
            bias[i] = 0.0
    return n, r + n_patches


@njit(cache=True)
def surface_velocity_bias(ids, rotation, surface_velocity, n, bias):
    """ContactQuery.update's velocity bias of the n contacts with moving surfaces: per contact the relative
    velocity of B w.r.t. A from the (G, 3) m/s world surface velocities of its static geometries (parent joint 0;
    a moving geometry's row is ignored), v = v_surf[B] - v_surf[A], in its frame: bias[3 i + k] = (R^T v)_k, summed
    in the order of the query's per-contact matmul ((v_0 R_0k + v_1 R_1k) + v_2 R_2k: the same bits,
    test/test_tree_step.py). ``ids`` (4, >= n) int64 (geometry a, b, joint a, b), ``rotation`` (>= n, 3, 3)."""
    for i in range(n):
        ga, gb = ids[0, i], ids[1, i]
        a_static, b_static = ids[2, i] == 0, ids[3, i] == 0
        v0 = (surface_velocity[gb, 0] if b_static else 0.0) - (surface_velocity[ga, 0] if a_static else 0.0)
        v1 = (surface_velocity[gb, 1] if b_static else 0.0) - (surface_velocity[ga, 1] if a_static else 0.0)
        v2 = (surface_velocity[gb, 2] if b_static else 0.0) - (surface_velocity[ga, 2] if a_static else 0.0)
        for k in range(3):
            bias[3 * i + k] = (v0 * rotation[i, 0, k] + v1 * rotation[i, 1, k]) + v2 * rotation[i, 2, k]


@njit(cache=True)
def _tree_stages(q0, v0, table, modes):
    """The stages of the step before the engine's (``tree_tamsi_step``'s docstring): the bounding-volume test, the
    contacts, the penetration pass, the dynamics, the wrenches on links, prepare_step and the feed-forward.
    Returns (near, n contacts, colliding pairs, candidate pairs, deep, the actuation's effort row): ``near`` True
    when a coal pair may be within the margin (nothing else computed); the candidate pairs as update's stats when
    coal's pairs run in the call (the compiled pass's count), else -1 (the caller's count: the compiled pairs)."""
    ints, scalars = _i1(table, T_INTS), _f1(table, T_SCALARS)
    functions, handle = ints[I_FUNCTIONS:I_FUNCTIONS + N_FUNCTIONS], ints[I_HANDLE]
    rows = _f2(table, T_ROWS)
    effort = rows[step_kernels.EFFORT]
    if ints[I_BOUNDS] != 0 and pair_bound_kernels.pairs_within(
            q0, _i2(table, T_BOUND_JOINT_INT), _f2(table, T_BOUND_JOINT_FLOAT), _i2(table, T_BOUND_GEOMETRY_INT),
            _f2(table, T_BOUND_GEOMETRY_FLOAT), _i2(table, T_BOUND_PAIRS), scalars[S_BOUND_LIMIT],
            _f2(table, T_BOUND_PLACEMENT), _f2(table, T_BOUND_WORLD), _f2(table, T_BOUND_LOCAL)):
        return True, 0, 0, 0, False, effort
    J, placement = _f2(table, T_J), _f3(table, T_PLACEMENT)
    free_bodies = ints[I_FREE_BODIES] != 0
    if free_bodies:     # the staged step's placement source (FreeBodies) and J (computeJointJacobians)
        if ints[I_PIN_KINEMATICS] != 0:         # the Data's J at q0 (the call or the Simulator computed it)
            rbd_read_kinematics(functions, handle, J, placement, _i1(table, T_SLOT_JOINTS)[:0],
                                _i1(table, T_SLOT_INDEX)[:0])
            free_body_kinematics(q0, _i2(table, T_BODY_INT), _f2(table, T_BODY_FLOAT), placement, J[:, :0])
        else:           # J from q too: equal to computeJointJacobians' bit for bit (identity joint placements)
            free_body_kinematics(q0, _i2(table, T_BODY_INT), _f2(table, T_BODY_FLOAT), placement, J)
    else:
        rbd_read_kinematics(functions, handle, J, placement, _i1(table, T_SLOT_JOINTS), _i1(table, T_SLOT_INDEX))
    if ints[I_COAL_PASS] != 0:     # coal's pairs too: the query's whole update (geometry/contact_pass_kernels)
        coal = carray(int_pointer(ints[I_COAL_PASS]), (ints[I_COAL_ROWS], 4))
        n, colliding, candidates = contact_pass_kernels.coal_contact_pass(coal, J, q0, True)
        if n < 0:                  # coal failed, or more rows than the buffers: the staged step runs
            return True, 0, 0, 0, False, effort
    else:
        n, colliding = compiled_contacts(table, J, placement, scalars[S_MARGIN])
        candidates = -1
    if ints[I_SURFACE_VELOCITY] != 0 and n > 0:      # moving surfaces: the bias the passes left zero
        surface_velocity_bias(_i2(table, T_IDS), _f3(table, T_ROTATION), _f2(table, T_SURFACE_VELOCITY), n,
                              _f1(table, T_BIAS))
    phi = _f1(table, T_PHI)
    deep = False
    if ints[I_PENETRATION] != 0 and n > 0:
        ids = _i2(table, T_IDS)
        thickness = _f1(table, T_THICKNESS)
        deep = deepest_excess(phi[:n], ids[0, :n], ids[1, :n], thickness, scalars[S_FRACTION], thickness[:0]) >= 0
    M, nle, gravity, error = _f2(table, T_M), _f1(table, T_NLE), _f1(table, T_GRAVITY), _f1(table, T_ERROR)
    if free_bodies:     # stages.dynamics' FreeBodies.bias_forces (M constant, the position error zero)
        body_int, body_float = _i2(table, T_BODY_INT), _f2(table, T_BODY_FLOAT)
        body_gravity = _f1(table, T_BODY_GRAVITY)
        free_body_bias_force(q0, v0, body_int, body_float, body_gravity, nle)
        if ints[I_WITH_GRAVITY] != 0:
            free_body_bias_force(q0, _f1(table, T_ZERO_V), body_int, body_float, body_gravity, gravity)
    else:
        rbd_dynamics(functions, handle, q0, v0, _f1(table, T_Q_TARGET), M, nle, gravity, error,
                     ints[I_WITH_GRAVITY] != 0)
    n_wrenches = ints[I_WRENCHES]
    if n_wrenches > 0:      # stages.external_forces' J^T [f; m] of each wrench on a link (the same BLAS gemv)
        external, frames, wrench = rows[step_kernels.EXTERNAL], _i1(table, T_WRENCH_FRAME), _f2(table, T_WRENCH)
        jt, force = _f2(table, T_FRAME_JT), _f1(table, T_WRENCH_FORCE)
        for a in range(external.shape[0]):
            external[a] = 0.0
        for i in range(n_wrenches):
            rbd_frame_jacobian(functions, handle, frames[i], jt)
            np.dot(jt, wrench[i], force)
            for a in range(external.shape[0]):
                external[a] += force[a]
    step_kernels.prepare_step(M, v0, nle, error, rows, modes, _i1(table, T_FREE_V), scalars[S_STICTION],
                              _i1(table, T_TREE_PTR))
    if ints[I_FEED_FORWARD] != 0:     # stages.actuation's feed-forward, the same operations element by element
        ff, fc, act = _f1(table, T_FF), _f1(table, T_FF_SCRATCH), _f1(table, T_ACT_EFFORT)
        ff_friction, ff_damping = _f1(table, T_FF_FRICTION), _f1(table, T_FF_DAMPING)
        v_target, position_mode = rows[step_kernels.V_TARGET], modes[step_kernels.POSITION_MODE]
        tolerance = scalars[S_JOINT_STICTION]
        for a in range(ff.shape[0]):
            f = v_target[a] * (1.0 if position_mode[a] else 0.0)
            c = max(abs(f), tolerance)
            c = f / c
            c = ff_friction[a] * c
            f = ff_damping[a] * f
            ff[a], fc[a] = c + f, c
            act[a] = effort[a] + ff[a]
        effort = act
    return False, n, colliding, candidates, deep, effort


@njit(cache=True)
def _tree_finish(q0, v_engine, dt, table, q_next, v_out, deep):
    """The integration of the engine's converged velocity (pin.integrate, or q0 + dt v on a vector-space model),
    ``finish_step``, and the new state's kinematics when it is OK and not ``deep``. Returns the finish code."""
    ints = _i1(table, T_INTS)
    functions, handle = ints[I_FUNCTIONS:I_FUNCTIONS + N_FUNCTIONS], ints[I_HANDLE]
    M = _f2(table, T_M)
    if ints[I_VECTOR_SPACE] != 0:
        code = step_kernels.finish_step(q0, q_next, v_engine, v_out, dt, step_kernels.VECTOR_SPACE, M,
                                        _i1(table, T_FINISH_INDEX), _f1(table, T_FINISH_VALUES))
    else:
        if ints[I_FREE_BODIES] != 0:      # the quaternions here, the translations in finish_step (stages.integrate)
            integrate_rotations(q0, v_engine, dt, _i2(table, T_BODY_INT), q_next)
        else:
            rbd_integrate(functions, handle, q0, v_engine, dt, q_next)
        code = step_kernels.finish_step(q0, q_next, v_engine, v_out, dt, step_kernels.FROZEN_FRAME, M,
                                        _i1(table, T_FINISH_INDEX), _f1(table, T_FINISH_VALUES))
    if code == step_kernels.OK and not deep and ints[I_PIN_KINEMATICS] != 0:
        rbd_kinematics(functions, handle, q_next, v_out)
    return code


@njit(cache=True)
def tree_tamsi_step(q0, v0, dt, table, modes, outputs, impulse, q_next, v_out):
    """The step of the module docstring from (q0, v0) over dt (s), with Pinocchio's Data at the kinematics of q0
    (the Simulator guarantees it). ``table``: the address table (T_* rows); ``modes`` (2, nv) bool, the data's;
    ``outputs`` (3, nv) a ResultSlot's rows (v_next of the engine, the generalized contact force, the actuation:
    N or N m) and ``impulse`` (max rows, 3) its impulse buffer (first n rows, N s); q_next (nq,), v_out (nv,): the
    new state, written when the finish code is OK, and then Pinocchio's Data holds its kinematics.

    Returns (status, iterations, err, history count, info, n contacts, colliding pairs, candidate pairs, finish
    code, deep): status as ``tamsi_kernels.newton_step_packed``; the candidate pairs as ``_tree_stages``'; the
    finish code (``step_kernels``) only when it CONVERGED, else -1; ``deep`` True when a contact is deeper than
    the penetration bound alone (``PenetrationCheck.check`` then decides; the new state's kinematics is then not
    computed)."""
    near, n, colliding, candidates, deep, effort = _tree_stages(q0, v0, table, modes)
    if near:
        return 0, 0, 0.0, 0, 0, 0, 0, 0, NEAR, False
    M, rows, material, phi = _f2(table, T_M), _f2(table, T_ROWS), _f2(table, T_MATERIAL), _f1(table, T_PHI)
    v_engine = outputs[0]
    status, iterations, err, count, info = tamsi_kernels.newton_step_packed(
        M, v0, rows[step_kernels.TAU], rows[step_kernels.DAMPING_OUT], dt, effort, rows[step_kernels.KP_OUT],
        rows[step_kernels.KD_OUT], rows[step_kernels.ERROR_OUT], rows[step_kernels.V_TARGET],
        rows[step_kernels.EFFORT_LIMIT], _f2(table, T_JACOBIAN)[:3 * n], _f1(table, T_BIAS)[:3 * n], phi[:n],
        material[0, :n], material[1, :n], material[2, :n], _f1(table, T_FIXED), _i1(table, T_IFIXED),
        _f1(table, T_CONTACT), _i1(table, T_ICONTACT), v_engine, impulse[:n], outputs[1], outputs[2])
    code = -1
    if status == tamsi_kernels.CONVERGED:
        code = _tree_finish(q0, v_engine, dt, table, q_next, v_out, deep)
    return status, iterations, err, count, info, n, colliding, candidates, code, deep


@njit(cache=True)
def tree_icf_step(q0, v0, dt, table, modes, outputs, impulse, friction_normal, q_next, v_out):
    """``tree_tamsi_step`` with an ICF engine's step (Lagged, Similar, SAP: ``icf_kernels.icf_step``, called as
    ``ConvexICFEngine._do_step_into`` calls it: the staged step's StepInputs are the data's rows, the contacts the
    query's first n rows with their Jacobian columns, the engine's scratch, stiction and options from the table's
    T_ICF_* / T_ENGINE_OPTIONS rows). ``friction_normal`` (max rows,): the slot's friction-normal-impulse buffer
    (the lagged gamma_n0 of the first n contacts, N s, written when the engine is Lagged).

    Returns (status, iterations, residual ratio, failed at, line-search evaluations, deferred contacts, n contacts,
    colliding pairs, candidate pairs, finish code, deep): the first six as ``icf_step``, the candidate pairs as
    ``_tree_stages``'; the finish code only when it CONVERGED, else -1 (NEAR when a coal pair may be within the
    margin: nothing computed)."""
    near, n, colliding, candidates, deep, effort = _tree_stages(q0, v0, table, modes)
    if near:
        return 0, 0, 0.0, -1, 0, 0, 0, 0, 0, NEAR, False
    M, rows, material, phi = _f2(table, T_M), _f2(table, T_ROWS), _f2(table, T_MATERIAL), _f1(table, T_PHI)
    lagged = _i1(table, T_INTS)[I_LAGGED] != 0
    v_engine = outputs[0]
    status, iterations, residual, failed_at, n_eval, deferred = icf_kernels.icf_step(
        dt, M, v0, rows[step_kernels.TAU], rows[step_kernels.DAMPING_OUT], effort, rows[step_kernels.KP_OUT],
        rows[step_kernels.KD_OUT], rows[step_kernels.ERROR_OUT], rows[step_kernels.V_TARGET],
        rows[step_kernels.EFFORT_LIMIT], _f2(table, T_JACOBIAN)[:3 * n], _f1(table, T_BIAS)[:3 * n], phi[:n],
        material[0, :n], material[1, :n], material[2, :n], _i2(table, T_COLUMNS)[:n],
        _f1(table, T_ENGINE_OPTIONS), _i1(table, T_ICF_STRUCTURE), _f1(table, T_ICF_FWORK),
        _i1(table, T_ICF_IWORK), _f1(table, T_ICF_STICTION), v_engine, impulse[:n], outputs[1], outputs[2],
        friction_normal[:n] if lagged else friction_normal[:0])
    code = -1
    if status == icf_kernels.CONVERGED:
        code = _tree_finish(q0, v_engine, dt, table, q_next, v_out, deep)
    return status, iterations, residual, failed_at, n_eval, deferred, n, colliding, candidates, code, deep



@njit(cache=True)
def tree_advance(q0, v0, dt, n_steps, table, modes, icf, outputs_a, impulse_a, normal_a, outputs_b, impulse_b,
                 normal_b, wrenches, q_state, v_state, q_out, v_out):
    """Up to ``n_steps`` steps of ``tree_tamsi_step`` (``icf`` False) or ``tree_icf_step`` (True) from (q0, v0) in
    one call (``Simulator.advance``: a control period), each from the state the previous one made, with Pinocchio's
    Data at the kinematics of q0 (the Simulator guarantees it; each committed step leaves its new state's). It
    stops BEFORE a step that is not a clean success (a coal pair near, NEAR; not converged; a non-OK finish code; a
    contact beyond the penetration bound alone): that step is left to ``Simulator.step``, which runs it again from
    the same state (the same numbers) and handles it. Step j writes into the result slot (outputs_a, impulse_a,
    normal_a) when j is even, else into (outputs_b, impulse_b, normal_b) (the Simulator alternates its two
    ResultSlots: ``tree_tamsi_step``'s outputs and impulse, ``tree_icf_step``'s friction_normal too); the states
    between steps go to q_state (2, nq), v_state (2, nv) in turn; the last committed state is copied into q_out
    (nq,), v_out (nv,) (untouched when none is). ``wrenches`` (n_steps, k, 6): the scripted wrenches on links at
    each step's start ([force N; torque N m], written into the table's T_WRENCH before the step; k = 0: none).
    Commands (the data's rows and modes) are the same for every step.

    Returns (m, iterations, err, count, evaluations, deferred, n, colliding, candidates): m the committed steps
    (m < n_steps: step m was not clean), and the last committed step's iterations, err (TAMSI's err or the ICF
    residual ratio), TAMSI's history count, the ICF line search's evaluations and deferred contacts, contacts,
    colliding pairs and candidate pairs (``_tree_stages``'; m = 0: those of the attempted step, not to be
    used)."""
    wrench = _f2(table, T_WRENCH)
    q, v = q0, v0
    m = 0
    iterations, err, count, evaluations, deferred, n, colliding, candidates = 0, 0.0, 0, 0, 0, 0, 0, 0
    for j in range(n_steps):
        for i in range(wrenches.shape[1]):
            for k in range(6):
                wrench[i, k] = wrenches[j, i, k]
        q_next, v_next = q_state[j % 2], v_state[j % 2]
        outputs, impulse, normal = (outputs_a, impulse_a, normal_a) if j % 2 == 0 else (outputs_b, impulse_b,
                                                                                         normal_b)
        if icf:
            status, it, e, failed_at, ev, dfr, nj, cj, kj, code, deep = tree_icf_step(
                q, v, dt, table, modes, outputs, impulse, normal, q_next, v_next)
            c = 0
        else:
            status, it, e, c, info, nj, cj, kj, code, deep = tree_tamsi_step(
                q, v, dt, table, modes, outputs, impulse, q_next, v_next)
            ev, dfr = 0, 0
        if code != step_kernels.OK or deep:        # NEAR, -1 (not converged), non-finite, diverged, too deep
            break
        q, v = q_next, v_next
        m += 1
        iterations, err, count, evaluations, deferred, n, colliding, candidates = it, e, c, ev, dfr, nj, cj, kj
    if m > 0:
        for a in range(q.shape[0]):
            q_out[a] = q[a]
        for a in range(v.shape[0]):
            v_out[a] = v[a]
    return m, iterations, err, count, evaluations, deferred, n, colliding, candidates


class TreeStep:
    """The Simulator's fused tree step for a qualifying scene (``qualifies``): plain data, the address table of
    ``tree_tamsi_step``, or of ``tree_icf_step`` when the engine is an ICF engine (``icf``; ``lagged``: Lagged),
    (module docstring) built ONCE from the Simulator's model, data and parts (as the stages of
    sim/stages.py take them), and the arrays it points into (held here: their memory lives as long as this
    object). ``max_rows``: the most contacts a step can find (the result slots' impulse rows are grown to it);
    ``pairs``: the query's pairs the call tests (its compiled pairs), the ``candidate_pairs`` of the query's stats
    after a call without coal's pairs in it. With coal's pairs in the call (``coal_pass``) the call returns
    update's count instead (its bounding-volume decision included). Where they differ without: every pair
    compiled, update counts every pair too while its bounding-volume test (the Simulator passes q) finds one
    within the margin, but 0 when it finds none (a falling object), where the call tests every pair anyway; with
    coal's pairs held beyond the margin by the call's bounding-volume test (no compiled narrow phase), update
    counts 0 or the broad phase's candidates besides, which the call does not run. Not part of the step's
    arithmetic (the colliding pairs and contacts are update's)."""

    @staticmethod
    def qualifies(model, parts, coal_bounds=None) -> bool:
        """True for a Simulator whose model (sim_model.SimModel) and parts (stages.StepParts) this path covers
        exactly: TAMSI (by its registry name) or an ICF engine (Lagged, Similar, SAP: ``tree_icf_step``) with its
        compiled kernel, the compiled Pinocchio calls (rigid_body_dynamics.cpp built: the Simulator checks it
        for a model of free bodies only, whose step takes FreeBodies' kernels instead, ``parts.free_bodies``),
        every contact pair a compiled analytic kind (``ContactQuery.all_compiled``) or coal's pairs tested by
        ``coal_bounds`` (a geometry/pair_bounds.PairBounds of them: when one may be within the margin, the staged
        step runs). Scripted joint commands (``model.has_joint_scripts``) and moving surfaces
        (``model.has_surface_velocities``: conveyor belts) qualify: the Simulator applies the scripts
        (stages.joint_scripts at t + dt, into the data's targets and modes the call's prepare_step reads) and writes
        the surfaces' velocities at t (stages.surface_velocities, data.surface_velocity) before each call, as the
        staged step does before its kinematics; the call turns them into the contacts' velocity bias
        (``surface_velocity_bias``)."""
        cq = parts.contact_query
        return (TreeStep._engine_qualifies(parts.engine)
                and (parts.rigid is not None or parts.free_bodies is not None)
                and (cq.all_compiled
                     or (cq.kernel == "numba" and (coal_bounds is not None or cq.compiled_narrow_phase))))

    @staticmethod
    def _engine_qualifies(engine) -> bool:
        """TAMSI or an ICF engine (Lagged, Similar, SAP; by their registry names) with its compiled kernel."""
        return (engine.name == "tamsi" or engine.name in ICF_ENGINES) and engine.compiled

    def __init__(self, model, data, parts, functions, coal_bounds=None, wrench_frames=None, rigid=None):
        """``model``, ``data``, ``parts``: the Simulator's SimModel, SimData and StepParts, for which ``qualifies``
        holds; ``functions``: the compiled module's ``c_functions()``; ``coal_bounds``: the PairBounds of the
        query's coal pairs (``ContactQuery.coal_pairs``), None when it has none; ``wrench_frames``: the frames of the
        scene's scripted wrenches when they are all on links (J^T [f; m] in the call: their values, ``wrench``
        (k, 6) [force N; torque N m], are written by the Simulator before each call), else None (the Simulator
        writes data.external; always for free bodies only); ``rigid``: the compiled Pinocchio calls on the
        Simulator's Data (a RigidBodyDynamics), ``parts.rigid`` by default: a model of free bodies only, which has
        none there, passes one for the Pinocchio kinematics that coal's narrow phase reads.

        ``pin_kinematics``: the call reads Pinocchio's Data at q0 and leaves it at the new state's kinematics (a
        tree; free bodies only with coal's pairs in the call); else it reads and writes no Pinocchio Data."""
        cq, engine, penetration = parts.contact_query, parts.engine, parts.penetration
        rigid = rigid if rigid is not None else parts.rigid
        bodies = parts.free_bodies
        nv = model.nv
        a = cq.compiled_pass_arguments()
        # the pairs the call tests itself (the compiled ones; coal's only through their bounding volumes)
        self.pairs = cq.num_pairs - len(cq.coal_pairs)
        self.parts, self.data = parts, data
        # coal's pairs in the call when their narrow phase is compiled (ContactQuery.compiled_coal_pass): the
        # query's whole update, its bounding-volume decision included (this table's own test is then not run); the
        # most rows are then the query's contact buffers' (a step with more: the staged step, which grows them)
        has_coal = len(cq.coal_pairs) > 0
        self.coal_pass = cq.compiled_coal_pass(parts.pin_data) if has_coal and cq.compiled_narrow_phase else None
        if self.coal_pass is not None:
            coal_bounds = None
        self.max_rows = rows = max(int(a["max_rows"]) if self.coal_pass is None else a["ids"].shape[1], 1)
        scratch = engine.kernel_scratch(rows)
        self.icf = engine.name in ICF_ENGINES      # tree_icf_step (else tree_tamsi_step)
        self.lagged = engine.name == "lagged"
        if self.icf:                     # icf_step's fwork, iwork, stiction, structure, options (T_ICF_* rows)
            fixed, ifixed, contact, icontact, engine_options = scratch
        else:
            (fixed, ifixed, contact, icontact), engine_options = scratch, np.zeros(1)
        for slot in data.slots:
            slot.rows(rows)
        slots = np.array([s for s, _ in a["joint_slots"]], dtype=np.int64)
        joints = np.array([j for _, j in a["joint_slots"]], dtype=np.int64)
        ints = np.zeros(N_INTS, dtype=np.int64)
        ints[I_FUNCTIONS:I_FUNCTIONS + N_FUNCTIONS] = [int(f) for f in functions]
        ints[I_HANDLE] = rigid.handle()
        ints[I_VECTOR_SPACE] = model.vector_space
        ints[I_WITH_GRAVITY] = model.uses_gravity_force
        ints[I_FEED_FORWARD] = model.has_feed_forward
        ints[I_PENETRATION] = penetration is not None
        ints[I_BOUNDS] = coal_bounds is not None
        if self.coal_pass is not None:
            ints[I_COAL_PASS], ints[I_COAL_ROWS] = self.coal_pass.table.ctypes.data, self.coal_pass.table.shape[0]
        frames = np.array(wrench_frames if wrench_frames is not None else (), dtype=np.int64)
        ints[I_WRENCHES] = len(frames)
        ints[I_LAGGED] = self.lagged
        ints[I_FREE_BODIES] = bodies is not None
        self.pin_kinematics = (bodies is None or self.coal_pass is not None
                               or not bodies.identity_placements)
        ints[I_PIN_KINEMATICS] = self.pin_kinematics
        ints[I_SURFACE_VELOCITY] = model.has_surface_velocities
        self.applies_wrenches = wrench_frames is not None
        self.wrench = np.zeros((max(len(frames), 1), 6))      # the wrenches' values the call applies
        scalars = np.zeros(N_SCALARS)
        scalars[[S_MARGIN, S_PATCH_TOLERANCE, S_DEEPEST, S_STICTION, S_JOINT_STICTION, S_FRACTION,
                 S_CASTER_TOLERANCE, S_BOUND_LIMIT]] = (
            a["margin"], a["patch_tolerance"], a["deepest_tolerance"], model.friction_tolerance,
            model.joint_stiction_tolerance, penetration.fraction if penetration is not None else 0.0,
            a["caster_tolerance"], coal_bounds.limit if coal_bounds is not None else 0.0)
        # this step's own scratch: the joint Jacobians, the box patches' rows and the merged rows
        patch_rows = max(9 * len(a["bh_int"]), 1)
        own = {"J": np.zeros((6, rigid.jacobian_columns())), "pr_pair": np.zeros(patch_rows, np.int64),
               "pr_a": np.zeros((patch_rows, 3)), "pr_b": np.zeros((patch_rows, 3)),
               "pr_n": np.zeros((patch_rows, 3)), "mr_pair": np.zeros(rows, np.int64), "mr_a": np.zeros((rows, 3)),
               "mr_b": np.zeros((rows, 3)), "mr_n": np.zeros((rows, 3))}
        entries = {
            T_INTS: ints, T_SCALARS: scalars, T_J: own["J"], T_PLACEMENT: a["placement"], T_SLOT_JOINTS: joints,
            T_SLOT_INDEX: slots, T_M: data.mass_matrix, T_NLE: data.nle, T_GRAVITY: data.gravity,
            T_ERROR: data.position_error, T_Q_TARGET: data.q_target, T_ROWS: data.rows,
            T_FREE_V: model.free_v_index, T_TREE_PTR: model.tree_ptr, T_FINISH_INDEX: model.finish_index,
            T_FINISH_VALUES: data.finish_values, T_FF_FRICTION: data.ff_friction, T_FF_DAMPING: data.ff_damping,
            T_FF: data.ff, T_FF_SCRATCH: data.ff_scratch, T_ACT_EFFORT: data.actuation_effort,
            T_AN_INT: a["an_int"], T_AN_FLOAT: a["an_float"], T_SP_INT: a["sp_int"], T_SP_FLOAT: a["sp_float"],
            T_BH_INT: a["bh_int"], T_BH_FLOAT: a["bh_float"], T_PAIR_OUT: a["pair_out"], T_RAW: a["raw"],
            T_B_PAIR: a["b_pair"], T_B_START: a["b_start"], T_B_MID: a["b_mid"], T_B_NORMAL: a["b_normal"],
            T_B_DEPTH: a["b_depth"], T_B_WA: a["b_wa"], T_B_WB: a["b_wb"], T_B_GEOMETRY: a["b_geometry"],
            T_B_PLACEMENT: a["b_placement"], T_BH_SLOTS: a["bh_slots"], T_BH_WORK: a["bh_work"],
            T_BH_IWORK: a["bh_iwork"], T_BH_MIN_GAP: a["bh_min_gap"], T_C_TYPE: a["caster_type"],
            T_C_HALF: a["caster_half"], T_C_RADIUS: a["caster_radius"], T_C_HALF_LENGTH: a["caster_half_length"],
            T_C_PLANE_NORMAL: a["caster_plane_normal"], T_C_PLANE_OFFSET: a["caster_plane_offset"],
            T_C_FACE_START: a["caster_face_start"], T_C_FACE_NORMAL: a["caster_face_normal"],
            T_C_FACE_OFFSET: a["caster_face_offset"], T_PAIR_IDS: a["pair_ids"],
            T_PAIR_MATERIAL: a["pair_material"], T_JOINT_COLUMNS: a["joint_columns"],
            T_COLUMN_DOF: a["column_dof"], T_IDS: a["ids"], T_POINT: a["point"], T_NORMAL: a["normal"],
            T_PHI: a["phi"], T_ROTATION: a["rotation"], T_JACOBIAN: a["jacobian"], T_MATERIAL: a["material"],
            T_REL: a["rel"], T_COLUMNS: a["columns"], T_BIAS: a["bias"], T_PR_PAIR: own["pr_pair"],
            T_PR_A: own["pr_a"], T_PR_B: own["pr_b"], T_PR_N: own["pr_n"], T_MR_PAIR: own["mr_pair"],
            T_MR_A: own["mr_a"], T_MR_B: own["mr_b"], T_MR_N: own["mr_n"],
            T_THICKNESS: penetration.thickness if penetration is not None else np.zeros(1),
            T_FIXED: fixed, T_IFIXED: ifixed, T_CONTACT: contact, T_ICONTACT: icontact,
            T_WRENCH_FRAME: frames if len(frames) else np.zeros(1, np.int64), T_WRENCH: self.wrench,
            T_FRAME_JT: np.zeros((nv, 6)), T_WRENCH_FORCE: data.wrench_force, T_ENGINE_OPTIONS: engine_options,
            T_SURFACE_VELOCITY: data.surface_velocity}
        if bodies is not None:      # stages.dynamics': FreeBodies' constant M and zero position error
            entries.update({T_M: bodies.mass_matrix, T_ERROR: bodies.zero_velocity, T_BODY_INT: bodies.body_int,
                            T_BODY_FLOAT: bodies.body_float, T_BODY_GRAVITY: bodies.gravity,
                            T_ZERO_V: bodies.zero_velocity})
        else:
            entries.update({T_BODY_INT: np.zeros((1, 3), np.int64), T_BODY_FLOAT: np.zeros((1, 1)),
                            T_BODY_GRAVITY: np.zeros(3), T_ZERO_V: np.zeros(1)})
        b = coal_bounds
        no_int, no_float = np.zeros((1, 1), np.int64), np.zeros((1, 1))
        entries.update({T_BOUND_JOINT_INT: b.joint_int if b else no_int,
                        T_BOUND_JOINT_FLOAT: b.joint_float if b else no_float,
                        T_BOUND_GEOMETRY_INT: b.geometry_int if b else no_int,
                        T_BOUND_GEOMETRY_FLOAT: b.geometry_float if b else no_float,
                        T_BOUND_PAIRS: b.pairs if b else no_int, T_BOUND_PLACEMENT: b.placement if b else no_float,
                        T_BOUND_WORLD: b.world if b else no_float, T_BOUND_LOCAL: b.local if b else no_float})
        if sorted(entries) != list(range(N_TABLE)):
            raise ValueError("tree_step: the address table misses an entry")
        integer = {T_INTS, T_SLOT_JOINTS, T_SLOT_INDEX, T_FREE_V, T_TREE_PTR, T_FINISH_INDEX, T_AN_INT, T_SP_INT,
                   T_BH_INT, T_PAIR_OUT, T_B_PAIR, T_B_START, T_B_GEOMETRY, T_BH_SLOTS, T_BH_IWORK, T_C_TYPE,
                   T_C_FACE_START, T_PAIR_IDS, T_JOINT_COLUMNS, T_COLUMN_DOF, T_IDS, T_COLUMNS, T_PR_PAIR,
                   T_MR_PAIR, T_IFIXED, T_ICONTACT, T_BOUND_JOINT_INT, T_BOUND_GEOMETRY_INT, T_BOUND_PAIRS,
                   T_WRENCH_FRAME, T_BODY_INT}
        for k, arr in entries.items():
            want = np.int64 if k in integer else np.float64
            if arr.dtype != want:
                raise ValueError(f"tree_step: table entry {k} must be {np.dtype(want)}, got {arr.dtype}")
        # what current() compares: the query's empty ContactSet view and the engine's scratch tuple of this table
        self._no_contacts, self._scratch = cq.contact_set(0), engine.kernel_scratch(0)
        self.arrays = entries              # every array the table points into, held while this object lives
        self.table = np.array([table_row(entries[k], "tree_step") for k in range(N_TABLE)], dtype=np.int64)

    def current(self) -> bool:
        """True while the query's contact buffers and the engine's scratch are still the arrays of the table
        (after a staged step, which may have grown them: the Simulator builds the table again when not). Cheap:
        the query makes its ContactSet views again, and the engine its scratch tuple, exactly when it replaces
        those arrays."""
        return (self.parts.contact_query.contact_set(0) is self._no_contacts
                and self.parts.engine.kernel_scratch(0) is self._scratch)
