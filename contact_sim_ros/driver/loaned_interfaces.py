"""What a controller holds of the hardware's command interfaces (no rclpy), as ros2_control's controller manager
hands a controller ``hardware_interface::LoanedCommandInterface`` objects for exactly the interfaces it claimed
(``assign_interfaces`` on activation, ``release_interfaces`` on deactivation):

* :class:`LoanedCommandInterfaces`: the write side, built by the controller manager when it activates a controller
  (or adds a hardware device) over exactly the (joint, interface) pairs it claims, released when it deactivates it.
  Its write methods are JointCommandInterfaces' restricted to those pairs: ``write_position`` needs the rows'
  ``position`` claimed, ``write_velocity`` their ``velocity``, ``write_effort`` their ``effort``; a write naming
  another joint, or another interface of a claimed joint, raises :class:`InterfaceNotClaimed` naming the
  interfaces (in ``update`` the controller manager then deactivates the controller, as it does on an update
  returning ERROR), and so does any write after the release. The index arrays a controller builds at
  configuration or when it accepts a goal are checked on their first write and remembered by identity, so that
  the per-update writes allocate nothing (a controller does not change an index array in place; they are not made
  read-only, which would give the compiled passes taking them another signature).
* :class:`CommandInterfacesView`: the read side every controller has in its context (``ctx.command``): joint
  names and indices, the mimic joints, the <ros2_control> block, the exported command interfaces and who claims
  them, and the commanded values as read-only arrays. It has no write method.

A row's *mode* follows its last write (hardware.JointCommandInterfaces). The drive's own operations (``hold``,
``limit_effort``) need any claimed interface of the row; ``press`` is a force-limited gripper's grasp force behind
its position interface (the gripper presses on a stalled object in effort mode through its position claim, as its
firmware does).
"""

from __future__ import annotations

import threading
from types import MappingProxyType

import numpy as np

from .command_validation import JointCommand
from .hardware import COMMAND_INTERFACES, EFFORT, POSITION, VELOCITY, JointCommandInterfaces

__all__ = ["CommandInterfacesView", "InterfaceNotClaimed", "LoanedCommandInterfaces"]

_CHECKED_CAPACITY = 32      # index objects remembered per loan and kind (a trajectory controller adds one per goal)
_ANY = len(COMMAND_INTERFACES)     # check(): any claimed interface of the row


class InterfaceNotClaimed(RuntimeError):
    """A write to a command interface the controller did not claim, or after its interfaces were released."""


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


class CommandInterfacesView:
    """Read-only view of the hardware's command interfaces (``hw``, hardware.JointCommandInterfaces): what a
    controller reads in its context (``ctx.command``). ``position`` (rad or m), ``velocity`` (rad/s or m/s),
    ``effort`` (N*m or N), ``mode``, ``values`` (rows position, velocity, effort) and ``effort_limit`` are
    read-only views of the live buffers; ``claims`` ("joint/interface" -> controller name) and ``index`` live
    read-only mappings."""

    def __init__(self, hw: JointCommandInterfaces):
        self.joint_names: tuple[str, ...] = hw.joint_names
        self.index = MappingProxyType(hw.index)
        self.hardware_info = hw.hardware_info
        self.exported: frozenset[str] = hw.exported
        self.claims = MappingProxyType(hw.claims)
        self.values = _read_only(hw.values)
        self.position, self.velocity, self.effort = self.values
        self.mode = _read_only(hw.mode)
        self.effort_limit = _read_only(hw.effort_limit)
        self.mimic_follower = _read_only(hw.mimic_follower)
        self.mimic_leader = _read_only(hw.mimic_leader)
        self._hw = hw

    def indices(self, names) -> np.ndarray:
        """The indices of the joints ``names`` (a new int array)."""
        return self._hw.indices(names)

    def followers(self, leader: int) -> list[tuple[int, float, float]]:
        return self._hw.followers(leader)

    def available_command_interfaces(self) -> list[str]:
        return self._hw.available_command_interfaces()

    def available_state_interfaces(self) -> list[str]:
        return self._hw.available_state_interfaces()

    def unavailable_reason(self, name: str) -> str:
        return self._hw.unavailable_reason(name)


class LoanedCommandInterfaces:
    """The command interfaces ``names`` ("joint/interface") of the hardware ``hw`` loaned to ``owner`` (a
    controller's name), as ros2_control's LoanedCommandInterface is one interface: each write method is restricted
    to the (joint, interface) pairs claimed. ``write_position`` (with its velocity feed-forward, part of position
    mode) and ``buffers`` need ``<joint>/position``, ``write_velocity`` ``<joint>/velocity``, ``write_effort``
    ``<joint>/effort``; a controller that claimed ``j1/position`` writing ``j1/effort`` raises
    InterfaceNotClaimed naming ``j1/effort``. Three operations are the simulated drive's rather than an interface's
    and need any claimed interface of the row: ``hold`` (the drive holds the measured position: what the hardware
    does once a controller stops commanding, the effort and velocity trajectory controllers' hold on (de)activation),
    ``limit_effort`` (the actuation limit, a gripper's force setting) and ``press`` (a force-limited gripper's grasp
    force behind its position interface, see ``press``). ``commands``: the System's CommandBuffer, for the commands
    a transport thread hands over (``push_command``). ``rows``: the claimed joints' indices (read-only)."""

    def __init__(self, hw: JointCommandInterfaces, commands, names, owner: str):
        self.names: tuple[str, ...] = tuple(names)
        self.owner = owner
        joints = list(dict.fromkeys(n.rpartition("/")[0] for n in self.names))
        self.rows = _read_only(hw.indices(joints))
        n = len(hw.joint_names)
        # claimed[kind, joint]: (joint, interface) claimed, kind POSITION, VELOCITY, EFFORT; row ANY: any of them
        self._claimed = np.zeros((len(COMMAND_INTERFACES) + 1, n), dtype=bool)
        for name in self.names:
            joint, _, interface = name.rpartition("/")
            if interface in COMMAND_INTERFACES:
                self._claimed[COMMAND_INTERFACES.index(interface), hw.index[joint]] = True
        self._claimed[_ANY, self.rows] = True
        self._hw = hw
        self._commands = commands
        # per kind: id -> index object checked (held: its id stays its own)
        self._checked: tuple[dict[int, object], ...] = tuple({} for _ in range(len(COMMAND_INTERFACES) + 1))
        self._lock = threading.Lock()           # push_command (transport threads) against release
        self.released = False

    # ------------------------------------------------------------------------------------------ checks

    def _refuse(self, idx, kind: int) -> InterfaceNotClaimed:
        if self.released:
            return InterfaceNotClaimed(f"controller '{self.owner}': its command interfaces were released (it is "
                                       f"not active): write refused")
        claimed = np.atleast_1d(self._claimed[kind][idx])
        rows = np.atleast_1d(np.arange(self._claimed.shape[1])[idx])
        interface = COMMAND_INTERFACES[POSITION if kind == _ANY else kind]
        names = [f"{self._hw.joint_names[int(j)]}/{interface}" for j in rows[~claimed]]
        return InterfaceNotClaimed(f"controller '{self.owner}' writes the command interface(s) {names} it did not "
                                   f"claim; it claims {list(self.names)}")

    def check(self, idx, kind: int = _ANY) -> None:
        """InterfaceNotClaimed unless the interface ``kind`` (hardware.POSITION, VELOCITY or EFFORT; default:
        any) of every row of ``idx`` (an int, an index array, a slice or a list) is claimed and the loan is not
        released. An index array or slice is remembered once checked (by identity, per kind; the release forgets
        them all)."""
        checked = self._checked[kind]
        if id(idx) in checked:            # the per-update case: one look-up
            return
        if self.released:
            raise self._refuse(idx, kind)
        if type(idx) is int or isinstance(idx, np.integer):
            if not self._claimed[kind, idx]:
                raise self._refuse(idx, kind)
            return
        if not self._claimed[kind][idx].all():
            raise self._refuse(idx, kind)
        if isinstance(idx, (np.ndarray, slice)):
            if len(checked) >= _CHECKED_CAPACITY:
                checked.clear()
            checked[id(idx)] = idx

    # ------------------------------------------------------------------------------------------ writes

    def write_position(self, idx, position, velocity=None) -> None:
        """Position mode at ``position`` (rad or m) with the velocity feed-forward ``velocity`` (rad/s or m/s):
        ``<joint>/position`` claimed."""
        self.check(idx, POSITION)
        self._hw.write_position(idx, position, velocity)

    def write_velocity(self, idx, velocity) -> None:
        """Velocity mode at ``velocity`` (rad/s or m/s): ``<joint>/velocity`` claimed."""
        self.check(idx, VELOCITY)
        self._hw.write_velocity(idx, velocity)

    def write_effort(self, idx, effort, gravity_compensated: bool = False) -> None:
        """Effort mode (N*m or N): ``<joint>/effort`` claimed; ``gravity_compensated``: the hardware adds g(q)
        (JointCommandInterfaces)."""
        self.check(idx, EFFORT)
        self._hw.write_effort(idx, effort, gravity_compensated)

    def hold(self, idx, q) -> None:
        """The drive holds the measured positions ``q`` (rad or m; position mode, zero velocity): any claimed
        interface of the rows."""
        self.check(idx)
        self._hw.hold(idx, q)

    def press(self, idx, effort) -> None:
        """A force-limited gripper presses with ``effort`` (N*m or N) on what stalled it: the grasp force its
        firmware applies behind its position interface (``<joint>/position`` claimed), effort mode on the
        hardware until the next position write."""
        self.check(idx, POSITION)
        self._hw.write_effort(idx, effort)

    def limit_effort(self, idx, limit: float | None) -> None:
        """The actuation limit of the rows ``idx`` (N*m or N; None or 0: their URDF limit): any claimed interface
        of the rows."""
        self.check(idx)
        self._hw.limit_effort(idx, limit)

    def buffers(self, idx) -> tuple[np.ndarray, np.ndarray]:
        """(mode, values) of the hardware for a compiled pass that writes the rows ``idx`` in position mode in
        place (``<joint>/position`` claimed); call ``written()`` after it wrote."""
        self.check(idx, POSITION)
        return self._hw.mode, self._hw.values

    def written(self) -> None:
        """The rows were written in place (``buffers``): the System hands them to the simulator at its next
        write."""
        self._hw.changed = True

    def push_command(self, command: JointCommand) -> bool:
        """Hand ``command`` (a validated JointCommand on claimed interfaces: position if it has positions, else
        velocity if it has velocities, else effort) over to the next cycle (transport threads); False, nothing
        handed over, when the loan is released (the controller was deactivated meanwhile). InterfaceNotClaimed if
        it names an interface not claimed."""
        kind = (POSITION if command.position is not None else VELOCITY if command.velocity is not None else
                EFFORT)
        with self._lock:
            if self.released:
                return False
            if not self._claimed[kind][command.indices].all():
                raise self._refuse(command.indices, kind)
            self._commands.push_command(command)
        return True

    def release(self) -> None:
        """(the controller manager) The controller is deactivated: every later write raises."""
        with self._lock:
            self.released = True
            for checked in self._checked:
                checked.clear()
