"""What a controller holds of the hardware's command interfaces (no rclpy), as ros2_control's controller manager
hands a controller ``hardware_interface::LoanedCommandInterface`` objects for exactly the interfaces it claimed
(``assign_interfaces`` on activation, ``release_interfaces`` on deactivation):

* :class:`LoanedCommandInterfaces`: the write side, built by the controller manager when it activates a controller
  (or adds a hardware device) over the rows (joints) of the command interfaces it claims, released when it
  deactivates it. Its write methods are JointCommandInterfaces' restricted to those rows: a write naming another
  joint raises :class:`InterfaceNotClaimed` (in ``update`` the controller manager then deactivates the controller,
  as it does on an update returning ERROR), and so does any write after the release. The index arrays a
  controller builds at configuration or when it accepts a goal are checked on their first write and remembered
  by identity, so that the per-update writes allocate nothing (a controller does not change an index array in
  place; they are not made read-only, which would give the compiled passes taking them another signature).
* :class:`CommandInterfacesView`: the read side every controller has in its context (``ctx.command``): joint
  names and indices, the mimic joints, the <ros2_control> block, the exported command interfaces and who claims
  them, and the commanded values as read-only arrays. It has no write method.

A row's *mode* follows its last write (hardware.JointCommandInterfaces): a controller may write its claimed rows in
any mode (the gripper presses on a stalled object in effort mode through its position claim, as a force-limited
gripper's firmware does).
"""

from __future__ import annotations

import threading
from types import MappingProxyType

import numpy as np

from .command_validation import JointCommand
from .hardware import JointCommandInterfaces

__all__ = ["CommandInterfacesView", "InterfaceNotClaimed", "LoanedCommandInterfaces"]

_CHECKED_CAPACITY = 32      # index objects remembered per loan (a trajectory controller adds one per goal)


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
    controller's name): write methods restricted to the claimed rows (module docstring). ``commands``: the System's
    CommandBuffer, for the commands a transport thread hands over (``push_command``). ``rows``: the claimed joints'
    indices (read-only)."""

    def __init__(self, hw: JointCommandInterfaces, commands, names, owner: str):
        self.names: tuple[str, ...] = tuple(names)
        self.owner = owner
        joints = list(dict.fromkeys(n.rpartition("/")[0] for n in self.names))
        self.rows = _read_only(hw.indices(joints))
        self._mask = np.zeros(len(hw.joint_names), dtype=bool)
        self._mask[self.rows] = True
        self._hw = hw
        self._commands = commands
        self._checked: dict[int, object] = {}   # id -> index object checked (held: its id stays its own)
        self._lock = threading.Lock()           # push_command (transport threads) against release
        self.released = False

    # ------------------------------------------------------------------------------------------ checks

    def _refuse(self, idx) -> InterfaceNotClaimed:
        if self.released:
            return InterfaceNotClaimed(f"controller '{self.owner}': its command interfaces were released (it is "
                                       f"not active): write refused")
        mask = self._mask[idx]
        rows = np.arange(len(self._mask))[idx]
        names = [self._hw.joint_names[int(j)] for j in np.atleast_1d(rows)[~np.atleast_1d(mask)]]
        return InterfaceNotClaimed(f"controller '{self.owner}' writes the command interfaces of joint(s) {names} "
                                   f"it did not claim; it claims {list(self.names)}")

    def check(self, idx) -> None:
        """InterfaceNotClaimed unless every row of ``idx`` (an int, an index array, a slice or a list) is claimed
        and the loan is not released. An index array or slice is remembered once checked (by identity; the
        release forgets them all)."""
        key = id(idx)
        if key in self._checked:          # the per-update case: one look-up
            return
        if self.released:
            raise self._refuse(idx)
        if type(idx) is int or isinstance(idx, np.integer):
            if not self._mask[idx]:
                raise self._refuse(idx)
            return
        if not self._mask[idx].all():
            raise self._refuse(idx)
        if isinstance(idx, (np.ndarray, slice)):
            if len(self._checked) >= _CHECKED_CAPACITY:
                self._checked.clear()
            self._checked[key] = idx

    # ------------------------------------------------------------------------------------------ writes

    def write_position(self, idx, position, velocity=None) -> None:
        """Position mode at ``position`` (rad or m) with the velocity feed-forward ``velocity`` (rad/s or m/s)."""
        self.check(idx)
        self._hw.write_position(idx, position, velocity)

    def write_velocity(self, idx, velocity) -> None:
        """Velocity mode at ``velocity`` (rad/s or m/s)."""
        self.check(idx)
        self._hw.write_velocity(idx, velocity)

    def write_effort(self, idx, effort, gravity_compensated: bool = False) -> None:
        """Effort mode (N*m or N); ``gravity_compensated``: the hardware adds g(q) (JointCommandInterfaces)."""
        self.check(idx)
        self._hw.write_effort(idx, effort, gravity_compensated)

    def hold(self, idx, q) -> None:
        """Position mode at the measured positions ``q`` (rad or m), zero velocity."""
        self.check(idx)
        self._hw.hold(idx, q)

    def limit_effort(self, idx, limit: float | None) -> None:
        """The actuation limit of the rows ``idx`` (N*m or N; None or 0: their URDF limit)."""
        self.check(idx)
        self._hw.limit_effort(idx, limit)

    def buffers(self, idx) -> tuple[np.ndarray, np.ndarray]:
        """(mode, values) of the hardware for a compiled pass that writes the rows ``idx`` (checked) in place; call
        ``written()`` after it wrote."""
        self.check(idx)
        return self._hw.mode, self._hw.values

    def written(self) -> None:
        """The rows were written in place (``buffers``): the System hands them to the simulator at its next
        write."""
        self._hw.changed = True

    def push_command(self, command: JointCommand) -> bool:
        """Hand ``command`` (a validated JointCommand on claimed rows) over to the next cycle (transport threads);
        False, nothing handed over, when the loan is released (the controller was deactivated meanwhile).
        InterfaceNotClaimed if it names a row not claimed."""
        with self._lock:
            if self.released:
                return False
            if not self._mask[command.indices].all():
                raise self._refuse(command.indices)
            self._commands.push_command(command)
        return True

    def release(self) -> None:
        """(the controller manager) The controller is deactivated: every later write raises."""
        with self._lock:
            self.released = True
            self._checked.clear()
