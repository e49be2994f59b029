"""The emulated controller manager: loads the controllers of a controllers file, activates them (all but the
``inactive`` ones, as ``spawner`` / ``spawner --inactive`` do), runs their ``update`` every
``1 / update_rate`` s of sim time on the stepping thread, and serves the controller_manager services under
``controller_manager/`` (relative to the node's namespace, where ``ros2 control ... -c`` and ``spawner`` look):
``list_controllers``, ``list_hardware_interfaces``, ``switch_controller``, ``list_controller_types``,
``load_controller``, ``configure_controller``, ``unload_controller``.

Claims: two active controllers never share a command interface. ``switch_controller`` with STRICT (or AUTO,
FORCE_AUTO) fails as a whole on an unknown name, an activation of an active controller, a deactivation of an
inactive one, or a claim conflict; BEST_EFFORT (and 0, as in ros2_control) skips those and switches the rest.
Deactivation comes before activation, so a trajectory controller can be swapped for a forward controller on
the same joints in one call.
"""

from __future__ import annotations

import threading

from ...errors import ConfigError
from ..stepping import PublishHook
from .base import Controller, ControllerContext
from .registry import CONTROLLER_TYPES, controller_class

try:
    from controller_manager_msgs.msg import ControllerState, HardwareInterface
    from controller_manager_msgs.srv import (ConfigureController, ListControllers, ListControllerTypes,
                                             ListHardwareInterfaces, LoadController, SwitchController,
                                             UnloadController)
except ImportError:   # built into the venv by scripts/ensure_venv.sh (msgs/controller_manager_msgs)
    ControllerState = None

BEST_EFFORT, STRICT, AUTO, FORCE_AUTO = 1, 2, 3, 4
SERVICE_NS = "controller_manager"


class ControllerManager:
    """Owns the emulated controllers of one robot; see the module docstring."""

    def __init__(self, node, loop, controllers_file, inactive=(), robot=None, ros: bool = True, joints=None,
                 frame_prefix: str | None = None):
        """``joints``: the robot's actuated joints when the world holds several robots (None: every joint);
        ``frame_prefix``: the TF prefix of its frames (None: the node's)."""
        self.node, self.loop = node, loop
        self.source = controllers_file.source
        self.update_rate = controllers_file.update_rate
        dt = float(loop.dt)
        self.every = max(1, int(round(1.0 / (self.update_rate * dt))))
        self.lock = threading.Lock()
        ctx = ControllerContext(node=node, loop=loop, model=loop.sim.model, hardware=loop.hw, limits=node.limits,
                                update_rate=self.update_rate, time_step=dt, robot=robot, ros=ros,
                                joints=tuple(joints) if joints is not None else None, frame_prefix=frame_prefix)
        self.ctx = ctx
        self.controllers = {}
        for spec in controllers_file.controllers:
            cls = controller_class(spec.type, spec.name, self.source)
            try:
                self.controllers[spec.name] = cls(spec.name, spec.type, spec.params, ctx)
            except ConfigError as exc:
                raise ConfigError(f"{self.source}: {exc}") from None
        unknown = [n for n in inactive if n not in self.controllers]
        if unknown:
            node.get_logger().warn(f"inactive_controllers: {unknown} are not in {self.source} (ignored); its "
                                   f"controllers: {', '.join(self.controllers)}")
        start = [c for n, c in self.controllers.items() if n not in inactive]
        error = self._conflicts(start)
        if error:
            raise ConfigError(f"{self.source}: cannot activate every controller at start: {error}; list the ones "
                              f"to load inactive in the node parameter 'inactive_controllers'")
        for c in start:
            self._activate(c)
        self._updaters = []
        self._refresh()
        self.hooks = [PublishHook(f"controller {c.name}", c.publish_every, self._publisher(c))
                      for c in self.controllers.values() if c.publish_every > 0]
        for c in self.controllers.values():
            extra = c.unhonoured_parameters()
            if extra:
                node.get_logger().info(f"controller '{c.name}': parameter(s) {extra} are not emulated (ignored)")
        if ControllerState is not None and ros:
            self._build_services()

    # ------------------------------------------------------------------------------ stepping thread

    def _publisher(self, controller):
        def publish(sim):
            if controller.active:
                controller.publish(sim)
        return publish

    def update(self, sim) -> None:
        with self.lock:
            for c in self._updaters:
                c.update(sim)

    def preempt(self, command) -> None:
        indices = set(command.indices.tolist())
        with self.lock:
            for c in self._updaters:
                c.preempt(indices)

    def reset(self, sim) -> None:
        with self.lock:
            for c in self.controllers.values():
                c.reset(sim)
                if c.active:
                    c.on_activate(sim)

    def on_model_changed(self, model) -> None:
        """The physics model was rebuilt (stepping thread): every controller, active or not, is told."""
        with self.lock:
            self.ctx.model = model
            for c in self.controllers.values():
                c.on_model_changed(model)

    def shutdown(self) -> None:
        for c in self.controllers.values():
            c.shutdown()

    # ------------------------------------------------------------------------------ activation

    def _refresh(self):
        self._updaters = [c for c in self.controllers.values()
                          if c.active and type(c).update is not Controller.update]

    def _conflicts(self, active) -> str:
        owner = {}
        for c in active:
            for i in c.command_interfaces():
                if i in owner:
                    return f"'{c.name}' and '{owner[i]}' both claim {i}"
                owner[i] = c.name
        return ""

    def _activate(self, c):
        c.on_activate(self.loop.sim)
        c.state = "active"
        for i in c.command_interfaces():
            self.loop.hw.claims[i] = c.name

    def _deactivate(self, c):
        c.on_deactivate(self.loop.sim)
        c.state = "inactive"
        for i in c.command_interfaces():
            self.loop.hw.claims.pop(i, None)

    def switch(self, activate, deactivate, strictness: int) -> tuple[bool, str]:
        """Apply a switch_controller request; (ok, message)."""
        strictness = strictness or BEST_EFFORT
        if strictness not in (BEST_EFFORT, STRICT, AUTO, FORCE_AUTO):
            return False, f"unknown strictness {strictness}; valid: 1 (BEST_EFFORT), 2 (STRICT), 3, 4"
        strict = strictness != BEST_EFFORT
        problems = []
        act, deact = [], []
        for name in deactivate:
            c = self.controllers.get(name)
            if c is None:
                problems.append(f"unknown controller '{name}'")
            elif not c.active:
                problems.append(f"'{name}' is not active")
            else:
                deact.append(c)
        for name in activate:
            c = self.controllers.get(name)
            if c is None:
                problems.append(f"unknown controller '{name}'")
            elif c.active and c not in deact:
                problems.append(f"'{name}' is already active")
            else:
                act.append(c)
        if problems and strict:
            return False, "; ".join(problems)
        with self.lock:
            remaining = [c for c in self.controllers.values() if c.active and c not in deact]
            accepted = []
            for c in act:
                error = self._conflicts(remaining + accepted + [c])
                if error:
                    if strict:
                        return False, f"claim conflict: {error}"
                    problems.append(f"not activating '{c.name}': {error}")
                    continue
                accepted.append(c)
            for c in deact:
                self._deactivate(c)
            for c in accepted:
                self._activate(c)
            self._refresh()
        message = (f"activated {[c.name for c in accepted]}, deactivated {[c.name for c in deact]}"
                   + (f"; skipped: {'; '.join(problems)}" if problems else ""))
        return True, message

    # ------------------------------------------------------------------------------ services

    def _build_services(self):
        from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
        group = MutuallyExclusiveCallbackGroup()
        node = self.node
        for srv, name, fn in ((ListControllers, "list_controllers", self._srv_list),
                              (ListHardwareInterfaces, "list_hardware_interfaces", self._srv_hardware),
                              (SwitchController, "switch_controller", self._srv_switch),
                              (ListControllerTypes, "list_controller_types", self._srv_types),
                              (LoadController, "load_controller", self._srv_load),
                              (ConfigureController, "configure_controller", self._srv_configure),
                              (UnloadController, "unload_controller", self._srv_unload)):
            node.create_service(srv, f"{SERVICE_NS}/{name}", fn, callback_group=group)

    def _srv_list(self, request, response):
        out = []
        for c in self.controllers.values():
            s = ControllerState()
            s.name, s.state, s.type = c.name, c.state, c.type
            s.is_async = False
            s.update_rate = int(round(self.update_rate))
            s.claimed_interfaces = list(c.command_interfaces()) if c.active else []
            s.required_command_interfaces = list(c.command_interfaces())
            s.required_state_interfaces = list(c.state_interfaces())
            s.is_chainable = s.is_chained = False
            out.append(s)
        response.controller = out
        return response

    def _srv_hardware(self, request, response):
        hw = self.loop.hw
        claims = dict(hw.claims)
        response.command_interfaces = [HardwareInterface(name=n, data_type="double", is_available=True,
                                                         is_claimed=n in claims)
                                       for n in hw.available_command_interfaces()]
        response.state_interfaces = [HardwareInterface(name=n, data_type="double", is_available=True,
                                                       is_claimed=False)
                                     for n in hw.available_state_interfaces()]
        return response

    def _srv_switch(self, request, response):
        ok, message = self.switch(list(request.activate_controllers), list(request.deactivate_controllers),
                                  int(request.strictness))
        log = self.node.get_logger()
        if ok:   # one call site per severity: rclpy refuses a severity change at the same call site
            log.info(f"switch_controller: {message}")
        else:
            log.warn(f"switch_controller: {message}")
        response.ok, response.message = ok, message
        return response

    def _srv_types(self, request, response):
        response.types = sorted(CONTROLLER_TYPES)
        response.base_classes = ["controller_interface::ControllerInterface"] * len(response.types)
        return response

    def _srv_load(self, request, response):
        response.ok = request.name in self.controllers   # every controller of the file is loaded at start
        if not response.ok:
            self.node.get_logger().warn(f"load_controller: '{request.name}' is not in {self.source} (controllers "
                                        f"are read from the controllers file at start-up)")
        return response

    def _srv_configure(self, request, response):
        response.ok = request.name in self.controllers
        return response

    def _srv_unload(self, request, response):
        c = self.controllers.get(request.name)
        response.ok = c is not None and not c.active   # stays loaded (inactive); it can be activated again
        return response
