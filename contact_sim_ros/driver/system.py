"""The simulated robot as a ros2_control hardware System (as mujoco_ros2_control's MujocoSystemInterface): the
one seam between the Simulator and the emulated controllers (no rclpy).

* ``read()``: the state interfaces (hardware.StateInterfaces) take the Simulator's state after a step (joint
  positions, velocities, actuator efforts at the sim time; the sensors' readings, sensors/base.Sensor: each
  measured on the first read of its state interfaces after the read, so that a sensor nobody reads costs nothing);
* controllers ``update(time, period)`` read state interfaces and write command interfaces
  (hardware.JointCommandInterfaces, through the rows loaned to them: loaned_interfaces.py); the command
  interfaces exported are the ones the engine accepts (no ``effort`` where it ignores efforts);
* ``write()``: the command interfaces go to the Simulator (``Simulator.set_joint_command_arrays``), through what
  a real robot's driver adds between the controller and the motors: the position targets rate-limited to the
  joints' velocity limits (a driver's interpolator: the comment after ``_push_targets``) and the gravity
  feed-forward g(q) added to the effort of position- and velocity-controlled joints (as the iiwa's and Panda's
  own joint controllers do; sim/gravity_feed_forward.py) and of effort-mode joints written as gravity
  compensated (the effort trajectory controller: the Panda's and LBR's torque interfaces compensate gravity),
  and the joints' actuation limits (a gripper's force setting);
* ``step()``: one step of the Simulator (the velocity before it kept for the sensors' accelerations).

Commands that bypass the controllers (the hardware-level ``joint_command`` topic, forward controllers) arrive from
transport threads through ``commands`` (:class:`CommandBuffer`, thread-safe) and are written into the command
interfaces at the start of a cycle (``take_commands``).
"""

from __future__ import annotations

import threading

import numpy as np

from ..sensors.base import make_sensor
from ..sim.gravity_feed_forward import GravityFeedForward
from . import control_kernels as kernels
from .command_validation import JointCommand
from .hardware import JointCommandInterfaces, StateInterfaces


class CommandBuffer:
    """Lock-protected hand-over of validated commands from transport threads to the stepping thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._commands: list[JointCommand] = []
        self.pending = False

    def push_command(self, command: JointCommand) -> None:
        with self._lock:
            self._commands.append(command)
            self.pending = True

    def drain(self) -> list[JointCommand]:
        with self._lock:
            commands = self._commands
            self._commands = []
            self.pending = False
        return commands


class SimulatorSystem:
    """The Simulator as the robot's hardware (module docstring). ``hardware_info``: the <ros2_control> blocks
    (mimic joints, sensors, offered interfaces); ``gravity_compensation``: add g(q) to the effort of position- and
    velocity-controlled joints. ``commands``: the buffer the transports push into (built before the System:
    loop.LoopLink; a new one if None)."""

    def __init__(self, sim, hardware_info=None, gravity_compensation: bool = True,
                 commands: CommandBuffer | None = None):
        self.sim = sim
        self.dt = float(sim.time_step)
        self.joint_names = tuple(sim.model.joint_names)
        n = len(self.joint_names)
        self.commands = commands if commands is not None else CommandBuffer()   # the transports' (loop.LoopLink)
        engine = sim.engine        # the command interfaces it accepts are the ones exported
        self.command = JointCommandInterfaces(
            self.joint_names, hardware_info,
            no_effort="" if engine.accepts_effort_commands else
            f"engine '{engine.name}' ignores effort commands: its joints follow position or velocity commands")
        self.state = StateInterfaces(self.joint_names, self.dt)
        self.state.connect(self)
        self.v_prev = np.array(sim.v, dtype=float)   # velocity before the last step (for accelerations)
        self.gravity_compensation = bool(gravity_compensation)
        self.gravity_tolerance = 1e-3   # N*m or N
        # g(q) of the actuated joints on the robots alone (sim/gravity_feed_forward.py); None: nothing to hold
        self._gravity = GravityFeedForward.of(sim.model) if self.gravity_compensation else None
        # rate limit of position targets: |q_sent - q_sent_prev| <= v_max * dt per step
        self.ramp_acceleration_time = 0.25   # s to reach the profile's speed on a jump
        self.ramp_speed_fraction = 0.95      # of the velocity limit: room for the PD's overshoot (a few %)
        v_max = np.asarray(sim.model.velocity_limit, dtype=float)
        v_max = np.where(np.isfinite(v_max) & (v_max > 0), v_max, np.inf)
        # the per-step state of the rate limit and the gravity feed-forward as a float block, a bool block and an
        # int status (driver/control_kernels.py: rows Q_SENT ... EFFORT_SENT, masks POS ... CMD_VELOCITY, status
        # RAMPING, WAS_ALL_POS, ANY_EFFORT); the rows this class reads are views by name below
        self._rows = np.zeros((kernels.N_ROWS, n))
        self._masks = np.zeros((kernels.N_MASKS, n), dtype=bool)
        self._status = np.zeros(3, dtype=np.int64)
        rows = self._rows
        rows[kernels.DQ_MAX] = v_max * self.dt
        rows[kernels.V_MAX] = self.ramp_speed_fraction * v_max
        a_max = rows[kernels.V_MAX] / self.ramp_acceleration_time
        rows[kernels.TWO_A], rows[kernels.A_DT] = 2.0 * a_max, a_max * self.dt
        self._q_sent, self._v_ramp = rows[kernels.Q_SENT], rows[kernels.V_RAMP]     # (the rows read here)
        self._g, self._g_applied, self._effort_sent = (rows[kernels.G], rows[kernels.G_APPLIED],
                                                       rows[kernels.EFFORT_SENT])
        self._cmd_position = self._masks[kernels.CMD_POSITION]    # joints handed over in position mode
        self._cmd_velocity = self._masks[kernels.CMD_VELOCITY]    # ... in velocity mode
        self._masks[kernels.WAS_POS] = True                       # position mode at the last rate limiting
        self._status[kernels.WAS_ALL_POS] = 1                     # ... of every joint
        self._limit_applied = np.full(n, np.nan)     # effort limits handed to the simulator (nan: URDF's)
        self.read()
        self._init_targets()

    # ------------------------------------------------------------------ the seam

    def read(self) -> None:
        """The state interfaces take the Simulator's current state (values computed on first use)."""
        self.state.invalidate(self.sim.t)

    def fill_state(self, kind: int, out: np.ndarray) -> None:
        """(StateInterfaces) the joints' position (kind 0), velocity (1) or effort (2) into ``out``."""
        sim, m = self.sim, self.sim.model
        if kind == 0:                     # (the ndarray methods: np.take's dispatch costs ~1 us per call)
            sim.q.take(m.joint_q_index, out=out)
        elif kind == 1:
            sim.v.take(m.joint_v_index, out=out)
        else:
            out[:] = sim.joint_efforts()

    def fill_motion(self, values: np.ndarray) -> None:
        """(StateInterfaces) the joints' positions and velocities into rows 0 and 1 of ``values`` in one compiled
        pass (``fill_state`` kinds 0 and 1 together: a monitored trajectory reads both every update)."""
        sim = self.sim
        m = sim.model
        kernels.fill_motion(sim.q, sim.v, m.joint_q_index, m.joint_v_index, values)

    def make_sensor(self, spec):
        """(StateInterfaces) The sensor of ``spec`` (sensors/base.SensorSpec) on the Simulator's model."""
        return make_sensor(spec, self.sim.model)

    def measure_sensor(self, sensor) -> None:
        """(StateInterfaces) ``sensor`` (sensors/base.Sensor) measures the current state into its values."""
        sensor.measure(self.sim, self.v_prev)

    @property
    def needs_write(self) -> bool:
        """A write can change what the Simulator has: new commands, gravity to follow, a ramp in progress."""
        return self.commands.pending or self._gravity is not None or self._ramping or self.command.changed

    def take_commands(self) -> list[JointCommand]:
        """The commands handed over since the last cycle, written into the command interfaces (latest per joint
        wins); returned so that the controllers can stop commanding their joints."""
        commands = self.commands.drain()
        for c in commands:
            self.command.write_command(c)
        return commands

    def write(self) -> None:
        """The command interfaces to the Simulator (module docstring)."""
        hw = self.command
        if hw.limits_changed:
            hw.limits_changed = False
            for j in np.flatnonzero(~((hw.effort_limit == self._limit_applied)
                                      | (np.isnan(hw.effort_limit) & np.isnan(self._limit_applied)))):
                limit = float(hw.effort_limit[j])
                self.sim.set_effort_limit(self.joint_names[j], None if np.isnan(limit) else limit)
                self._limit_applied[j] = limit
        changed = hw.changed
        hw.changed = False
        self._push_targets(changed)

    def step(self):
        """One step of the Simulator; returns its StepReport."""
        np.copyto(self.v_prev, self.sim.v)
        report = self.sim.step()
        self.read()
        return report

    def reset(self) -> None:
        """The Simulator back to its initial state, every joint holding its initial position."""
        self.sim.reset()
        self.commands.drain()
        self.read()
        self._init_targets()
        np.copyto(self.v_prev, self.sim.v)

    def replace_simulator(self, sim) -> None:
        """(between two steps) Swap in ``sim`` (same robot, another model: Simulator.carry_over took the state):
        the per-model scratch and the sensors are rebuilt."""
        self.sim = sim
        self._gravity = GravityFeedForward.of(sim.model) if self.gravity_compensation else None
        self.v_prev = np.array(sim.v, dtype=float)
        for sensor in self.state.sensors():      # the robot's links are unchanged: cannot fail
            sensor.rebuild(sim.model)
        self.read()

    # ------------------------------------------------------------------ joint targets

    def _init_targets(self):
        """Every actuated joint holds its current position (the Simulator's state after reset)."""
        hw = self.command
        hw.hold(np.arange(len(self.joint_names)), self.state.position)
        self._g_applied[:] = np.inf
        self._g[:] = 0.0                        # g(q) on the actuated joints (N*m or N)
        self._effort_sent[:] = 0.0              # effort + g handed to the simulator
        self._masks[kernels.IS_EFFORT] = False  # raw effort mode: no g
        self._status[kernels.ANY_EFFORT] = 0
        self._q_sent[:] = hw.position           # position targets handed to the simulator
        self._status[kernels.RAMPING] = 0

    @property
    def _ramping(self) -> bool:
        """A joint is on its rate-limit profile (the targets move without a new command)."""
        return bool(self._status[kernels.RAMPING])

    def _push_targets(self, changed: bool):
        """Hand the targets to the simulator: always after a command or a controller's write; for gravity
        compensation only when g(q) moved by more than ``gravity_tolerance`` (N*m or N) since it was last
        applied (Simulator.set_joint_command_arrays). The position targets are rate limited (the comment
        below). One compiled pass after g(q), the hand-over to the Simulator included
        (driver/control_kernels.write_targets: push_targets, then Simulator.set_joint_command_arrays' kernel);
        allocation-free."""
        hw = self.command
        gravity = self._gravity
        if gravity is not None:
            gravity.compute(self.sim.q, self._g)
        snapped = hw.snapped
        if snapped and (changed or self._status[kernels.RAMPING]):
            hw.snapped = False                  # (the rate limit clears hw.snap)
        sim = self.sim
        code = kernels.write_targets(hw.mode, hw.values, hw.flags, sim.q, sim.model.joint_q_index, self._rows,
                                     self._masks, self._status, changed, snapped, gravity is not None,
                                     self.gravity_tolerance, self.dt, *sim.joint_command_buffers())
        if code > kernels.COMMANDS_SET:
            self.refuse_hand_over()

    def refuse_hand_over(self) -> None:
        """After a compiled write that handed nothing over (a non-finite target or a pure effort the engine
        ignores): raise the hand-over's ConfigError (Simulator.set_joint_command_arrays with the same arrays:
        position mode: target q_sent with the ramp's velocity feed-forward; velocity mode: v_ramp; every joint its
        effort, with g when there is a gravity feed-forward)."""
        self.sim.set_joint_command_arrays(self._cmd_position, self._cmd_velocity, self._q_sent, self._v_ramp,
                                          self._effort_sent if self._gravity is not None else self.command.effort)

    def compiled_write(self) -> tuple:
        """(driver/control_period.ControlPeriod) What a compiled write needs: (the gravity feed-forward or None,
        the row its g(q) goes to before the write, the arguments of control_kernels.write_targets from ``rows`` to
        ``dt``: the rate limit's and the feed-forward's blocks, whether g is added, its tolerance (N*m or N), the
        time step (s)). The write's own flags (``command.changed``, ``snapped``, ``limits_changed``) are the
        caller's to honour."""
        gravity = self._gravity
        return gravity, self._g, (self._rows, self._masks, self._status, gravity is not None,
                                  self.gravity_tolerance, self.dt)

    # The rate limit (in push_targets' compiled pass): the position targets handed to the simulator follow the
    # commanded ones (``hw.position``) within the URDF velocity limits, as a real driver's interpolator does: a
    # target within v_max * dt of the last one sent is taken as it is (trajectories below the limit are not
    # delayed); a farther one (a jump) is reached on a trapezoidal profile at 95 % of v_max,
    # ``ramp_acceleration_time`` s to reach that speed, with the profile's speed as velocity feed-forward (the PD
    # with the presets' gains overshoots a sudden ramp speed by 10-20 %, this profile by < 5 %). A joint that was
    # in velocity or effort mode, or that a controller holds (``hw.snap``), starts from its measured / held
    # position.
