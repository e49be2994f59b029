"""The ``controller_manager`` node of one robot, as ros2_control's (namespaced like the real one:
``<robot namespace>/controller_manager``): it serves the controller_manager services of the robot's emulated
ControllerManager (driver/controller_manager.py) and holds the controller manager's parameters, and each loaded
controller has a node of its own (``<robot namespace>/<controller name>``) holding that controller's parameters,
so that ``spawner``, ``ros2 control ...`` and ``ros2 param get/set`` work as on hardware.

Services (``~/<name>``): list_controllers, list_controller_types, list_hardware_interfaces,
list_hardware_components and cleanup_controller (when the venv's controller_manager_msgs has them), load_controller,
configure_controller, switch_controller, unload_controller. Parameters: ``update_rate`` (Hz, int as in Jazzy; read at start-up, as the
real controller manager reads it), ``<controller>.type`` of every loaded controller; ``<controller>.type`` and
``<controller>.params_file`` (string or string array) of a controller not yet loaded, as spawner sets them before
``load_controller``; any other parameter is accepted and kept (the real node allows undeclared parameters).

Loading: ``load_controller NAME`` builds NAME from ``NAME.type`` (else its type in the controllers file) and its
parameters: the controllers file's section for NAME, then the ``NAME.params_file`` files (spawner's key rules,
controller_manager.controller_parameters_from_files), joint names prefixed with the robot's prefix where the
robot has one. Everything that builds, (de)activates or removes controllers runs between two steps
(``between_steps``: SteppingLoop.request_call), as switch_controller does.
"""

from __future__ import annotations

from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.exceptions import InvalidNodeNameException, ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.validate_node_name import validate_node_name

from ..driver.config import ControllersFile, ControllerSpec
from ..driver.controller_manager import CONTROLLER_TYPES, controller_parameters_from_files
from ..driver.controllers.base import flatten
from ..driver.robot import prefixed_controllers
from ..errors import ContactSimError

try:   # built into the venv by scripts/ensure_venv.sh (msgs/controller_manager_msgs)
    from controller_manager_msgs.msg import ControllerState, HardwareInterface
    from controller_manager_msgs.srv import (ConfigureController, ListControllers, ListControllerTypes,
                                             ListHardwareInterfaces, LoadController, SwitchController,
                                             UnloadController)
except ImportError:
    ControllerState = None
try:   # added to msgs/controller_manager_msgs later: a venv built before serves everything else
    from controller_manager_msgs.msg import HardwareComponentState
    from controller_manager_msgs.srv import CleanupController, ListHardwareComponents
    from lifecycle_msgs.msg import State as LifecycleState
except ImportError:
    ListHardwareComponents = CleanupController = None

NODE_NAME = "controller_manager"


def _node_options(sim_node) -> dict:
    # the process's global ROS arguments are not applied: the simulation node's parameter files (under /**) are
    # not this node's, and a '-r __ns:=...' remap would replace the robot's namespace (already resolved)
    return dict(context=sim_node.context, use_global_arguments=False)


MAX_LOGGED_CHARS = 2000     # a log line or answer quoting a request or a file (a 41 MB line was logged: issue 44)


def capped(text: str, limit: int = MAX_LOGGED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... (cut: {len(text):,} characters)"


def check_controller_name(name: str, namespace: str) -> None:
    """ContactSimError naming the rule when ``name`` cannot be a controller's: every loaded controller has a node
    ``<namespace>/<name>`` (as in ros2_control), so the name must be a valid ROS node name (rcl's rules:
    alphanumerics and '_', not starting with a digit, at most 255 characters; no '/', '-' or '.')."""
    try:
        validate_node_name(name)
    except InvalidNodeNameException as exc:
        rule = str(exc).splitlines()[0].removeprefix("Invalid node name: ")
        raise ContactSimError(f"not a valid controller name: its node '{namespace.rstrip('/')}/{name}' would "
                              f"have an invalid ROS node name ({rule}); nothing loaded") from None


class ControllerNode(Node):
    """A loaded controller's node (``<namespace>/<controller name>``): its parameters, as the controller read them
    at load. A change is refused with the reason (the emulated controller reads its parameters once, at load:
    unload and load it with new parameters)."""

    def __init__(self, sim_node, namespace: str, controller):
        super().__init__(controller.name, namespace=namespace, **_node_options(sim_node))
        for key, value in sorted(controller.params.items()):
            try:
                self.declare_parameter(key, value)
            except (TypeError, ValueError, ParameterException):   # a value or name ROS parameters cannot hold
                # (a mixed list, None, a name with '/'): not shown
                continue
        self.add_on_set_parameters_callback(self._on_set)

    def _on_set(self, params):
        names = [p.name for p in params if p.name != "use_sim_time"]
        if not names:
            return SetParametersResult(successful=True)
        return SetParametersResult(successful=False, reason=(
            f"{names}: the emulated controller reads its parameters when it is loaded; unload it and load it "
            f"again with the new values (spawner -p params.yaml)"))


class ControllerManagerNode(Node):
    """See the module docstring. ``port``: the robot's RobotPort (its namespace, driver, simulation node);
    ``cm``: its ControllerManager; ``between_steps(fn)``: ``fn()`` run on the stepping thread, its result
    returned."""

    def __init__(self, port, cm, between_steps):
        sim_node = port.sim_node
        namespace = port.node.get_namespace()
        super().__init__(NODE_NAME, namespace=namespace, allow_undeclared_parameters=True,
                         **_node_options(sim_node))
        self.port, self.cm, self.sim_node, self.between_steps = port, cm, sim_node, between_steps
        self.controller_nodes: dict[str, ControllerNode] = {}
        self.declare_parameter("update_rate", int(round(cm.update_rate)))
        for key, value in sorted(cm.manager_params.items()):    # the file's own controller_manager parameters
            if key == "update_rate" or self.has_parameter(key):
                continue
            try:
                self.declare_parameter(key, value)
            except (TypeError, ValueError, ParameterException):   # a value ROS parameters cannot hold: not shown
                continue
        for name, c in cm.controllers.items():
            self._declare_type(name, c.type)
            self.controller_nodes[name] = ControllerNode(sim_node, namespace, c)
        self.add_on_set_parameters_callback(self._on_set)
        if ControllerState is None:
            return
        group = MutuallyExclusiveCallbackGroup()
        services = [(ListControllers, "list_controllers", self._srv_list),
                    (ListHardwareInterfaces, "list_hardware_interfaces", self._srv_hardware),
                    (SwitchController, "switch_controller", self._srv_switch),
                    (ListControllerTypes, "list_controller_types", self._srv_types),
                    (LoadController, "load_controller", self._srv_load),
                    (ConfigureController, "configure_controller", self._srv_configure),
                    (UnloadController, "unload_controller", self._srv_unload)]
        if ListHardwareComponents is not None:
            services += [(ListHardwareComponents, "list_hardware_components", self._srv_components),
                         (CleanupController, "cleanup_controller", self._srv_cleanup)]
        for srv, name, fn in services:
            self.create_service(srv, f"~/{name}", fn, callback_group=group)

    def nodes(self) -> list:
        """This node and the controllers' nodes (what the executor spins)."""
        return [self, *self.controller_nodes.values()]

    # ------------------------------------------------------------------------------ parameters

    def _declare_type(self, name: str, ctype: str) -> None:
        key = f"{name}.type"
        if self.has_parameter(key):
            self.set_parameters([Parameter(key, value=ctype)])
        else:
            self.declare_parameter(key, ctype)

    def _on_set(self, params):
        for p in params:
            if p.name == "update_rate":
                if p.type_ != Parameter.Type.INTEGER or p.value <= 0:
                    return SetParametersResult(successful=False, reason="update_rate: an integer > 0 (Hz)")
                if p.value != int(round(self.cm.update_rate)):
                    self.get_logger().info(f"update_rate set to {p.value}: read at start-up, as the real "
                                           f"controller manager reads it (still {self.cm.update_rate:g} Hz)")
            elif p.name.endswith(".type") and p.type_ != Parameter.Type.STRING:
                return SetParametersResult(successful=False, reason=f"{p.name}: a string ('<package>/<Class>')")
            elif p.name.endswith(".params_file") and p.type_ not in (Parameter.Type.STRING,
                                                                       Parameter.Type.STRING_ARRAY):
                return SetParametersResult(successful=False, reason=f"{p.name}: a file path or a list of them")
        return SetParametersResult(successful=True)

    def _param(self, name: str):
        return self.get_parameter(name).value if self.has_parameter(name) else None

    # ------------------------------------------------------------------------------ services

    def _srv_list(self, request, response):
        cm = self.cm
        out = []
        for c in list(cm.controllers.values()):
            s = ControllerState()
            s.name, s.state, s.type = c.name, c.state, c.type
            s.is_async = False
            s.update_rate = int(round(cm.update_rate))
            s.claimed_interfaces = list(c.command_interfaces()) if c.active else []
            s.required_command_interfaces = list(c.command_interfaces())
            s.required_state_interfaces = list(c.state_interfaces())
            s.is_chainable = s.is_chained = False
            out.append(s)
        response.controller = out
        return response

    def _interfaces(self):
        hw = self.cm.ctx.command
        claims = dict(hw.claims)
        command = [HardwareInterface(name=n, data_type="double", is_available=True, is_claimed=n in claims)
                   for n in hw.available_command_interfaces()]
        state = [HardwareInterface(name=n, data_type="double", is_available=True, is_claimed=False)
                 for n in hw.available_state_interfaces()]
        return command, state

    def _srv_hardware(self, request, response):
        response.command_interfaces, response.state_interfaces = self._interfaces()
        return response

    def _srv_components(self, request, response):
        """One component: the simulated system (the <ros2_control> block's name and plugin where the robot has
        one), active, with every command and state interface of the robot."""
        info = self.cm.ctx.command.hardware_info
        c = HardwareComponentState()
        c.name = info.systems[0] if info is not None and info.systems else self.port.name
        c.type = "system"
        c.plugin_name = info.plugins[0] if info is not None and info.plugins and info.plugins[0] else \
            "contact_sim_ros/SimulatedSystem"
        c.class_type = c.plugin_name
        c.is_async = False
        c.rw_rate = int(round(self.cm.update_rate))
        c.state = LifecycleState(id=LifecycleState.PRIMARY_STATE_ACTIVE, label="active")
        c.command_interfaces, c.state_interfaces = self._interfaces()
        response.component = [c]
        return response

    def _srv_switch(self, request, response):
        activate, deactivate = list(request.activate_controllers), list(request.deactivate_controllers)
        try:
            ok, message = self.between_steps(lambda: self.cm.switch(activate, deactivate, int(request.strictness)))
        except Exception as exc:   # noqa: BLE001 - no request kills the node: answered, logged as an error
            ok, message = False, capped(f"not switched: {exc!r}")
            self.get_logger().error(f"switch_controller: {message}")
            response.ok, response.message = ok, message
            return response
        log = self.get_logger()
        if ok:   # one call site per severity: rclpy refuses a severity change at the same call site
            log.info(capped(f"switch_controller: {message}"))
        else:
            log.warn(capped(f"switch_controller: {message}"))
        response.ok, response.message = ok, message
        return response

    def _srv_types(self, request, response):
        response.types = sorted(CONTROLLER_TYPES)
        response.base_classes = ["controller_interface::ControllerInterface"] * len(response.types)
        return response

    def spec(self, name: str) -> ControllerSpec:
        """The controller ``name`` to load: its type (``name.type``, else the controllers file's) and parameters
        (the controllers file's section, then the ``name.params_file`` files), joint names prefixed with the
        robot's prefix. ContactSimError when it has no type."""
        declared = self.cm.specs.get(name)
        ctype = self._param(f"{name}.type") or (declared.type if declared is not None else None)
        if not ctype:
            raise ContactSimError(f"no type for controller '{name}': set the parameter '{name}.type' on "
                                  f"{self.get_fully_qualified_name()} (spawner does) or declare it in "
                                  f"{self.cm.source}")
        params = flatten(declared.params) if declared is not None else {}
        files = self._param(f"{name}.params_file")
        if isinstance(files, str):
            files = [files] if files else []
        params.update(controller_parameters_from_files(list(files or []), name, self.get_namespace()))
        spec = ControllerSpec(name, ctype, params)
        driver = self.port.driver
        robot = driver.robot
        if robot is not None and robot.prefix:
            info = self.cm.ctx.command.hardware_info
            frames = [f.name for f in driver.model.pin_model.frames] + \
                ([s.name for s in info.sensors] if info is not None else [])
            one = prefixed_controllers(ControllersFile("load_controller", self.cm.update_rate, (spec,)),
                                       robot.prefix, driver.joint_names + driver.mimic_joint_names, frames)
            spec = one.controllers[0]
        return spec

    def _srv_load(self, request, response):
        name = request.name
        log = self.get_logger()
        try:
            check_controller_name(name, self.get_namespace())
            spec = self.spec(name)
            c = self.between_steps(lambda: self.cm.load(spec))   # its publish hook: the loop collects it
        except ContactSimError as exc:
            log.error(capped(f"load_controller '{name}': {exc}"))
            response.ok = False
            return response
        try:
            self._declare_type(name, c.type)
            node = ControllerNode(self.sim_node, self.get_namespace(), c)
        except Exception as exc:   # noqa: BLE001 - not loaded after all: answered, logged, nothing left behind
            self.between_steps(lambda: self.cm.unload(name))
            log.error(capped(f"load_controller '{name}': not loaded: its node could not be made: {exc!r}"))
            response.ok = False
            return response
        self.controller_nodes[name] = node
        if self.executor is not None:
            self.executor.add_node(node)
        log.info(f"load_controller: loaded '{name}' ({c.type}), unconfigured")
        response.ok = True
        return response

    def _srv_configure(self, request, response):
        return self._transition("configure_controller", self.cm.configure, request, response)

    def _srv_cleanup(self, request, response):
        return self._transition("cleanup_controller", self.cm.cleanup, request, response)

    def _transition(self, service: str, fn, request, response):
        """``fn(name)`` between two steps; ok, or not ok with the reason logged."""
        try:
            self.between_steps(lambda: fn(request.name))
        except ContactSimError as exc:
            self.get_logger().error(capped(f"{service} '{request.name}': {exc}"))
            response.ok = False
            return response
        response.ok = True
        return response

    def _srv_unload(self, request, response):
        name = request.name
        try:
            self.between_steps(lambda: self.cm.unload(name))
        except ContactSimError as exc:
            self.get_logger().error(capped(f"unload_controller '{name}': {exc}"))
            response.ok = False
            return response
        node = self.controller_nodes.pop(name, None)
        if node is not None:   # out of the executor now, destroyed when the executor is done with it (a parameter
            # service's request being handled; destroyed here it raced with the executor's wait: entity_reaper.py)
            self.cm.transport.reaper.retire(node, node)
        self.get_logger().info(f"unload_controller: unloaded '{name}'")
        response.ok = True
        return response
