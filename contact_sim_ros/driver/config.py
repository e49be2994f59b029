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

  Read with rcl's rules (rcl_yaml_param_parser, rclcpp's parameter_map_from): node-name keys may be nested
  (``/**:`` -> ``controller_manager:`` -> ``ros__parameters:`` is the node ``/**/controller_manager``), carry a
  namespace or wildcards (``/ns/controller_manager``, ``/**/arm_controller``, ``/**``; ``/*`` one token, ``/**``
  any number) and repeat (a repeated key is merged into its first occurrence parameter by parameter, later values
  winning). A node's parameters are those of every key matching its fully qualified name, in the order of the
  keys' first appearance, later ones overriding earlier ones per parameter. Nested parameter mappings are dotted
  names (``gains: {j1: {p: 50}}`` is ``gains.j1.p``, as ``gains.j1.p: 50`` is).
  Under the controller manager's parameters, a controller is a group with a ``type`` (or ``params_file``,
  ``fallback_controllers``, ``node_options_args``); every other key is a parameter of the controller manager
  itself (``update_rate``, ``overruns.*``, ``diagnostics.*`` ...: :data:`MANAGER_PARAMETERS`).
* :func:`read_ros2_control`: the ``<ros2_control>`` blocks of a URDF (or of a xacro, expanded first): joints
  with their command and state interfaces, ``initial_value`` parameters and joint parameters (``mimic``,
  ``multiplier``), and ``<sensor>`` blocks with their state interfaces and parameters (``frame_id``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..resources import share_dir
from ..yaml_files import YAML_LOADERS, missing_file, read_text_file

CONTROLLER_MANAGER = "controller_manager"
PARAMS_KEY = "ros__parameters"

# Jazzy's controller_manager parameters (controller_manager/src/controller_manager_parameters.yaml and
# ros2_control_node.cpp): leaves and groups of the manager itself, never controllers
MANAGER_PARAMETERS = ("update_rate", "enforce_command_limits", "handle_exceptions", "thread_priority",
                      "cpu_affinity", "lock_memory", "use_sim_time", "robot_description")
MANAGER_GROUPS = ("hardware_components_initial_state", "defaults", "diagnostics", "overruns",
                  "hardware_synchronization", "qos_overrides")
# keys of a controller under the manager's parameters (<controller>.type, ...): what makes a group a controller
CONTROLLER_KEYS = ("type", "params_file", "fallback_controllers", "node_options_args")


@dataclass(frozen=True)
class ControllerSpec:
    """One controller of the controllers file: its name, plugin type ('' if the file gives none) and parameters
    (the controller node's, dotted names as rcl gives them)."""

    name: str
    type: str
    params: dict


@dataclass(frozen=True)
class ControllersFile:
    """update_rate: Hz of the controller manager's update loop; controllers: every controller the file declares,
    in file order (loaded are those spawned: controller_manager.spawned_controllers); manager_params: the
    controller manager's own parameters (dotted names); notes: what the reader noticed (one line each)."""

    source: str
    update_rate: float
    controllers: tuple[ControllerSpec, ...]
    manager_params: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return [c.name for c in self.controllers]

    def controller(self, name: str) -> ControllerSpec | None:
        return next((c for c in self.controllers if c.name == name), None)


# ------------------------------------------------------------------------------------------ rcl's rules

_TOKEN = re.compile(r"\*\*?|[A-Za-z_][A-Za-z0-9_]*")


def _node_name(keys: list[str], where: str) -> str:
    """Nested node-name keys joined as rcl joins them ('/' between, none doubled), with rclcpp's leading '/';
    ConfigError for a name rcl refuses."""
    name = ""
    for k in keys:
        name = k if not name else name + ("" if name.endswith("/") else "/") + k
    if not name.startswith("/"):
        name = "/" + name
    tokens = name[1:].split("/")
    if not all(_TOKEN.fullmatch(t) for t in tokens):
        raise ConfigError(f"{where}: '{'/'.join(keys)}' is not a valid node name (rcl refuses the file: tokens of "
                          f"letters, digits and '_', or the wildcards '*' and '**')")
    return name


def name_matches(node_key: str, fqn: str) -> bool:
    """rclcpp's match of a parameters-file node name against a node's fully qualified name: '/*' is one token,
    '/**' any number of them (rclcpp parameter_map.cpp)."""
    regex = node_key.replace("/*", r"(/\w+)")
    return re.fullmatch(regex, fqn) is not None


def read_parameter_file(path: str | Path, what: str = "parameters file") -> list[tuple[str, str, dict]]:
    """rcl's parameter structure of a ROS 2 parameters file: [(node name (absolute), key as written, {dotted
    parameter name: value})] in the order of the node names' first appearance; a repeated node name merged into
    its first entry parameter by parameter (later values win). ConfigError naming the file and the problem."""
    text = read_text_file(path, what)
    where = str(path)
    for loader_class in YAML_LOADERS:        # libyaml's parser; a document it rejects: the Python one's error
        loader = loader_class(text)
        entries: dict[str, tuple[str, dict]] = {}
        try:
            root = loader.get_single_node()
            if root is not None:
                _node_level(loader, root, [], entries, where)
        except yaml.YAMLError as exc:
            if loader_class is not YAML_LOADERS[-1]:
                continue
            detail = " ".join(str(exc).split())
            raise ConfigError(f"{where}: malformed YAML ({what}): {detail}") from None
        finally:
            loader.dispose()
        return [(name, key, params) for name, (key, params) in entries.items()]
    raise AssertionError("unreachable: the last loader returns or raises")


def _params_level(loader, node, prefix: str, out: dict) -> None:
    """(read_parameter_file) the parameters under a ``ros__parameters`` mapping, nested names dotted."""
    for knode, vnode in node.value:
        name = prefix + str(loader.construct_object(knode, deep=True))
        if isinstance(vnode, yaml.MappingNode):
            _params_level(loader, vnode, name + ".", out)
        else:
            out[name] = loader.construct_object(vnode, deep=True)


def _node_level(loader, node, keys: list[str], entries: dict, where: str) -> None:
    """(read_parameter_file) node-name keys down to their ``ros__parameters``, merged into ``entries``."""
    if not isinstance(node, yaml.MappingNode):
        what_ = "/".join(keys) or "the file"
        raise ConfigError(f"{where}: '{what_}' must hold node names or '{PARAMS_KEY}' (a ROS 2 parameters "
                          f"file), got {loader.construct_object(node, deep=True)!r}")
    for knode, vnode in node.value:
        key = str(loader.construct_object(knode, deep=True))
        if not key.startswith(PARAMS_KEY):
            _node_level(loader, vnode, keys + [key], entries, where)
            continue
        if not keys:
            raise ConfigError(f"{where}: '{PARAMS_KEY}' without a node name above it")
        name = _node_name(keys, where)
        _, params = entries.setdefault(name, ("/".join(keys), {}))
        if isinstance(vnode, yaml.ScalarNode) and loader.construct_object(vnode) in (None, ""):
            continue
        if not isinstance(vnode, yaml.MappingNode):
            raise ConfigError(f"{where}: '{'/'.join(keys)}.{PARAMS_KEY}' must be a mapping, got "
                              f"{loader.construct_object(vnode, deep=True)!r}")
        _params_level(loader, vnode, "", params)


def node_parameters(entries, fqn: str) -> tuple[dict, list[str]]:
    """The parameters a node of fully qualified name ``fqn`` gets from ``entries`` (read_parameter_file) and the
    keys they came from. A relative key naming the node's base name (``arm_controller:``, which rclcpp reads as
    ``/arm_controller``) is taken for a node in another namespace too (the keys list says so with a '~')."""
    base = fqn.rsplit("/", 1)[-1]
    own = [e for e in entries if name_matches(e[0], fqn)]
    if not any(e[0].rsplit("/", 1)[-1] == base for e in own):
        own = [e for e in entries if e in own or (not e[1].startswith("/") and e[0] == f"/{base}")]
    out: dict = {}
    for _, _, params in own:
        out.update(params)
    keys = [key if name_matches(name, fqn) else f"~{key}" for name, key, _ in own]
    return out, keys


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def read_controllers_file(path: str | Path, manager_name: str = CONTROLLER_MANAGER,
                          namespace: str = "/") -> ControllersFile:
    """Parse a controller_manager parameter YAML for the manager ``<namespace>/<manager_name>`` and its
    controllers ``<namespace>/<controller>`` (module docstring: rcl's rules); ConfigError names the file and what
    is wrong."""
    path = Path(path)
    where = str(path)
    entries = read_parameter_file(path, "controllers file")
    ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
    cm_fqn = f"{ns}/{manager_name}"
    cm, keys = node_parameters(entries, cm_fqn)
    notes = []
    if not any(k.lstrip("~").rstrip("/").rsplit("/", 1)[-1] == manager_name for k in keys):
        elsewhere = [key for name, key, _ in entries if name.rsplit("/", 1)[-1] == manager_name]
        hint = (f"; its key(s) {elsewhere} are for a controller manager in another namespace (write "
                f"'/**/{manager_name}:' for any namespace)" if elsewhere else "")
        raise ConfigError(f"{where}: no '{manager_name}: {PARAMS_KEY}:' section for the controller manager "
                          f"{cm_fqn} (its update_rate and the controllers with their types){hint}")
    foreign = [k[1:] for k in keys if k.startswith("~")]
    if foreign:
        notes.append(f"{where}: key(s) {foreign} read for {cm_fqn}; the real one reads them in the root namespace "
                     f"only (write '/**/{manager_name}:' for any namespace)")
    update_rate = cm.get("update_rate", 100)
    try:
        update_rate = float(update_rate)
    except (TypeError, ValueError):
        update_rate = float("nan")
    if isinstance(cm.get("update_rate"), bool) or not (0 < update_rate < float("inf")):
        raise ConfigError(f"{where}: {manager_name}.update_rate must be a rate > 0 Hz, got {cm.get('update_rate')!r}")
    groups: dict[str, dict] = {}
    for name, value in cm.items():
        head, dot, rest = name.partition(".")
        if dot and head not in MANAGER_GROUPS:
            groups.setdefault(head, {})[rest] = value
    controllers, typeless = [], []
    for name, group in groups.items():
        if not any(k in group for k in CONTROLLER_KEYS):
            typeless.append(name)
            continue
        ctype = group.get("type", "")
        params, _ = node_parameters(entries, f"{ns}/{name}")
        for extra in _as_list(group.get("params_file") or []):     # the controller's own files override
            extra_path = Path(str(extra)).expanduser()
            if not extra_path.is_file():
                raise ConfigError(f"{where}: {manager_name}.{name}.params_file {str(extra)!r}: "
                                  f"{missing_file(extra_path)}")
            params.update(node_parameters(read_parameter_file(extra_path, f"params_file of '{name}'"),
                                          f"{ns}/{name}")[0])
        controllers.append(ControllerSpec(name, ctype if isinstance(ctype, str) else repr(ctype), params))
    if typeless:
        notes.append(f"{where}: {manager_name} group(s) {typeless} have no 'type': read as parameters of the "
                     f"controller manager, not as controllers")
    if not controllers:
        raise ConfigError(f"{where}: {manager_name}.{PARAMS_KEY} lists no controller (<name>: {{type: ...}})"
                          + (f"; {typeless} have no 'type'" if typeless else ""))
    _refuse_launch_substitutions(where, manager_name, cm, controllers)
    return ControllersFile(where, update_rate, tuple(controllers), dict(cm), tuple(notes))


# a roslaunch substitution left in a parameter value: $(var tf_prefix), $(find-pkg-share pkg), $(env HOME) ...
LAUNCH_SUBSTITUTION = re.compile(r"\$\((?:var|env|optenv|find-pkg-share|find-pkg-prefix|find-exec|exec-in-pkg|"
                                 r"dirname|filename|anon|eval|command|arg)\b[^)]*\)")


def _refuse_launch_substitutions(where: str, manager_name: str, cm: dict, controllers) -> None:
    """ConfigError if a value of the file still holds a launch substitution (``$(var tf_prefix)`` in the UR
    driver's ur_controllers.yaml): its launch file substitutes them when it loads the file (ur_control.launch.py:
    ``ParameterFile(..., allow_substs=True)``); a controller manager given the file itself would read them as
    text (joints named ``$(var tf_prefix)shoulder_pan_joint``). Names the substitution, where it is and what to
    do."""
    values = [(f"{manager_name}.{k}", v) for k, v in cm.items()]
    values += [(f"{c.name}.{k}", v) for c in controllers for k, v in c.params.items()]
    found: dict[str, list[str]] = {}
    for key, value in values:
        for text in (value if isinstance(value, (list, tuple)) else [value]):
            for m in LAUNCH_SUBSTITUTION.finditer(text if isinstance(text, str) else ""):
                found.setdefault(m.group(0), []).append(key)
    if not found:
        return
    first, keys = next(iter(found.items()))
    example = "; ".join(f"'{s}' in {len(k)} value(s), e.g. {k[0]}" for s, k in found.items())
    raise ConfigError(
        f"{where}: the file holds the launch substitution(s) {example}: a launch file substitutes them when it "
        f"loads the file (the UR driver's ur_control.launch.py: ParameterFile(..., allow_substs=True)), the "
        f"controller manager does not. Give the node the file as launch substitutes it: write it out with your "
        f"values (for an empty prefix: sed 's/{first.replace('$', chr(92) + '$')}//g' {Path(where).name} > "
        f"my_controllers.yaml), or "
        f"pass it through launch's substitution (launch_ros.parameter_descriptions.ParameterFile(path, "
        f"allow_substs=True) in your launch file) and give the node the result")


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


def resolve_controllers(controllers_file: str, robot, joint_names, inactive=(),
                        namespace: str = "/") -> tuple[ControllersFile, list[str]]:
    """The controllers a robot runs: ``controllers_file`` if given, else the robot's shipped
    ``config/ros2_control/<robot>_controllers.yaml``, else :func:`default_controllers` of its joint groups.
    ``namespace``: the controller manager's (the file's keys are matched against it).
    Returns (file, names to load inactive): ``inactive`` plus, for a default set, its forward controllers."""
    inactive = list(inactive)
    if controllers_file:
        return read_controllers_file(controllers_file, namespace=namespace), inactive
    shipped = Path(share_dir()) / "config" / "ros2_control" / f"{robot.name}_controllers.yaml" if robot else None
    if shipped is not None and shipped.is_file():
        return read_controllers_file(shipped, namespace=namespace), inactive
    file, default_inactive = default_controllers(joint_names, robot.joint_groups if robot else None)
    return file, list(dict.fromkeys(inactive + default_inactive))
