"""The user's ros2_control files, read as the real controller_manager reads them (no rclpy: unit-testable).

* :func:`read_controllers_file`: a controller_manager parameter YAML exactly as used on hardware::

      controller_manager:
        ros__parameters:
          update_rate: 1000               # Hz
          arm_controller:
            type: joint_trajectory_controller/JointTrajectoryController
      arm_controller:
        ros__parameters:
          joints: [...]

  Node-name keys may carry a namespace or wildcards (``/**/controller_manager``, ``/robot/arm_controller``,
  ``/**``), as ROS 2 parameter files allow; ``/**: ros__parameters`` values apply to every controller.
* :func:`read_ros2_control`: the ``<ros2_control>`` blocks of a URDF (or of a xacro, expanded first): joints
  with their command and state interfaces, ``initial_value`` parameters and joint parameters (``mimic``,
  ``multiplier``), and ``<sensor>`` blocks with their state interfaces and parameters (``frame_id``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..resources import share_dir
from ..yaml_files import missing_file, read_mapping, read_text_file

CONTROLLER_MANAGER = "controller_manager"


@dataclass(frozen=True)
class ControllerSpec:
    """One controller of the controllers file: its name, plugin type and ``ros__parameters``."""

    name: str
    type: str
    params: dict


@dataclass(frozen=True)
class ControllersFile:
    """update_rate: Hz of the controller manager's update loop; controllers in file order."""

    source: str
    update_rate: float
    controllers: tuple[ControllerSpec, ...]

    def names(self) -> list[str]:
        return [c.name for c in self.controllers]


def _node_key(key: str) -> str:
    """'/**/arm_controller', '/ns/arm_controller', 'arm_controller' -> 'arm_controller'; '/**' -> '/**'."""
    key = str(key)
    if key in ("/**", "**"):
        return "/**"
    return key.rstrip("/").split("/")[-1]


def read_controllers_file(path: str | Path, manager_name: str = CONTROLLER_MANAGER) -> ControllersFile:
    """Parse a controller_manager parameter YAML; ConfigError names the file and what is wrong."""
    path = Path(path)
    data = read_mapping(path, "controllers file")
    where = str(path)
    sections: dict[str, dict] = {}
    for key, value in data.items():
        name = _node_key(key)
        if not isinstance(value, dict) or "ros__parameters" not in value:
            raise ConfigError(f"{where}: '{key}' must hold a 'ros__parameters' mapping (controller_manager "
                              f"parameter file format)")
        params = value["ros__parameters"] or {}
        if not isinstance(params, dict):
            raise ConfigError(f"{where}: '{key}.ros__parameters' must be a mapping, got {params!r}")
        sections.setdefault(name, {}).update(params)
    common = sections.pop("/**", {})
    cm = sections.pop(manager_name, None)
    if cm is None:
        raise ConfigError(f"{where}: no '{manager_name}: ros__parameters:' section (the controller manager's "
                          f"update_rate and the controllers with their types)")
    update_rate = cm.get("update_rate", 100)
    try:
        update_rate = float(update_rate)
    except (TypeError, ValueError):
        update_rate = float("nan")
    if not (update_rate > 0 and update_rate < float("inf")):
        raise ConfigError(f"{where}: {manager_name}.update_rate must be a rate > 0 Hz, got {cm.get('update_rate')!r}")
    controllers = []
    for name, value in cm.items():
        if not isinstance(value, dict):
            continue     # update_rate, thread_priority, ... of the controller manager itself
        ctype = value.get("type")
        if not isinstance(ctype, str) or "/" not in ctype:
            raise ConfigError(f"{where}: controller '{name}' needs 'type: <package>/<Class>' under "
                              f"{manager_name}.ros__parameters, got {ctype!r}")
        params = {**{k: v for k, v in common.items() if not isinstance(v, dict)}, **sections.get(name, {})}
        params.update({k: v for k, v in value.items() if k not in ("type", "params_file")})
        controllers.append(ControllerSpec(name, ctype, params))
    if not controllers:
        raise ConfigError(f"{where}: {manager_name}.ros__parameters lists no controller (<name>: {{type: ...}})")
    return ControllersFile(where, update_rate, tuple(controllers))


@dataclass(frozen=True)
class JointInfo:
    """A ``<joint>`` of a ``<ros2_control>`` block: interface names, initial values, parameters."""

    name: str
    command_interfaces: tuple[str, ...]
    state_interfaces: tuple[str, ...]
    initial_values: dict = field(default_factory=dict)   # state interface -> value
    params: dict = field(default_factory=dict)           # e.g. mimic, multiplier

    @property
    def mimic(self) -> str | None:
        return self.params.get("mimic")

    @property
    def multiplier(self) -> float:
        return float(self.params.get("multiplier", 1.0))

    @property
    def offset(self) -> float:
        return float(self.params.get("offset", 0.0))


@dataclass(frozen=True)
class SensorInfo:
    """A ``<sensor>`` of a ``<ros2_control>`` block (a force/torque sensor: force.x ... torque.z)."""

    name: str
    state_interfaces: tuple[str, ...]
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class HardwareInfo:
    """Every ``<ros2_control>`` block of a robot description, merged (one system per block)."""

    source: str
    systems: tuple[str, ...]
    plugins: tuple[str, ...]
    joints: tuple[JointInfo, ...]
    sensors: tuple[SensorInfo, ...]

    def joint(self, name: str) -> JointInfo | None:
        return next((j for j in self.joints if j.name == name), None)

    def sensor(self, name: str) -> SensorInfo | None:
        return next((s for s in self.sensors if s.name == name), None)


def _params(element) -> dict:
    out = {}
    for p in element.findall("param"):
        name = p.get("name")
        if name:
            out[name] = (p.text or "").strip()
    return out


def _float(text, where: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number, got {text!r}") from None


def parse_ros2_control(xml_text: str, source: str) -> HardwareInfo | None:
    """The ``<ros2_control>`` blocks of a URDF document (None if it has none)."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ConfigError(f"{source}: malformed XML: {exc}") from None
    blocks = root.findall("ros2_control") if root.tag != "ros2_control" else [root]
    if not blocks:
        return None
    systems, plugins, joints, sensors = [], [], [], []
    seen = set()
    for block in blocks:
        name = block.get("name") or "system"
        systems.append(name)
        hw = block.find("hardware")
        plugin = (hw.findtext("plugin") or "").strip() if hw is not None else ""
        plugins.append(plugin)
        for j in block.findall("joint"):
            jname = j.get("name")
            where = f"{source}: <ros2_control name=\"{name}\"> joint {jname!r}"
            if not jname:
                raise ConfigError(f"{source}: <ros2_control name=\"{name}\">: a <joint> without a name")
            if jname in seen:
                raise ConfigError(f"{where}: listed twice")
            seen.add(jname)
            commands = tuple(c.get("name") for c in j.findall("command_interface"))
            states, initial = [], {}
            for s in j.findall("state_interface"):
                states.append(s.get("name"))
                init = _params(s).get("initial_value")
                if init is not None:
                    initial[s.get("name")] = _float(init, f"{where} initial_value of {s.get('name')!r}")
            for c in j.findall("command_interface"):
                init = _params(c).get("initial_value")
                if init is not None and c.get("name") not in initial:
                    initial[c.get("name")] = _float(init, f"{where} initial_value of {c.get('name')!r}")
            params = _params(j)
            if j.get("mimic") == "true":
                params.setdefault("mimic", "urdf")   # ros2_control >= Jazzy: taken from the URDF's <mimic>
            joints.append(JointInfo(jname, commands, tuple(states), initial, params))
        for s in block.findall("sensor"):
            sname = s.get("name")
            if not sname:
                raise ConfigError(f"{source}: <ros2_control name=\"{name}\">: a <sensor> without a name")
            sensors.append(SensorInfo(sname, tuple(i.get("name") for i in s.findall("state_interface")),
                                      _params(s)))
    return HardwareInfo(source, tuple(systems), tuple(plugins), tuple(joints), tuple(sensors))


def read_ros2_control(path: str | Path, xacro_args: dict | None = None) -> HardwareInfo | None:
    """``<ros2_control>`` blocks of a URDF file or a xacro file (expanded with ``xacro_args``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"ros2_control description {path}: {missing_file(path)}")
    if path.suffix == ".xacro":
        try:
            import xacro   # deferred: an optional dependency, only for .xacro files
        except ImportError:
            raise ConfigError(f"{path}: the 'xacro' package is needed to read a .xacro file (pip install xacro)") \
                from None
        try:
            doc = xacro.process_file(str(path), mappings={k: str(v) for k, v in (xacro_args or {}).items()})
        except Exception as exc:   # noqa: BLE001 - xacro raises its own exception types
            raise ConfigError(f"{path}: xacro failed: {exc}") from None
        text = doc.toxml()
        doc.unlink()             # minidom's nodes refer to their parents: free them now, not at the next full GC
    else:
        text = read_text_file(path, "ros2_control description")
    return parse_ros2_control(text, str(path))


def default_controllers(joint_names, joint_groups=None,
                        source: str = "<default controllers>") -> tuple[ControllersFile, list[str]]:
    """The controllers of a robot that ships no controllers file (a bare URDF, or a robot mapping in a scene).

    With ``joint_groups`` (group -> JointGroup(joints, controller), the robot mapping's key): per controller
    name C a JointTrajectoryController ``C`` over the union of its groups' joints (partial goals allowed), and
    per group G the forward group controllers ``G_{position,velocity,effort}_controller`` (inactive). Without:
    a ``joint_trajectory_controller`` over every actuated joint and ``forward_{position,velocity,effort}_
    controller`` (inactive), the names of the UR and many other ROS 2 drivers. Always a joint_state_broadcaster
    (alone for a scene without joints).
    Returns (file, inactive controller names)."""
    jtc = "joint_trajectory_controller/JointTrajectoryController"
    forward = (("position", "position_controllers/JointGroupPositionController"),
               ("velocity", "velocity_controllers/JointGroupVelocityController"),
               ("effort", "effort_controllers/JointGroupEffortController"))
    groups = [(g, list(grp.joints), grp.controller) for g, grp in (joint_groups or {}).items()]
    if not groups and len(joint_names):      # no joints at all (objects only): the joint_state_broadcaster only
        groups = [("forward", list(joint_names), "joint_trajectory_controller")]
    specs = [ControllerSpec("joint_state_broadcaster", "joint_state_broadcaster/JointStateBroadcaster", {})]
    by_controller: dict[str, list[str]] = {}
    for _, joints, controller in groups:
        by_controller.setdefault(controller, []).extend(j for j in joints if j not in by_controller.get(controller, []))
    for controller, joints in by_controller.items():
        specs.append(ControllerSpec(controller, jtc, {"joints": joints, "command_interfaces": ["position"],
                                                      "state_interfaces": ["position", "velocity"],
                                                      "allow_partial_joints_goal": True}))
    inactive = []
    for group, joints, _ in groups:
        for interface, ctype in forward:
            name = f"{group}_{interface}_controller"
            specs.append(ControllerSpec(name, ctype, {"joints": joints}))
            inactive.append(name)
    return ControllersFile(source, 1000.0, tuple(specs)), inactive


def resolve_controllers(controllers_file: str, robot, joint_names, inactive=()) -> tuple[ControllersFile, list[str]]:
    """The controllers a robot runs: ``controllers_file`` if given, else the robot's shipped
    ``config/ros2_control/<robot>_controllers.yaml``, else :func:`default_controllers` of its joint groups.
    Returns (file, names to load inactive): ``inactive`` plus, for a default set, its forward controllers."""
    inactive = list(inactive)
    if controllers_file:
        return read_controllers_file(controllers_file), inactive
    shipped = Path(share_dir()) / "config" / "ros2_control" / f"{robot.name}_controllers.yaml" if robot else None
    if shipped is not None and shipped.is_file():
        return read_controllers_file(shipped), inactive
    file, default_inactive = default_controllers(joint_names, robot.joint_groups if robot else None)
    return file, list(dict.fromkeys(inactive + default_inactive))
