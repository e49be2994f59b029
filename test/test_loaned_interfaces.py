"""Loaned, typed controller interfaces in sim time, without DDS (issue 42 item 2), as ros2_control has them: the
hardware exports the command interfaces its engine accepts (no ``effort`` on a quasistatic engine) and the
controller manager refuses to activate a controller claiming one it does not ("Unable to activate controller ...
since the command interface ... is not available."); an active controller writes only the rows it claimed
(LoanedCommandInterfaces), released on deactivation; an update returning ReturnType.ERROR, or raising, deactivates
its controller with the manager's log lines while the other controllers and the stepping go on.

The world: the planar two-joint arm with a one-finger gripper of test_driver_controllers (its URDF), a trajectory
controller on the arm, a gripper action controller, forward position / effort groups (inactive), and, where a test
needs a controller that fails, ``test_controllers/RowWriter`` (below: it holds its claimed row and, from a given sim
time, returns ERROR, raises, or writes a row it did not claim), registered for the test only."""

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from contact_sim_ros.driver.command_validation import CommandRejected, JointLimits, validate_group_command
from contact_sim_ros.driver.config import (ControllersFile, ControllerSpec, parse_ros2_control,
                                           read_controllers_file)
from contact_sim_ros.driver.controller_manager import BEST_EFFORT, STRICT, ControllerManager
from contact_sim_ros.driver.controllers import registry
from contact_sim_ros.driver.controllers.base import Controller, ReturnType
from contact_sim_ros.driver.loaned_interfaces import InterfaceNotClaimed
from contact_sim_ros.driver.loop import SteppingLoop
from contact_sim_ros.driver.robot import validate_joint_command
from contact_sim_ros.driver.parameters import Parameter, ParameterTable
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.sim.simulator import Simulator

from test_driver_controllers import ARM, GRIPPER, JTC, Reports, goal, tol, trajectory, urdf  # noqa: F401 (fixture)

DT = 1e-3
EFFORT_GROUP = "effort_controllers/JointGroupEffortController"
POSITION_GROUP = "position_controllers/JointGroupPositionController"
VELOCITY_GROUP = "velocity_controllers/JointGroupVelocityController"
ROW_WRITER = "test_controllers/RowWriter"


class RowWriter(Controller):
    """A test controller claiming ``joint/position``: each update holds that joint at its position when activated;
    from the sim time ``fail_at`` (s) on, ``failure`` happens instead: 'error' returns ReturnType.ERROR, 'raise'
    raises RuntimeError, 'foreign' writes the position of ``foreign`` (a joint it did not claim)."""

    TYPES = (ROW_WRITER,)
    PARAMETERS = ParameterTable(
        Parameter("joint", "string", required=True, description="the joint claimed"),
        Parameter("foreign", "string", "", description="a joint not claimed"),
        Parameter("failure", "string", "error", choices=("error", "raise", "foreign")),
        Parameter("fail_at", "double", 1e9, "s", "sim time of the failure"),
        Parameter("states", "string_array", [], description="state interfaces claimed (joint/interface)"),
    )

    def __init__(self, name, ctype, params, ctx):
        super().__init__(name, ctype, params, ctx)
        p = self.parameters()
        self.joint, self.failure, self.fail_at = p["joint"], p["failure"], p["fail_at"]
        self.row = ctx.command.indices([self.joint])
        self.foreign = ctx.command.indices([p["foreign"]]) if p["foreign"] else None
        self.q = np.zeros(1)
        self.updates = 0
        self.states = [str(i) for i in p["states"]]

    def command_interfaces(self):
        return [f"{self.joint}/position"]

    def state_interfaces(self):
        return self.states

    def on_activate(self):
        self.q[:] = self.ctx.state.position[self.row]
        self.loan.hold(self.row, self.q)

    def update(self, time, period):
        self.updates += 1
        if time >= self.fail_at:
            if self.failure == "error":
                return ReturnType.ERROR
            if self.failure == "raise":
                raise RuntimeError("the test controller fails")
            self.loan.write_position(self.foreign, self.q)
        self.loan.write_position(self.row, self.q)
        return ReturnType.OK


@pytest.fixture
def row_writer(monkeypatch):
    monkeypatch.setitem(registry.CONTROLLER_TYPES, ROW_WRITER, RowWriter)


def make_world(urdf, specs, inactive=(), engine="semi_implicit"):
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine=engine, time_step=DT)
    system = SimulatorSystem(sim)
    reports = Reports()
    cm = ControllerManager(system, ControllersFile("<test>", 1.0 / DT, tuple(specs)), list(inactive),
                           transport=reports, limits=JointLimits.from_model(sim.model))
    return SimpleNamespace(sim=sim, system=system, cm=cm, reports=reports,
                           loop=SteppingLoop(system, cm, real_time_factor=0.0))


def arm_and_gripper(*extra):
    return (ControllerSpec("arm", JTC, {"joints": ARM}), ControllerSpec("gripper", GRIPPER, {"joint": "finger_joint"}),
            *extra)


# ------------------------------------------------------------------------------------------ loans


def test_a_controller_writes_only_the_rows_it_claimed_and_nothing_once_deactivated(urdf):
    """The arm's trajectory controller holds a loan of j1, j2: a write to the finger (the gripper's row) raises
    naming it and changes nothing; the context's view of the command interfaces has no write method and read-only
    arrays; after its deactivation the controller has no loan and the old one refuses every write."""
    w = make_world(urdf, arm_and_gripper())
    arm, gripper = w.cm.controllers["arm"], w.cm.controllers["gripper"]
    hw = w.system.command
    assert arm.loan.rows.tolist() == [0, 1] and gripper.loan.rows.tolist() == [2]
    finger = hw.indices(["finger_joint"])
    before = hw.values.copy(), hw.mode.copy()
    with pytest.raises(InterfaceNotClaimed, match=r"controller 'arm' .*\['finger_joint/position'\] it did not claim"):
        arm.loan.write_position(finger, [0.01])
    with pytest.raises(InterfaceNotClaimed, match="finger_joint"):
        arm.loan.write_effort(np.array([0, 2]), [1.0, 1.0])          # one claimed row, one not: nothing written
    with pytest.raises(InterfaceNotClaimed):
        arm.loan.limit_effort(2, 1.0)
    with pytest.raises(InterfaceNotClaimed):
        arm.loan.buffers(slice(1, 3))
    np.testing.assert_array_equal(hw.values, before[0])
    np.testing.assert_array_equal(hw.mode, before[1])
    arm.loan.write_position(arm.idx, [0.1, -0.1])                     # its own rows: written
    assert hw.position[:2].tolist() == [0.1, -0.1]

    view = arm.ctx.command
    assert not hasattr(view, "write_position") and not hasattr(arm.ctx, "engine")
    with pytest.raises(ValueError, match="read-only"):
        view.position[0] = 1.0
    assert view.position[0] == 0.1                                    # a live view of the buffers

    loan = arm.loan
    ok, msg = w.cm.switch([], ["arm"], STRICT)
    assert ok, msg
    assert arm.loan is None and loan.released and "j1/position" not in hw.claims
    with pytest.raises(InterfaceNotClaimed, match="released"):
        loan.hold(arm.idx, [0.0, 0.0])
    ok, msg = w.cm.switch(["arm"], [], STRICT)                        # a new loan on activation
    assert ok and arm.loan is not None and arm.loan is not loan and hw.claims["j1/position"] == "arm"


def test_a_loan_is_the_interfaces_claimed_not_their_joints(urdf):
    """A loan is the (joint, interface) pairs claimed, as ros2_control's LoanedCommandInterface is one interface:
    the arm's position trajectory controller (j1/position, j2/position) writing j1's effort or velocity raises
    naming ``j1/effort`` / ``j1/velocity`` and changes nothing, while its position writes go through; a forward
    effort group on the arm may write the effort and not the position of its joints, and its pushed position
    command is refused naming the interfaces; the drive's hold (any claimed interface of the row) is allowed to both.
    In sim time: the effort group's 0.5 N*m on j1 reaches the joint (its velocity leaves 0 within 10 steps)."""
    w = make_world(urdf, arm_and_gripper(ControllerSpec("forward", EFFORT_GROUP, {"joints": ARM})),
                   inactive=["forward"])
    arm = w.cm.controllers["arm"]
    hw = w.system.command
    assert sorted(arm.loan.names) == ["j1/position", "j2/position"]
    before = hw.values.copy(), hw.mode.copy(), hw.effort_raw.copy()
    with pytest.raises(InterfaceNotClaimed, match=r"controller 'arm' writes the command interface\(s\) "
                                                  r"\['j1/effort'\] it did not claim; it claims \['j1/position'"):
        arm.loan.write_effort(0, 1.0)
    with pytest.raises(InterfaceNotClaimed, match=r"\['j1/velocity', 'j2/velocity'\] it did not claim"):
        arm.loan.write_velocity(arm.idx, [0.1, 0.1])
    for now, then in zip((hw.values, hw.mode, hw.effort_raw), before):
        np.testing.assert_array_equal(now, then)
    arm.loan.write_position(arm.idx, [0.1, -0.1], [0.0, 0.0])
    assert hw.position[:2].tolist() == [0.1, -0.1]
    arm.loan.hold(arm.idx, [0.0, 0.0])

    ok, msg = w.cm.switch(["forward"], ["arm"], STRICT)
    assert ok, msg
    forward = w.cm.controllers["forward"]
    assert sorted(forward.loan.names) == ["j1/effort", "j2/effort"]
    with pytest.raises(InterfaceNotClaimed, match=r"controller 'forward' .*\['j1/position', 'j2/position'\]"):
        forward.loan.write_position(forward.idx, [0.0, 0.0])
    with pytest.raises(InterfaceNotClaimed, match=r"\['j2/position'\]"):
        forward.loan.buffers(np.array([1]))
    command = validate_group_command(JointLimits.from_model(w.sim.model), ARM, [0.2, 0.2], "position")
    with pytest.raises(InterfaceNotClaimed, match=r"\['j1/position', 'j2/position'\]"):
        forward.loan.push_command(command)
    assert not w.system.commands.pending
    forward.on_commands([0.5, 0.0])                                   # its own interface: handed over
    for _ in range(10):
        w.loop.step_now()
    assert hw.mode[0] == 2 and hw.effort[0] == 0.5
    assert abs(w.system.state.velocity[0]) > 0.0


def test_a_forward_controllers_commands_go_through_its_loan_and_stop_with_it(urdf):
    """A forward position group's command reaches the hardware at the next cycle through its loan; once it is
    deactivated a command is ignored with the warning, and the released loan hands nothing over."""
    w = make_world(urdf, arm_and_gripper(ControllerSpec("forward", POSITION_GROUP, {"joints": ARM})),
                   inactive=["forward"])
    ok, msg = w.cm.switch(["forward"], ["arm"], STRICT)
    assert ok, msg
    forward = w.cm.controllers["forward"]
    forward.on_commands([0.2, -0.3])
    w.loop.step_now()
    assert w.system.command.position[:2].tolist() == [0.2, -0.3]
    loan = forward.loan
    ok, msg = w.cm.switch(["arm"], ["forward"], STRICT)
    assert ok, msg
    forward.on_commands([0.5, 0.5])
    assert "controller 'forward' is inactive: command ignored" in w.reports.warnings[-1]
    assert not w.system.commands.pending
    command = validate_group_command(JointLimits.from_model(w.sim.model), ARM, [0.5, 0.5], "position")
    assert loan.push_command(command) is False and not w.system.commands.pending


def test_loaned_writes_allocate_nothing_per_update(urdf):
    """1000 position writes through a loan (index array checked on its first write) allocate no more than the same
    writes straight to the hardware buffers (peak traced memory, less than an empty ndarray's size apart)."""
    w = make_world(urdf, arm_and_gripper())
    arm = w.cm.controllers["arm"]
    hw = w.system.command
    pos, vel = np.array([0.1, 0.2]), np.array([0.0, 0.1])

    def peak(write):
        write(arm.idx, pos, vel)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            for _ in range(1000):
                write(arm.idx, pos, vel)
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()

    extra = peak(arm.loan.write_position) - peak(hw.write_position)
    assert extra < np.empty(0).__sizeof__(), f"{extra} bytes"


# ------------------------------------------------------------------------------------------ update errors


@pytest.mark.parametrize("failure, exception", [
    ("error", None),
    ("raise", "Caught exception of type : RuntimeError while updating controller 'writer': the test controller "
              "fails"),
    ("foreign", "Caught exception of type : InterfaceNotClaimed while updating controller 'writer': controller "
                "'writer' writes the command interface(s) ['j1/position'] it did not claim"),
])
def test_a_failing_update_deactivates_its_controller_and_the_others_and_the_stepping_go_on(urdf, row_writer,
                                                                                            failure, exception):
    """The row writer (j2) fails at t = 0.05 s while the gripper closes on its goal and a forward group holds j1:
    it is deactivated at the end of that cycle with ros2_control's log line (an exception first logged as
    ros2_control logs it), its claim released, j1 untouched by it; the gripper's goal still succeeds, the forward
    group's command still applies, the loop keeps stepping; the writer can be activated again."""
    w = make_world(urdf, (ControllerSpec("gripper", GRIPPER, {"joint": "finger_joint"}),
                          ControllerSpec("forward", POSITION_GROUP, {"joints": ["j1"]}),
                          ControllerSpec("writer", ROW_WRITER, {"joint": "j2", "foreign": "j1", "failure": failure,
                                                                "fail_at": 0.05})))
    writer, gripper, forward = (w.cm.controllers[n] for n in ("writer", "gripper", "forward"))
    g = gripper.goal(0.03, 0.0)
    gripper.submit(g)
    forward.on_commands([0.3])
    while w.sim.t < 0.05 - DT / 2:
        assert w.loop.step_now().ok
    assert writer.active and w.reports.errors == []
    j1_target = w.system.command.position[0]
    assert j1_target == 0.3
    w.loop.step_now()                                          # the update at t = 0.05 s fails
    assert not writer.active and writer.loan is None and "j2/position" not in w.system.command.claims
    expected = ([exception] if exception else []) + [
        "Deactivating controllers : [ writer ] as their update resulted in an error!"]
    assert w.reports.errors[0].startswith(expected[0]) and w.reports.errors[1:] == expected[1:]
    assert len(w.reports.errors) == len(expected)
    assert w.system.command.position[0] == j1_target           # the foreign write changed nothing
    updates = writer.updates
    while (not g.done.is_set() or w.sim.t < 0.6) and w.sim.t < 2.0:    # j1 reaches 0.3 rad in ~0.4 s (its ramp)
        assert w.loop.step_now().ok
    assert g.status == "succeeded" and writer.updates == updates   # no update of the inactive writer
    assert gripper.active and forward.active and w.sim.t > 0.05
    assert abs(w.sim.joint_positions()[0] - 0.3) < 0.01       # the forward group's j1 target reached
    ok, msg = w.cm.switch(["writer"], [], STRICT)              # as in ros2_control: it can be activated again
    assert ok and writer.active and w.system.command.claims["j2/position"] == "writer"


def test_a_controller_returning_ok_is_never_deactivated(urdf, row_writer):
    """The contrast: the same writer without failure time runs its 500 updates and keeps its claim."""
    w = make_world(urdf, (ControllerSpec("writer", ROW_WRITER, {"joint": "j2"}),))
    writer = w.cm.controllers["writer"]
    for _ in range(500):
        assert w.loop.step_now().ok
    assert writer.active and writer.updates == 500 and w.reports.errors == []


# ------------------------------------------------------------------------------------------ exported interfaces


def test_an_engine_that_ignores_efforts_exports_no_effort_interface_and_refuses_its_claim(urdf):
    """quasistatic_lcp ignores efforts: its hardware lists position and velocity per joint, no effort (semi_implicit
    lists all three); activating an effort group fails with the controller manager's message, STRICT refusing
    the whole switch, BEST_EFFORT skipping it; spawning it active is a start-up error with that message."""
    specs = arm_and_gripper(ControllerSpec("effort", EFFORT_GROUP, {"joints": ARM}))
    full = make_world(urdf, specs, inactive=["effort"])
    assert full.cm.ctx.command.available_command_interfaces() == [
        f"{j}/{i}" for j in ("j1", "j2", "finger_joint") for i in ("position", "velocity", "effort")]
    ok, msg = full.cm.switch(["effort"], ["arm"], STRICT)        # accepted where efforts are
    assert ok, msg

    w = make_world(urdf, specs, inactive=["effort"], engine="quasistatic_lcp")
    listed = w.cm.ctx.command.available_command_interfaces()
    assert listed == [f"{j}/{i}" for j in ("j1", "j2", "finger_joint") for i in ("position", "velocity")]
    message = "Unable to activate controller 'effort' since the command interface 'j1/effort' is not available."
    ok, msg = w.cm.switch(["effort"], ["arm"], STRICT)
    assert not ok and message in msg and "quasistatic_lcp' ignores effort commands" in msg
    assert w.cm.controllers["arm"].active and not w.cm.controllers["effort"].active
    ok, msg = w.cm.switch(["effort"], ["arm"], BEST_EFFORT)
    assert ok and f"skipped: {message}" in msg
    assert not w.cm.controllers["effort"].active and not any(k.endswith("/effort") for k in w.system.command.claims)
    for _ in range(10):
        assert w.loop.step_now().ok
    with pytest.raises(ConfigError, match="<test>: " + message.replace(".", r"\.").replace("(", r"\(")):
        make_world(urdf, specs, inactive=["arm"], engine="quasistatic_lcp")


def test_a_claim_the_ros2_control_block_does_not_offer_is_refused(urdf):
    """A <ros2_control> block giving j1 and j2 the position command interface only: the hardware exports those
    (and the finger's three, a joint the block leaves out); a velocity group on the arm cannot be activated (the
    reason names what the joint exports), the position trajectory controller is active."""
    block = parse_ros2_control("""<robot name="planar"><ros2_control name="planar" type="system">
      <hardware><plugin>mock_components/GenericSystem</plugin></hardware>
      <joint name="j1"><command_interface name="position"/><state_interface name="position"/></joint>
      <joint name="j2"><command_interface name="position"/><state_interface name="position"/></joint>
    </ros2_control></robot>""", "<block>")
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
    specs = arm_and_gripper(ControllerSpec("velocity", VELOCITY_GROUP, {"joints": ARM}))
    cm = ControllerManager(SimulatorSystem(sim, block), ControllersFile("<test>", 1.0 / DT, specs), ["velocity"],
                           transport=Reports(), limits=JointLimits.from_model(sim.model))
    assert cm.ctx.command.available_command_interfaces() == [
        "j1/position", "j2/position", "finger_joint/position", "finger_joint/velocity", "finger_joint/effort"]
    assert cm.controllers["arm"].active
    ok, msg = cm.switch(["velocity"], ["arm"], STRICT)
    assert not ok and msg == ("Unable to activate controller 'velocity' since the command interface 'j1/velocity' "
                              "is not available. (joint 'j1' exports the command interfaces ['position'])")
    assert cm.controllers["arm"].active


def test_the_joint_command_topic_accepts_what_the_system_exports(urdf):
    """The hardware-level joint_command (validate_joint_command, what the node's and each robot's topic call) asks
    the System's exported command interfaces, not the engine: on quasistatic_lcp a pure effort is refused
    ('unsupported', naming the interfaces and the engine's reason) and an effort with a position (its feed-forward)
    accepted; on semi_implicit the effort is accepted and reaches the joint in sim time; a <ros2_control> block
    giving j1 the position interface only makes a velocity command on j1 refused too (which the engine accepts),
    while the finger (left out of the block) takes it."""
    quasistatic = make_world(urdf, (), engine="quasistatic_lcp")
    limits = JointLimits.from_model(quasistatic.sim.model)
    with pytest.raises(CommandRejected) as exc:
        validate_joint_command(limits, quasistatic.system.command, ["j2", "j1"], effort=[1.0, 2.0])
    assert exc.value.kind == "unsupported"
    assert str(exc.value) == ("joint_command: the hardware does not export the command interface(s) ['j2/effort', "
                              "'j1/effort']: engine 'quasistatic_lcp' ignores effort commands: its joints follow "
                              "position or velocity commands")
    validate_joint_command(limits, quasistatic.system.command, ["j1"], [0.1], [], [1.0])     # feed-forward

    w = make_world(urdf, ())
    cmd = validate_joint_command(limits, w.system.command, ["j1"], effort=[2.0])
    w.system.commands.push_command(cmd)
    for _ in range(10):
        w.loop.step_now()
    assert w.system.command.mode[0] == 2 and w.system.command.effort[0] == 2.0
    assert w.system.state.velocity[0] != 0.0

    block = parse_ros2_control("""<robot name="planar"><ros2_control name="planar" type="system">
      <hardware><plugin>mock_components/GenericSystem</plugin></hardware>
      <joint name="j1"><command_interface name="position"/><state_interface name="position"/></joint>
    </ros2_control></robot>""", "<block>")
    hw = SimulatorSystem(Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT),
                         block).command
    with pytest.raises(CommandRejected, match=r"joint_command: the hardware does not export the command "
                                              r"interface\(s\) \['j1/velocity'\]: joint 'j1' exports the command "
                                              r"interfaces \['position'\]"):
        validate_joint_command(limits, hw, ["finger_joint", "j1"], [], [0.1, 0.1])
    assert validate_joint_command(limits, hw, ["finger_joint"], [], [0.1]).velocity.tolist() == [0.1]


CLAIMS_STATES = """controller_manager:
  ros__parameters:
    update_rate: 1000
    arm:
      type: joint_trajectory_controller/JointTrajectoryController
    writer:
      type: test_controllers/RowWriter
arm:
  ros__parameters:
    joints: [j1, j2]
    command_interfaces: [position]
    state_interfaces: %s
writer:
  ros__parameters:
    joint: finger_joint
    states: %s
"""


@pytest.mark.parametrize("arm_states, writer_states, message", [
    ("[position, velocity, acceleration]", "[finger_joint/position]",
     "Unable to activate controller 'arm' since the state interface 'j1/acceleration' is not available. ('j1' "
     "exports the state interfaces ['effort', 'position', 'velocity'])"),
    ("[position, velocity]", "[finger_joint/position, fingr_joint/velocity]",
     "Unable to activate controller 'writer' since the state interface 'fingr_joint/velocity' is not available. "
     "(no joint or sensor 'fingr_joint')"),
])
def test_a_claimed_state_interface_the_system_does_not_export_fails_at_start_up(urdf, tmp_path, row_writer,
                                                                              arm_states, writer_states, message):
    """A controllers file whose controller claims a state interface the System does not export (the trajectory
    controller's ``acceleration`` state interface; a misspelled joint) is a start-up ConfigError naming the file,
    with ros2_control's controller_manager message ("Unable to activate controller '{}' since the state interface
    '{}' is not available.", controller_manager.cpp) and the reason; loaded inactive, the controller's activation
    is refused so (STRICT) or skipped (BEST_EFFORT) and the world steps on. The same file with exported claims
    starts, both controllers active, and steps."""
    path = tmp_path / "controllers.yaml"
    path.write_text(CLAIMS_STATES % (arm_states, writer_states))
    sim = Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit", time_step=DT)
    system = SimulatorSystem(sim)
    limits = JointLimits.from_model(sim.model)
    with pytest.raises(ConfigError) as exc:
        ControllerManager(system, read_controllers_file(path), [], transport=Reports(), limits=limits)
    assert str(exc.value) == f"{path}: {message}"

    name = message.split("'")[1]
    cm = ControllerManager(system, read_controllers_file(path), [name], transport=Reports(), limits=limits)
    ok, msg = cm.switch([name], [], STRICT)
    assert not ok and message in msg and not cm.controllers[name].active
    ok, msg = cm.switch([name], [], BEST_EFFORT)
    assert ok and f"skipped: {message}" in msg and not cm.controllers[name].active
    loop = SteppingLoop(system, cm, real_time_factor=0.0)
    for _ in range(5):
        assert loop.step_now().ok

    path.write_text(CLAIMS_STATES % ("[position, velocity]", "[finger_joint/position, finger_joint/effort]"))
    cm = ControllerManager(SimulatorSystem(Simulator({"robot": {"urdf": str(urdf)}}, engine="semi_implicit",
                                                     time_step=DT)),
                           read_controllers_file(path), [], transport=Reports(), limits=limits)
    assert cm.controllers["arm"].active and cm.controllers["writer"].active
