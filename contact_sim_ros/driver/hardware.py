"""The simulated robot as ros2_control hardware: per-joint command and state interfaces and the claims of the
command interfaces (no rclpy).

Every actuated joint has the command interfaces ``position``, ``velocity`` and ``effort`` (those its
<ros2_control> block lists, if any; the hardware exports no ``effort`` when the engine ignores efforts: the
quasistatic engines) and the state interfaces of the same names (rad or m, rad/s or m/s, N*m or N). A command interface holds its last written
value, as a hardware component's command buffer does. The joint's *mode* is the kind of its last command:

* position: PD to the position target (velocity target as feed-forward for the D term);
* velocity: damping to the velocity target;
* effort: the effort alone (or on top of the gravity compensation g(q) when written with
  ``gravity_compensated``: the effort joint_trajectory_controller, as the Franka's torque interface).

Writers: the controllers (from the stepping thread, in their ``update``) and the hardware-level
``joint_command`` topic (topic_based_ros2_control's convention). Joints that the ``<ros2_control>`` block marks
``mimic`` of another joint (``followers``) are driven with their leader by the controllers that command a single
gripper joint (``multiplier * leader + offset``), as the WSG 50's one motor drives both fingers. Claims record which controller owns which command interface
(``list_hardware_interfaces``, conflict checks of ``switch_controller``); a controller writes only the rows it
claimed, through the LoanedCommandInterfaces the controller manager gives it on activation
(loaned_interfaces.py).

:class:`StateInterfaces` is what controllers read: the joints' position, velocity and effort at the sim time
``time``, and the force/torque sensors' wrenches. The hardware System (system.py) fills them in ``read()``; a
value is computed on its first use in a cycle, so an interface no controller reads costs nothing.
"""

from __future__ import annotations

import weakref

import numpy as np

from .command_validation import JointCommand

POSITION, VELOCITY, EFFORT = 0, 1, 2
COMMAND_INTERFACES = ("position", "velocity", "effort")
STATE_INTERFACES = ("position", "velocity", "effort")


class JointCommandInterfaces:
    """Command buffers of the actuated joints, in ``MultibodyModel.joint_names`` order."""

    def __init__(self, joint_names, hardware_info=None, no_effort: str = ""):
        """``no_effort``: why the hardware exports no effort command interface (the engine ignores efforts; ''
        it exports those of the <ros2_control> block, every joint's position, velocity and effort without one)."""
        self.joint_names = tuple(joint_names)
        self.index = {name: i for i, name in enumerate(self.joint_names)}
        n = len(self.joint_names)
        self.mode = np.zeros(n, dtype=np.int64)
        # position, velocity, effort: the rows of one block (``values``: the compiled passes take it whole,
        # driver/control_kernels.py)
        self.values = np.zeros((3, n))
        self.position, self.velocity, self.effort = self.values
        # bool rows (``flags``): effort-mode joints whose effort is raw (False: the hardware adds its gravity
        # compensation g(q), as the FR3 / Panda under libfranka's torque control and the LBR's FRI torque mode
        # do); held joints (``snap``: the loop's rate limit starts from the held position)
        self.flags = np.zeros((2, n), dtype=bool)
        self.effort_raw, self.snap = self.flags
        self.effort_raw[:] = True
        self.changed = True
        self.snapped = False                  # snap has a joint set (the loop clears both)
        self.claims: dict[str, str] = {}                 # "joint/interface" -> controller name
        # actuation limit (N*m or N) of each joint below its URDF effort limit (a gripper's force setting); nan:
        # the URDF limit. ``limits_changed``: the System hands them to the simulator at its next write()
        self.effort_limit = np.full(n, np.nan)
        self.limits_changed = False
        followers, leaders, mult, off = [], [], [], []
        if hardware_info is not None:
            for j in hardware_info.joints:
                lead = j.mimic
                if lead and lead != "urdf" and j.name in self.index and lead in self.index:
                    followers.append(self.index[j.name])
                    leaders.append(self.index[lead])
                    mult.append(j.multiplier)
                    off.append(j.offset)
        self.mimic_follower = np.array(followers, dtype=int)
        self.mimic_leader = np.array(leaders, dtype=int)
        self._mimic_mult = np.array(mult)
        self._mimic_off = np.array(off)
        self.hardware_info = hardware_info
        self.no_effort = no_effort
        # the command interfaces the hardware exports: what a controller may claim (list_hardware_interfaces)
        self.exported = frozenset(self.available_command_interfaces())

    # ---------------------------------------------------------------------------------------- writing

    def indices(self, names) -> np.ndarray:
        return np.fromiter((self.index[n] for n in names), dtype=int, count=len(names))

    def hold(self, idx: np.ndarray, q: np.ndarray) -> None:
        """Position mode at the measured positions ``q`` (of the joints ``idx``), zero velocity."""
        self.mode[idx] = POSITION
        self.position[idx] = q
        self.velocity[idx] = 0.0
        self.effort[idx] = 0.0
        self.snap[idx] = True
        self.snapped = True
        self._written()

    def write_position(self, idx, position, velocity=None) -> None:
        self.mode[idx] = POSITION
        self.position[idx] = position
        self.velocity[idx] = 0.0 if velocity is None else velocity
        self.effort[idx] = 0.0
        self._written()

    def write_velocity(self, idx, velocity) -> None:
        self.mode[idx] = VELOCITY
        self.velocity[idx] = velocity
        self.effort[idx] = 0.0
        self._written()

    def write_effort(self, idx, effort, gravity_compensated: bool = False) -> None:
        """Effort mode (N*m or N); ``gravity_compensated``: the hardware adds g(q) to it (when the node's
        ``gravity_compensation`` is on), as the Franka's and the LBR's torque interfaces do."""
        self.mode[idx] = EFFORT
        self.effort[idx] = effort
        self.effort_raw[idx] = not gravity_compensated
        self.velocity[idx] = 0.0
        self._written()

    def write_command(self, c: JointCommand) -> None:
        """A validated JointCommand (joint_command topic or a forward controller)."""
        idx = c.indices
        if c.position is not None:
            self.mode[idx] = POSITION
            self.position[idx] = c.position
        elif c.velocity is not None:
            self.mode[idx] = VELOCITY
        else:
            self.mode[idx] = EFFORT
            self.effort_raw[idx] = True
        self.velocity[idx] = 0.0 if c.velocity is None else c.velocity
        self.effort[idx] = 0.0 if c.effort is None else c.effort
        self._written()

    def _written(self) -> None:
        self.changed = True

    def limit_effort(self, idx, limit: float | None) -> None:
        """Limit the actuation of the joints ``idx`` to ``limit`` (N*m or N; None or 0: their URDF limit)."""
        self.effort_limit[idx] = limit if limit else np.nan
        self.limits_changed = True

    def followers(self, leader: int) -> list[tuple[int, float, float]]:
        """(index, multiplier, offset) of the joints the <ros2_control> block marks mimic of ``leader``."""
        return [(int(f), float(m), float(o)) for f, lead, m, o in
                zip(self.mimic_follower, self.mimic_leader, self._mimic_mult, self._mimic_off) if lead == leader]

    # ---------------------------------------------------------------------------------------- claims

    def interface_names(self, joints=None, interfaces=COMMAND_INTERFACES) -> list[str]:
        joints = self.joint_names if joints is None else joints
        return [f"{j}/{i}" for j in joints for i in interfaces]

    def available_command_interfaces(self) -> list[str]:
        """The command interfaces the hardware exports: what the <ros2_control> block offers (every joint's
        position/velocity/effort without one), without the efforts when ``no_effort`` says why."""
        info = self.hardware_info
        out = []
        for name in self.joint_names:
            j = info.joint(name) if info is not None else None
            kinds = COMMAND_INTERFACES if j is None or not j.command_interfaces else j.command_interfaces
            out += [f"{name}/{i}" for i in kinds if not (i == "effort" and self.no_effort)]
        return out

    def unavailable_reason(self, name: str) -> str:
        """Why the command interface ``name`` ("joint/interface") is not exported ('' if it is)."""
        if name in self.exported:
            return ""
        joint, _, kind = name.rpartition("/")
        if joint not in self.index:
            return f"no actuated joint '{joint}'"
        if kind == "effort" and self.no_effort:
            return self.no_effort
        offered = [n.rpartition("/")[2] for n in self.exported if n.rpartition("/")[0] == joint]
        return f"joint '{joint}' exports the command interfaces {sorted(offered)}"

    def available_state_interfaces(self) -> list[str]:
        info = self.hardware_info
        out = self.interface_names(interfaces=STATE_INTERFACES)
        if info is not None:
            for s in info.sensors:
                out += [f"{s.name}/{i}" for i in s.state_interfaces]
        return out


class StateInterfaces:
    """State interfaces of the actuated joints (``joint_names`` order) and of the sensors (sensors/base.Sensor),
    as the hardware System's last ``read()`` left them: ``time`` (s, sim time), ``position`` (rad or m),
    ``velocity`` (rad/s or m/s), ``effort`` (the simulated actuator's force, N*m or N), ``reading(sensor)`` (the
    sensor's ``values`` in its ``interfaces`` order, e.g. a force/torque sensor's N, N*m in the sensor frame).
    ``period`` is the time step (s). The arrays are computed on first use after a read (one array each, refilled
    in place: read them, do not keep them across cycles)."""

    def __init__(self, joint_names, time_step: float):
        self.joint_names = tuple(joint_names)
        self.index = {name: i for i, name in enumerate(self.joint_names)}
        n = len(self.joint_names)
        self.period = float(time_step)
        self.time = 0.0
        self.values = np.zeros((3, n))    # rows position, velocity, effort (filled on first use: read them by name)
        self._position, self._velocity, self._effort = self.values
        self._fresh = [False, False, False]
        self._system = None         # the System that fills these interfaces (weak reference)
        self._sensors: dict = {}    # key -> sensors/base.Sensor
        self._measured: set = set()  # keys of the sensors measured since the last read

    def connect(self, system) -> None:
        """(the System) ``system.fill_state(kind, out)`` fills ``out`` with the joints' kind 0 position, 1
        velocity, 2 effort (``system.fill_motion(values)``: rows 0 and 1 of ``values`` at once);
        ``system.make_sensor(spec)`` builds a sensor for its model and ``system.measure_sensor(sensor)`` fills a
        sensor's values from the current state. Held by a weak reference: the System owns these interfaces (no
        reference cycle)."""
        self._system = weakref.proxy(system)

    def add_sensor(self, key: str, spec):
        """The sensor of ``spec`` (sensors/base.SensorSpec; built by the System for its model through the sensor
        registry) whose state interfaces ``reading(key)`` gives; returns it. ConfigError: unknown type, links or
        parameters."""
        sensor = self._sensors[key] = self._system.make_sensor(spec)
        return sensor

    def sensors(self) -> list:
        """The sensors added (the System rebuilds them with a new model)."""
        return list(self._sensors.values())

    def invalidate(self, time: float) -> None:
        """(the System's read) a new state at ``time`` (s)."""
        self.time = time
        self._fresh[0] = self._fresh[1] = self._fresh[2] = False
        if self._measured:
            self._measured.clear()

    def _get(self, kind: int, out: np.ndarray) -> np.ndarray:
        if not self._fresh[kind]:
            self._system.fill_state(kind, out)
            self._fresh[kind] = True
        return out

    def motion(self) -> np.ndarray:
        """``values`` (rows position, velocity, effort) with the position and velocity rows filled."""
        fresh = self._fresh
        if not (fresh[0] or fresh[1]):            # (the per-update case: both rows in one pass)
            self._system.fill_motion(self.values)
            fresh[0] = fresh[1] = True
        elif not (fresh[0] and fresh[1]):
            if not fresh[0]:
                self._system.fill_state(0, self._position)
                fresh[0] = True
            if not fresh[1]:
                self._system.fill_state(1, self._velocity)
                fresh[1] = True
        return self.values

    @property
    def position(self) -> np.ndarray:
        return self._get(0, self._position)

    @property
    def velocity(self) -> np.ndarray:
        return self._get(1, self._velocity)

    @property
    def effort(self) -> np.ndarray:
        return self._get(2, self._effort)

    def has_sensor(self, name: str) -> bool:
        return name in self._sensors

    def reading(self, key: str) -> np.ndarray:
        """The state interfaces of sensor ``key`` (its ``values``), measured on the first read after ``read()``."""
        sensor = self._sensors[key]
        if key not in self._measured:
            self._system.measure_sensor(sensor)
            self._measured.add(key)
        return sensor.values

    def wrench(self, key: str) -> np.ndarray:
        """The wrench (fx, fy, fz, tx, ty, tz; N, N*m in its frame) the force/torque sensor ``key`` measures."""
        return self.reading(key)
