"""Simulator against analytic results (reference engine)."""

import dataclasses
import re

import numpy as np
import pytest

from contact_sim_ros.engines.base import SolverStatus
from contact_sim_ros.errors import ConfigError, EngineError
from contact_sim_ros.sim.simulator import Simulator

G = 9.81

PENDULUM = """<robot name="pendulum">
  <link name="base"/>
  <link name="bob">
    <inertial><origin xyz="0 0 -{l}"/><mass value="{m}"/>
      <inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="bob"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="100" velocity="10"/></joint>
</robot>"""


def test_pendulum_small_angle_period_within_one_percent(tmp_path):
    m, l, r = 1.0, 0.5, 0.01
    inertia = 0.4 * m * r * r
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM.format(l=l, m=m, i=inertia))
    sim = Simulator({"robot": {"urdf": str(urdf), "initial_positions": {"hinge": 0.05},     # passive: no PD
                               "gains": {"hinge": {"kp": 0.0, "kd": 0.0}}}}, time_step=1e-3)
    angles, times = [], []
    for _ in range(4000):
        sim.step(strict=True)
        angles.append(sim.joint_positions()[0])
        times.append(sim.t)
    angles = np.array(angles)
    crossings = [times[i] for i in range(1, len(angles)) if angles[i - 1] > 0 >= angles[i]]
    period = np.mean(np.diff(crossings))
    expected = 2 * np.pi * np.sqrt((m * l * l + inertia) / (m * G * l))
    assert period == pytest.approx(expected, rel=0.01)


def test_free_fall_matches_half_g_t_squared():
    sim = Simulator({"objects": [{"name": "ball", "shape": {"sphere": 0.05}, "mass": 1.0,
                                 "pose": {"xyz": [0, 0, 10.0]}}]}, time_step=1e-3)
    sim.run(1.0)
    fallen = 10.0 - sim.body_pose("ball").translation[2]
    assert fallen == pytest.approx(0.5 * G * 1.0 ** 2, rel=2e-3)   # first-order scheme: error ~ dt / t
    assert sim.body_velocity("ball")[2] == pytest.approx(-G * 1.0, rel=1e-9)


@pytest.mark.parametrize("shape", [{"sphere": 0.05}, {"box": [0.1, 0.08, 0.06]}])
def test_dropped_object_settles_and_normal_force_equals_weight(shape):
    m = 0.7
    sim = Simulator({"objects": [{"name": "obj", "shape": shape, "mass": m, "pose": {"xyz": [0, 0, 0.15],
                                                                                    "rpy": [0.0, 0.0, 0.3]}}],
                     "environment": [{"name": "ground", "shape": "halfspace"}],
                     "materials": {"default": {"stiffness": 1e5, "dissipation": 20.0, "friction": 0.5}}},
                    time_step=1e-3)
    sim.run(1.5)
    assert np.linalg.norm(sim.body_velocity("obj")) < 1e-3
    normal = sim.last_result.contact_impulse[:, 2].sum() / sim.time_step
    assert normal == pytest.approx(m * G, rel=0.01)


def test_pd_position_target_is_reached(tmp_path):
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM.format(l=0.3, m=1.0, i=1e-4))
    sim = Simulator({"robot": {"urdf": str(urdf), "gains": {"hinge": {"kp": 400.0, "kd": 40.0}}},
                     "gravity": [0, 0, 0]}, time_step=1e-3)
    clamped = sim.set_joint_targets(positions={"hinge": 0.4})
    assert clamped == []
    sim.run(2.0)
    assert sim.joint_positions()[0] == pytest.approx(0.4, abs=1e-3)
    assert sim.set_joint_targets(positions={"hinge": 5.0}) == ["hinge"]   # beyond the 3 rad limit: clamped


def test_joint_limit_stops_the_joint(tmp_path):
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM.format(l=0.3, m=1.0, i=1e-4).replace('lower="-3" upper="3"',
                                                                  'lower="-0.2" upper="0.2"'))
    sim = Simulator({"robot": {"urdf": str(urdf), "initial_positions": {"hinge": 0.1}}}, time_step=1e-3)
    sim.run(1.0)
    assert -0.2 - 1e-12 <= sim.joint_positions()[0] <= 0.2 + 1e-12


def test_bad_engine_and_time_step_are_rejected():
    scene = {"objects": [{"name": "b", "shape": {"sphere": 0.1}, "mass": 1.0}]}
    with pytest.raises(EngineError, match="unknown engine 'nope'; valid engines: .*semi_implicit"):
        Simulator(scene, engine="nope")
    with pytest.raises(ConfigError, match="time_step"):
        Simulator(scene, time_step=-1.0)
    with pytest.raises(ConfigError, match="unknown option"):
        Simulator(scene, engine_options={"bogus": 1})


@pytest.mark.parametrize("engine, shape, contacts", [("tamsi", {"box": [0.1, 0.08, 0.06]}, 4),
                                                     ("lagged", {"box": [0.1, 0.08, 0.06]}, 4),
                                                     ("tamsi", {"sphere": 0.03}, 1)])     # the fused step
def test_engine_outputs_are_written_in_place_and_last_result_survives_the_next_step(engine, shape, contacts):
    """The engine writes a step's outputs into one of two preallocated slots (ContactEngine.step_into; the fused
    free-body step too), the one last_result does not hold: no result object or output array is made per step,
    and the last result a caller read is still intact after the next step (only the step after that reuses its
    arrays)."""
    m = 0.7
    sim = Simulator({"objects": [{"name": "obj", "shape": shape, "mass": m, "pose": {"xyz": [0, 0, 0.03]}}],
                     "environment": [{"name": "ground", "shape": "halfspace"}],
                     "materials": {"default": {"stiffness": 1e5, "dissipation": 20.0, "friction": 0.5}}},
                    engine=engine, time_step=1e-3)
    sim.run(0.3)
    state, state_values = (sim.q, sim.v), (sim.q.copy(), sim.v.copy())
    first = sim.last_result
    kept = {k: getattr(first, k).copy() for k in ("contact_impulse", "generalized_contact_force", "actuation_force")}
    buffers = {k: getattr(first, k) for k in kept}
    assert first.contact_impulse.shape[0] == contacts and kept["contact_impulse"][:, 2].sum() > 0
    assert (sim._fused is not None) == ("sphere" in shape)
    sim.step()
    second = sim.last_result
    assert second is not first
    for k, value in kept.items():
        np.testing.assert_array_equal(getattr(first, k), value, err_msg=k)
    sim.step()
    assert sim.last_result is first and sim.actuation_force is buffers["actuation_force"]
    for k, array in buffers.items():            # the same arrays, new values
        assert getattr(first, k) is array or getattr(first, k).base is array.base, k
    for array, value in zip(state, state_values):   # the state arrays a caller holds are never written again
        np.testing.assert_array_equal(array, value)
    normal = sim.last_result.contact_impulse[:, 2].sum() / sim.time_step
    assert normal == pytest.approx(m * G, rel=0.01)


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_the_allocating_step_is_the_step_into_a_fresh_slot(engine):
    """The compiled engines have one step (``_do_step_into``): ``ContactEngine.step`` runs it on a fresh ResultSlot.
    A box sliding at 0.5 m/s on the ground with friction 0.5 (it sticks after ~0.1 s) for 0.3 s: a second engine of
    the same model stepped with ``step`` on the Simulator's inputs gives, every step, the Simulator's result
    (``step_into`` into its slots) to the bit, and its results are arrays of their own (the next ``step`` does not
    write them; not the slots')."""
    sim = Simulator({"objects": [{"name": "obj", "shape": {"box": [0.1, 0.08, 0.06]}, "mass": 0.7,
                                  "pose": {"xyz": [0, 0, 0.03]}, "velocity": [0.5, 0, 0, 0, 0, 0]}],
                     "environment": [{"name": "ground", "shape": "halfspace"}],
                     "materials": {"default": {"stiffness": 1e5, "dissipation": 20.0, "friction": 0.5}}},
                    engine=engine, time_step=1e-3)
    assert sim._tree is not None
    sim._tree = None            # the staged step: the engine's step_into (the fused tree step calls its kernel)
    twin = type(sim.engine)(sim.model, sim.engine.options)
    step_into, seen = sim.engine.step_into, []

    def both(inputs, slot):
        into = step_into(inputs, slot)
        fresh = twin.step(inputs)
        assert into is slot.result and fresh is not into
        assert (fresh.stats.status, fresh.stats.iterations, fresh.stats.residual) == (
            into.stats.status, into.stats.iterations, into.stats.residual)
        for field in ("v_next", "contact_impulse", "generalized_contact_force", "actuation_force"):
            np.testing.assert_array_equal(getattr(fresh, field), getattr(into, field), err_msg=field)
            assert not np.shares_memory(getattr(fresh, field), getattr(into, field)), field
        if seen:                                         # the previous step's result, kept by the caller
            previous, values = seen[-1]
            for field, value in values.items():
                np.testing.assert_array_equal(getattr(previous, field), value, err_msg=field)
        seen.append((fresh, {f: getattr(fresh, f).copy() for f in ("v_next", "contact_impulse")}))
        return into

    sim.engine.step_into = both
    for _ in range(300):
        sim.step(strict=True)
    assert len(seen) == 300 and all(r.contact_impulse.shape == (4, 3) for r, _ in seen)
    assert seen[0][0].v_next[0] > 0.4 and abs(sim.v[0]) < 1e-3      # slid, then stuck: both regimes compared


def test_the_scene_is_never_written_the_initial_state_is_the_simulators(tmp_path):
    """set_initial_positions and carry_over change the Simulator's initial state (data.q0 / v0, what reset returns
    to), never the Scene it was built from: a second Simulator of the same Scene object starts where the scene
    says, and a rebuilt Simulator takes over the changed initial state."""
    from contact_sim_ros.sim.scene import load_scene
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM.format(l=0.5, m=1.0, i=1e-4))
    scene = load_scene({"robot": {"urdf": str(urdf), "initial_positions": {"hinge": 0.05},
                                  "gains": {"hinge": {"kp": 50.0, "kd": 5.0}}}})
    loaded = scene.q0.copy()
    sim = Simulator(scene, time_step=1e-3)
    sim.set_initial_positions({"hinge": 0.7})
    np.testing.assert_array_equal(scene.q0, loaded)
    assert sim.q0[0] == 0.7 and sim.q[0] == 0.7
    sim.run(0.05)
    sim.reset()
    assert sim.q[0] == 0.7 and sim.t == 0.0
    assert Simulator(scene, time_step=1e-3).q[0] == 0.05            # the same Scene object, unchanged
    new = sim.rebuilt(load_scene({"robot": {"urdf": str(urdf), "initial_positions": {"hinge": 0.05},
                                            "gains": {"hinge": {"kp": 50.0, "kd": 5.0}}}}))
    new.reset()
    assert new.q[0] == 0.7
    np.testing.assert_array_equal(scene.q0, loaded)


def test_failed_step_keeps_the_state_and_reports_the_sim_time():
    """An engine that cannot converge even with sub-steps: the state is kept (no NaN), the report names the
    engine and the sim time, no stale contact data is left, and strict mode raises SolverError."""
    from contact_sim_ros.errors import SolverError
    scene = {"objects": [{"name": "ball", "shape": {"sphere": 0.05}, "mass": 1.0, "pose": {"xyz": [0, 0, 0.049]}}],
             "environment": [{"name": "ground", "shape": "halfspace"}]}
    sim = Simulator(scene, time_step=1e-3, engine_options={"max_iterations": 1, "velocity_tolerance": 1e-300},
                    max_substep_levels=2)
    q0 = sim.q.copy()
    report = sim.step()
    assert not report.ok and report.substeps == 4
    assert "engine 'semi_implicit' failed at t = 0.000000 s" in report.message
    np.testing.assert_array_equal(sim.q, q0)
    assert sim.t == 0.0 and sim.contacts is None and sim.contact_forces_world().shape == (0, 3)
    with pytest.raises(SolverError, match="state kept"):
        sim.step(strict=True)


# ----------------------------------------------------------------------------- per-step hot path
def _free_bodies_scene(n=5):
    return {"objects": [{"name": f"b{i}", "shape": {"box": [0.1, 0.08, 0.06]}, "mass": 0.5 + i,
                         "pose": {"xyz": [0.3 * i, 0, 1.0]}} for i in range(n)]}


@pytest.mark.parametrize("dt", [1e-3, 0.05])
def test_free_body_integrate_kernel_matches_pinocchio_reference(dt):
    """The compiled frozen-frame update (R0 from the quaternion, v_lin <- exp(dt w)^T v_lin) equals the
    Pinocchio Quaternion/exp3 reference to round-off, for fast and tiny spins (exp3's Taylor branch), and a
    spin-free body keeps a constant world velocity (straight line)."""
    from contact_sim_ros.model.free_body_motion import FreeBodyMotion
    sim = Simulator(_free_bodies_scene(), time_step=1e-3)
    fb = FreeBodyMotion(sim.model)
    rng = np.random.default_rng(2)
    for trial in range(20):
        q0 = sim.q.copy()
        for i in range(5):
            quat = rng.normal(size=4)
            q0[7 * i + 3:7 * i + 7] = quat / np.linalg.norm(quat)
        v = rng.normal(size=sim.model.nv) * 3.0
        v[3::6] *= 10.0 ** -rng.integers(0, 9, 5)            # angular speeds from 3 rad/s down to 1e-8 rad/s
        q_k, v_k = fb.integrate(q0, v, dt)
        q_r, v_r = fb.integrate_reference(q0, v, dt)
        np.testing.assert_allclose(q_k, q_r, rtol=0, atol=1e-14)
        np.testing.assert_allclose(v_k, v_r, rtol=0, atol=1e-13)
    v = np.zeros(sim.model.nv)
    v[0:3] = [1.0, -2.0, 0.5]                                   # body 0: pure translation (body frame)
    q_k, v_k = fb.integrate(q0, v, dt)
    import pinocchio as pin
    R0 = pin.Quaternion(q0[3:7]).matrix()
    np.testing.assert_allclose(q_k[:3], q0[:3] + dt * R0 @ v[:3], atol=1e-15)
    np.testing.assert_array_equal(v_k, v)


def test_frame_rotation_force_is_mass_matrix_times_w_cross_v():
    from contact_sim_ros.model.free_body_motion import FreeBodyMotion
    sim = Simulator(_free_bodies_scene(3), time_step=1e-3)
    fb = FreeBodyMotion(sim.model)
    rng = np.random.default_rng(5)
    M = rng.normal(size=(18, 18))
    v = rng.normal(size=18)
    e = np.zeros(18)
    for i in range(3):
        e[6 * i:6 * i + 3] = np.cross(v[6 * i + 3:6 * i + 6], v[6 * i:6 * i + 3])
    np.testing.assert_array_equal(fb.frame_rotation_force(M, v), M @ e)


def test_scripted_joint_targets_equal_set_joint_targets(tmp_path):
    """The scene's scripts (position + velocity, effort only, out-of-limit position) set exactly what
    set_joint_targets sets for the same commands: targets, efforts and control modes."""
    scene = {"robot": "iiwa_wsg",
             "inputs": {"joint_targets": [
                 {"joint": "iiwa_joint_1", "position": "0.3*sin(t)", "velocity": "0.3*cos(t)"},
                 {"joint": "iiwa_joint_2", "effort": "2.0 + t"},
                 {"joint": "iiwa_joint_4", "position": "5.0"}]}}
    scripted = Simulator(scene, time_step=1e-3)
    commanded = Simulator(scene, time_step=1e-3)
    commanded.scene.joint_scripts = []
    for t in (0.0, 0.37, 1.2):
        scripted._apply_scripts(t)
        clamped = commanded.set_joint_targets(positions={"iiwa_joint_1": 0.3 * np.sin(t), "iiwa_joint_4": 5.0},
                                              velocities={"iiwa_joint_1": 0.3 * np.cos(t)})
        commanded.set_joint_targets(efforts={"iiwa_joint_2": 2.0 + t})
        assert clamped == ["iiwa_joint_4"]
        for name in ("q_target", "v_target", "effort", "position_mode", "velocity_mode"):
            np.testing.assert_array_equal(getattr(scripted.data, name), getattr(commanded.data, name), err_msg=name)


@pytest.mark.parametrize("engine", ["tamsi", "quasistatic_miqp"])
def test_joint_command_arrays_equal_set_joint_targets(engine):
    """set_joint_command_arrays (the stepping loop's per-step hand-over, arrays in joint order) sets exactly what
    set_joint_targets sets with name dicts for every joint: clamped positions, velocity feed-forward, velocity
    mode, efforts (unused values, also nan or inf, ignored); the same errors for a non-finite used value and for
    a pure effort the engine ignores (and then changes nothing)."""
    scene = {"robot": "iiwa_wsg"}
    by_name, by_array = Simulator(scene, time_step=1e-3, engine=engine), Simulator(scene, time_step=1e-3,
                                                                                    engine=engine)
    names = by_name.model.joint_names
    n = len(names)
    rng = np.random.default_rng(7)
    fields = ("q_target", "v_target", "effort", "position_mode", "velocity_mode")
    for trial in range(20):
        mode = rng.integers(0, 2 if engine == "quasistatic_miqp" else 3, n)     # 0 position, 1 velocity, 2 effort
        q = rng.uniform(-4.0, 4.0, n)          # beyond some joints' limits: clamped
        v, e = rng.normal(size=n), rng.normal(size=n)
        pos, vel = mode == 0, mode == 1
        by_name.set_joint_targets(positions={j: q[i] for i, j in enumerate(names) if pos[i]},
                                  velocities={j: v[i] for i, j in enumerate(names) if pos[i] or vel[i]},
                                  efforts={j: e[i] for i, j in enumerate(names)})
        if trial % 2:                          # unused values may be anything, also not finite
            by_array.set_joint_command_arrays(pos, vel, np.where(pos, q, np.nan), np.where(pos | vel, v, np.inf),
                                              e)
        else:
            by_array.set_joint_command_arrays(pos, vel, q, v, e)
        for f in fields:
            np.testing.assert_array_equal(getattr(by_array.data, f), getattr(by_name.data, f),
                                          err_msg=f"{f}, trial {trial}")
    before = {f: getattr(by_array.data, f).copy() for f in fields}
    q[0] = np.nan
    with pytest.raises(ConfigError, match=f"joint '{names[0]}': position command must be finite"):
        by_array.set_joint_command_arrays(np.ones(n, bool), np.zeros(n, bool), q, v, e)
    q[0] = 0.0
    if engine == "quasistatic_miqp":     # velocity-commanded: an effort alone is refused, naming the joints
        with pytest.raises(ConfigError, match=f"pure effort command for joint.*{names[1]}"):
            by_array.set_joint_command_arrays(np.zeros(n, bool), np.arange(n) != 1, q, v, e)
    for f in fields:
        np.testing.assert_array_equal(getattr(by_array.data, f), before[f], err_msg=f)


# ------------------------------------------------------------------ URDF Coulomb joint friction

@pytest.mark.parametrize("engine", ["semi_implicit", "tamsi", "lagged", "lcp_minimal"])
def test_urdf_joint_friction_holds_below_and_slides_above_the_friction_torque(tmp_path, engine):
    """A hinge with <dynamics friction="0.5"/> (F_c = 0.5 N*m), no gravity, rotor inertia I: an effort of 0.3
    N*m does not turn it (creep below the stiction tolerance); 0.8 N*m accelerates it at (0.8 - F_c) / I; once
    the effort is removed, friction stops it after I v / F_c (rigid Coulomb values, within 2 %)."""
    m, l, i = 1.0, 0.3, 1e-4
    inertia = m * l * l + i
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM.format(l=l, m=m, i=i).replace(
        '</joint>', '<dynamics damping="0" friction="0.5"/></joint>'))
    sim = Simulator({"robot": {"urdf": str(urdf)}, "gravity": [0, 0, 0]}, engine=engine, time_step=1e-3)
    assert sim.model.joint_friction[0] == 0.5
    sim.set_joint_targets(efforts={"hinge": 0.3})
    sim.run(0.5)
    assert abs(sim.joint_positions()[0]) < sim.joint_stiction_tolerance * 0.5      # stuck: creep < v_s * t
    sim.set_joint_targets(efforts={"hinge": 0.8})
    sim.run(0.1)
    v0, t0 = sim.joint_velocities()[0], sim.t
    sim.run(0.5)
    acceleration = (sim.joint_velocities()[0] - v0) / (sim.t - t0)
    assert acceleration == pytest.approx((0.8 - 0.5) / inertia, rel=0.02)
    v1 = sim.joint_velocities()[0]
    sim.set_joint_targets(efforts={"hinge": 0.0})
    t_release = sim.t
    while sim.joint_velocities()[0] > sim.joint_stiction_tolerance and sim.t < t_release + 2.0:
        sim.step(strict=True)
    assert sim.t - t_release == pytest.approx(inertia * v1 / 0.5, rel=0.02)
    q_stop = sim.joint_positions()[0]
    sim.run(0.5)
    assert abs(sim.joint_positions()[0] - q_stop) < sim.joint_stiction_tolerance * 0.5   # and stays


def test_joint_stiction_tolerance_must_be_positive():
    with pytest.raises(ConfigError, match="joint_stiction_tolerance"):
        Simulator({"objects": []}, joint_stiction_tolerance=0.0)


# ------------------------------------------------------------------------ divergence (issue 17)
def _mug_scene():
    return {"objects": [{"name": "mug", "shape": {"cylinder": [0.04, 0.1]}, "mass": 0.3,
                         "pose": {"xyz": [0, 0, 0.5]}}],
            "environment": [{"name": "ground", "shape": "halfspace"}]}


@pytest.mark.parametrize("index, value, message", [
    (0, 6500.0, r"diverged: free body 'mug' speed 6500 m/s > 100 m/s at t = 0.000\d+ s"),
    (4, 2000.0, r"diverged: free body 'mug' angular speed 2000 rad/s > 1000 rad/s at t = 0.000\d+ s"),
])
def test_a_free_body_launched_beyond_the_bound_fails_the_step_naming_it(index, value, message):
    """Handled like a solver failure: sub-steps are tried, then the step fails, the state is kept, strict mode
    raises SolverError."""
    from contact_sim_ros.errors import SolverError
    sim = Simulator(_mug_scene(), time_step=1e-3, max_substep_levels=2)
    v = sim.v.copy()
    v[index] = value
    sim.set_state(sim.q, v)
    q0, v0 = sim.q.copy(), sim.v.copy()
    report = sim.step()
    assert not report.ok and report.substeps == 4 and report.status is SolverStatus.FAILED
    assert "engine 'semi_implicit' failed at t = 0.000000 s" in report.message
    assert re.search(message, report.message), report.message
    np.testing.assert_array_equal(sim.q, q0)
    np.testing.assert_array_equal(sim.v, v0)
    assert sim.t == 0.0 and sim.step_count == 0
    with pytest.raises(SolverError, match="diverged: free body 'mug'"):
        sim.step(strict=True)


def test_an_effort_ramp_that_throws_a_body_away_fails_when_it_passes_the_bound():
    scene = {**_mug_scene(), "inputs": {"external_forces": [{"body": "mug", "force": ["1e5 * t", 0, 0]}]}}
    sim = Simulator(scene, time_step=1e-3)
    reports = [sim.step() for _ in range(40)]
    failed = [r for r in reports if not r.ok]
    assert failed, "the mug reached 100 m/s within 40 ms and nothing failed"
    # the bound grows as a free fall's speed: 100 m/s + |g| t at the (sub-)step's time t
    m = re.search(r"diverged: free body 'mug' speed (10\d\.\d+) m/s > ([\d.]+) m/s at t = ([\d.]+) s", failed[0].message)
    assert m, failed[0].message
    assert float(m.group(2)) == pytest.approx(100 + 9.81 * float(m.group(3)), abs=0.05)
    # the kept state is the last good one, within the bound of its time
    assert np.linalg.norm(sim.body_velocity("mug")[:3]) <= 100.0 + 9.81 * sim.t


def test_divergence_limits_are_configurable_and_checked():
    sim = Simulator(_mug_scene(), divergence_limits={"max_distance": 2.0})
    q = sim.q.copy()
    q[0] = 3.0            # 3.04 m from the origin > 2 m + the scene's size 0.5 m (+ the reach in the step)
    sim.set_state(q, sim.v)
    report = sim.step()
    assert not report.ok and "free body 'mug' distance from the world origin 3.041 m > 2.50" in report.message
    fast = Simulator(_mug_scene(), divergence_limits={"max_speed": 1e4})
    v = fast.v.copy()
    v[0] = 6500.0
    fast.set_state(fast.q, v)
    assert fast.step().ok
    off = Simulator(_mug_scene(), divergence_limits=False)
    off.set_state(off.q, v)
    assert off.step().ok
    with pytest.raises(ConfigError, match=r"divergence_limits: unknown key\(s\) \['max_sped'\]"):
        Simulator(_mug_scene(), divergence_limits={"max_sped": 1.0})
    with pytest.raises(ConfigError, match=r"divergence_limits.max_speed must be > 0"):
        Simulator(_mug_scene(), divergence_limits={"max_speed": -1.0})


def test_the_node_parameters_divergence_limits_and_penetration_limit_reach_the_simulator():
    """A node user sets the bounds as parameters (ros/node_config.py): a mug at 6.5 km/s diverges with the
    defaults, steps with ``divergence_limits: "{max_speed: 1e4}"`` and with ``off``; malformed values name the
    parameter at start-up."""
    from contact_sim_ros.driver.node_config import NodeConfig

    def mug_at(speed, **params):
        sim = Simulator(_mug_scene(), **{**NodeConfig.from_mapping(params).simulator_options(), "engine": "tamsi"})
        v = sim.v.copy()
        v[0] = speed
        sim.set_state(sim.q, v)
        return sim.step()
    assert "diverged: free body 'mug' speed" in mug_at(6500.0).message
    assert mug_at(6500.0, divergence_limits="{max_speed: 1e4}").ok
    assert mug_at(6500.0, divergence_limits="off").ok
    assert NodeConfig.from_mapping({"penetration_limit": 0.0}).simulator_options()["penetration_limit"] is False
    with pytest.raises(ConfigError, match=r"parameter divergence_limits: unknown key\(s\) \['max_sped'\]"):
        NodeConfig.from_mapping({"divergence_limits": "{max_sped: 1}"})
    with pytest.raises(ConfigError, match=r"parameter 'divergence_limits': expected a mapping"):
        NodeConfig.from_mapping({"divergence_limits": "[1, 2]"})


def test_non_finite_kinetic_energy_is_divergence():
    from contact_sim_ros.sim.divergence import DivergenceCheck, DivergenceLimits
    sim = Simulator(_mug_scene())
    check = DivergenceCheck(sim.model, DivergenceLimits(max_speed=np.inf, max_angular_speed=np.inf))
    v = np.full(6, 1e160)
    M = np.eye(6)
    assert check.check(sim.q, np.zeros(6), M, 0.5) == ""
    with np.errstate(over="ignore"):
        assert check.check(sim.q, v, M, 0.5) == "diverged: kinetic energy is not finite at t = 0.500000 s"


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_vector_space_integration_in_the_finish_pass_equals_pinocchio_integrate(engine):
    """A robot of revolute and prismatic joints only (iiwa + WSG): finish_step's q0 + dt v is pin.integrate to
    the bit, over 300 steps of a PD hold with gravity and the fingers' limits."""
    from pathlib import Path
    scene = Path(__file__).resolve().parent.parent / "benchmarks" / "peers" / "scenes" / "iiwa_wsg_pd.yaml"
    compiled, reference = Simulator(scene, engine=engine), Simulator(scene, engine=engine)
    assert compiled.sim_model.vector_space
    # the model is frozen: the reference Simulator gets a copy saying pin.integrate, then the frozen-frame pass
    reference.sim_model = dataclasses.replace(reference.sim_model, vector_space=False)
    for _ in range(300):
        assert compiled.step().ok and reference.step().ok
        np.testing.assert_array_equal(compiled.q, reference.q)
        np.testing.assert_array_equal(compiled.v, reference.v)
    assert not Simulator(_mug_scene()).sim_model.vector_space            # a free body: quaternions


def test_sim_model_is_frozen_and_its_numpy_arrays_read_only():
    """The step's constants (sim/sim_model.py) cannot be changed after the Simulator is built: no field can be
    rebound and the arrays only numpy reads refuse writes; they match the MultibodyModel they were built from."""
    from pathlib import Path
    scene = Path(__file__).resolve().parent.parent / "benchmarks" / "peers" / "scenes" / "iiwa_wsg_pd.yaml"
    sim = Simulator(scene, engine="tamsi", time_step=2e-3)
    m = sim.sim_model
    assert m.time_step == 2e-3 and (m.nq, m.nv) == (sim.model.pin_model.nq, sim.model.pin_model.nv)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.time_step = 1e-3
    for name in ("joint_q_index", "joint_v_index", "position_lower", "position_upper", "limited"):
        a = getattr(m, name)
        with pytest.raises(ValueError, match="read-only"):
            a[0] = a[0]
    np.testing.assert_array_equal(m.joint_v_index, sim.model.joint_v_index)
    np.testing.assert_array_equal(m.position_upper, sim.model.position_upper)
    assert m.any_limited and m.limited.sum() == np.isfinite(sim.model.position_upper).sum()


@pytest.mark.parametrize("engine", ["tamsi", "lagged"])
def test_the_stages_called_in_order_are_the_step(engine):
    """sim/stages.py's functions called by hand on a Simulator's model, data and parts - kinematics, contacts,
    dynamics, actuation, solve, integrate, as Simulator._advance calls them - step a robot among free objects (the
    UR5 held by PD beside 20 resting boxes and spheres) exactly as Simulator.step does: q, v, the actuation and the
    contact impulses bit for bit over 100 steps with contacts. What a compiled kernel replacing one stage must
    reproduce is then the stage alone."""
    from pathlib import Path
    from contact_sim_ros.sim import stages
    scene = Path(__file__).resolve().parent.parent / "benchmarks" / "peers" / "scenes" / "ur5_objects.yaml"
    stepped, staged = Simulator(scene, engine=engine), Simulator(scene, engine=engine)
    m, d, p = staged.sim_model, staged.data, staged.step_parts
    q, v, t, dt, last = staged.q, staged.v, staged.t, m.time_step, None
    stages.kinematics(m, d, p, q, v)
    for k in range(100):
        found, deep = stages.contacts(m, d, p, q, v, t, dt, None)
        assert not deep and found.size >= 20                      # every object touches the ground
        M, nle, gravity, position_error = stages.dynamics(m, d, p, q, v)
        stages.actuation(m, d, p, M, v, nle, position_error)
        result = stages.solve(m, d, p, t, dt, q, v, M, gravity, found, last)
        q_next = stages.integrate(m, d, p, q, result, M, t, dt)
        assert q_next is not None
        q, v, t, last = q_next, result.v_next, t + dt, result
        stages.kinematics(m, d, p, q, v)
        assert stepped.step().ok
        np.testing.assert_array_equal(stepped.q, q, err_msg=f"step {k + 1}")
        np.testing.assert_array_equal(stepped.v, v, err_msg=f"step {k + 1}")
        np.testing.assert_array_equal(stepped.actuation_force, result.actuation_force)
        np.testing.assert_array_equal(stepped.last_result.contact_impulse, result.contact_impulse)
    assert np.abs(v).max() > 0             # not a state at rest by construction: the step moved it
