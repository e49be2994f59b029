"""Run a launch file of launch/ without ROS 2's ``launch`` / ``launch_ros`` (not on PyPI) and turn the nodes it
starts into the command-line arguments launch_ros would give them, so a test starts the node exactly as
``ros2 launch`` does.

* ``launch_nodes(path, **arguments)``: executes the launch file itself with small stand-ins for the launch API
  it uses (DeclareLaunchArgument defaults, LaunchConfiguration.perform, OpaqueFunction, launch_ros Node, ...),
  with ``get_package_share_directory('contact_sim_ros')`` = this source tree; returns each ``Node``'s keyword
  arguments.
* ``ros_arguments(node, folder)``: the ``--ros-args ...`` launch_ros (Jazzy, launch_ros/actions/node.py and
  utilities/{normalize,evaluate}_parameters.py) builds for it: ``-r __node:=NAME``, ``-r __ns:=NS``, every
  parameter file and dictionary in order as ``--params-file`` (a dictionary written as launch_ros writes it:
  values normalized and evaluated by its YAML rules, ``yaml.dump``, keyed by the node's full name), then the
  remappings.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
UNSPECIFIED_NAMESPACE = "<node_namespace_unspecified>"      # launch_ros Node.UNSPECIFIED_NODE_NAMESPACE


class _Recorded:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class LaunchDescription(_Recorded):
    pass


class DeclareLaunchArgument(_Recorded):
    pass


class OpaqueFunction(_Recorded):
    pass


class LogInfo(_Recorded):
    pass


class Node(_Recorded):
    pass


class ParameterValue(_Recorded):
    pass


class Command(_Recorded):
    pass


class FindExecutable(_Recorded):
    pass


class LaunchConfiguration:
    def __init__(self, name, default=None):
        self.name, self.default = name, default

    def perform(self, context):
        return context.launch_configurations[self.name]


def _share_directory(package):
    if package != "contact_sim_ros":
        raise LookupError(f"package {package!r} not found (only contact_sim_ros is emulated)")
    return str(REPO)


def _stand_ins() -> dict:
    def module(name, **attrs):
        m = types.ModuleType(name)
        vars(m).update(attrs)
        return m
    return {
        "launch": module("launch", LaunchDescription=LaunchDescription),
        "launch.actions": module("launch.actions", DeclareLaunchArgument=DeclareLaunchArgument,
                                 OpaqueFunction=OpaqueFunction, LogInfo=LogInfo),
        "launch.substitutions": module("launch.substitutions", LaunchConfiguration=LaunchConfiguration,
                                       Command=Command, FindExecutable=FindExecutable),
        "launch_ros": module("launch_ros"),
        "launch_ros.actions": module("launch_ros.actions", Node=Node),
        "launch_ros.parameter_descriptions": module("launch_ros.parameter_descriptions",
                                                    ParameterValue=ParameterValue),
        "ament_index_python": module("ament_index_python"),
        "ament_index_python.packages": module("ament_index_python.packages",
                                              get_package_share_directory=_share_directory),
    }


def launch_nodes(path, **arguments) -> list[dict]:
    """The keyword arguments of every launch_ros ``Node`` the launch file at ``path`` starts with the launch
    arguments ``arguments`` (``name:=value`` on the ``ros2 launch`` command line; strings)."""
    stand_ins = _stand_ins()
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        spec = importlib.util.spec_from_file_location(f"launch_file_{Path(path).stem.replace('.', '_')}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
    context = types.SimpleNamespace(launch_configurations={})
    declared = set()
    nodes = []
    for entity in description.args[0]:
        if isinstance(entity, DeclareLaunchArgument):
            name = entity.args[0] if entity.args else entity.kwargs["name"]
            declared.add(name)
            context.launch_configurations[name] = str(entity.kwargs.get("default_value", ""))
    unknown = set(arguments) - declared
    if unknown:
        raise ValueError(f"{path}: no launch argument(s) {sorted(unknown)}; declared: {sorted(declared)}")
    context.launch_configurations.update({k: str(v) for k, v in arguments.items()})
    for entity in description.args[0]:
        if isinstance(entity, OpaqueFunction):
            actions = entity.kwargs.get("function", entity.args[0] if entity.args else None)(context) or []
            nodes += [a.kwargs for a in actions if isinstance(a, Node)]
        elif isinstance(entity, Node):
            nodes.append(entity.kwargs)
    return nodes


# ------------------------------------------------------------------------ launch_ros' command line

def _prefix_namespace(base_ns, ns):
    """launch_ros.utilities.namespace_utils.prefix_namespace."""
    combined = None
    if base_ns is not None or ns is not None:
        if ns is None:
            combined = base_ns
        elif not base_ns or ns.startswith("/"):
            combined = ns
        else:
            combined = ("" if base_ns == "/" else base_ns) + "/" + ns
        if combined != "/":
            combined = combined.rstrip("/")
    return combined


def _uniform(values, name):
    """launch_ros evaluate_parameter_dict's check: a non-empty sequence of one of bool, int, float, str."""
    if not values or type(values[0]) not in (bool, int, float, str) or \
            not all(isinstance(v, type(values[0])) for v in values):
        raise TypeError(f"launch_ros: expected a non-empty sequence with items of uniform type for {name!r}, "
                        f"got {values!r}")
    return tuple(values)


def launch_ros_value(name, value):
    """A parameter dictionary's value after launch_ros' normalize_parameter_dict and evaluate_parameter_dict."""
    if isinstance(value, str):             # yaml.dump, then yaml.safe_load of the substituted text
        text = yaml.dump(value)
        loaded = yaml.safe_load(text if text else "''")
        if isinstance(loaded, (list, tuple)):
            return _uniform(list(loaded), name)
        return loaded
    if isinstance(value, (bool, int, float, bytes)):
        return value
    if isinstance(value, dict):
        raise TypeError("nested dictionaries are flattened by launch_ros; not used by the launch files")
    items = list(value)
    kinds = {bool if isinstance(v, bool) else int if isinstance(v, int) else float if isinstance(v, float)
             else str for v in items}
    if kinds == {int}:
        return tuple(int(v) for v in items)
    if kinds in ({float}, {int, float}):
        return tuple(float(v) for v in items)
    if kinds == {bool}:
        return tuple(bool(v) for v in items)
    return _uniform([yaml.safe_load(yaml.dump(v)) for v in items], name)


def ros_arguments(node: dict, folder) -> list[str]:
    """``--ros-args ...`` of a launch_ros Node (``node``: its keyword arguments); parameter dictionaries are
    written to files in ``folder`` (launch_ros: temporary files ``launch_params_*``)."""
    name, namespace = node.get("name"), node.get("namespace")
    args = list(node.get("arguments") or [])
    if node.get("ros_arguments"):
        args += ["--ros-args", *node["ros_arguments"]]
    args.append("--ros-args")
    if name is not None:
        args += ["-r", f"__node:={name}"]
    expanded_ns = UNSPECIFIED_NAMESPACE
    if namespace is not None:
        ns = _prefix_namespace(None, namespace)
        expanded_ns = ns if ns.startswith("/") else "/" + ns
        args += ["-r", f"__ns:={expanded_ns}"]
    full_name = _prefix_namespace(expanded_ns, name)
    specified = "<node_name_unspecified>" not in full_name and UNSPECIFIED_NAMESPACE not in full_name
    folder = Path(folder)
    for k, params in enumerate(node.get("parameters") or []):
        if isinstance(params, dict):
            path = folder / f"launch_params_{k}.yaml"
            evaluated = {key: launch_ros_value(key, value) for key, value in params.items()}
            with open(path, "w") as fh:
                yaml.dump({full_name if specified else "/**": {"ros__parameters": evaluated}}, fh,
                          default_flow_style=False)
            args += ["--params-file", str(path)]
        elif isinstance(params, (str, Path)):
            args += ["--params-file", str(Path(params).resolve())]
        else:
            raise TypeError(f"parameter entry {params!r}: not emulated (a file or a dictionary)")
    for src, dst in node.get("remappings") or []:
        args += ["-r", f"{src}:={dst}"]
    return args
