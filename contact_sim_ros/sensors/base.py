"""The sensor seam (no rclpy): what a simulated sensor is, where its spec comes from, the registry of types.

A :class:`Sensor` is built once from a :class:`SensorSpec` (a ``<sensor>`` of a ``<ros2_control>`` block, a robot
preset's ``ft_sensor``, a scene's / the node's configuration, a URDF camera) and the model. Each step it
``measure(sim, v_prev)``s into its preallocated ``values`` (its state interfaces, in ``interfaces`` order: no
allocation per measurement). The hardware System (driver/system.py) owns the sensors a robot's controllers use:
its ``read()`` marks them stale and the state interfaces measure a sensor on the first read of the cycle (a
sensor nobody reads costs nothing, as the joints' state interfaces). ``message_type`` names the ROS message its
broadcaster publishes (the transports build it; nothing here imports rclpy). Off-thread sensors (cameras) keep
their process and are measured there; they register here so that every sensor type has one place.

Adding a sensor type: one module in this package with a subclass decorated ``@register_sensor`` (docs/design.md,
"Sensors"); the registry imports every module of the package, so the type is named nowhere else.
"""

from __future__ import annotations

import abc
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..errors import ConfigError, unknown_choice


@dataclass(frozen=True)
class SensorSpec:
    """A sensor as configured: ``name`` (the state interfaces' prefix), ``type`` (a registered type name),
    ``params`` (strings as a ``<param>`` gives them, or YAML values), ``source`` (the file / key it came from,
    for error messages)."""

    name: str
    type: str
    params: dict = field(default_factory=dict)
    source: str = ""

    def param(self, key: str, default=None, required: bool = False):
        """``params[key]``; ConfigError naming the sensor and its source when ``required`` and missing."""
        value = self.params.get(key, default)
        if required and (value is None or value == ""):
            raise ConfigError(f"{self.where}: parameter {key!r} is required")
        return value

    @property
    def where(self) -> str:
        return f"{self.source}: sensor {self.name!r} ({self.type})" if self.source else \
            f"sensor {self.name!r} ({self.type})"


class Sensor(abc.ABC):
    """A simulated sensor (module docstring). Subclasses set ``type_name`` (registry key), ``message_type``
    (ROS message of its broadcaster, 'pkg/msg/Type'), ``interfaces`` (state interface names of one reading,
    in ``values`` order) and implement ``measure``. ``values`` has shape ``shape`` (default
    ``(len(interfaces),)``), is allocated once and refilled in place."""

    type_name: ClassVar[str] = ""
    message_type: ClassVar[str] = ""
    interfaces: ClassVar[tuple[str, ...]] = ()
    off_thread: ClassVar[bool] = False       # measured outside the stepping thread (cameras: their process)

    def __init__(self, spec: SensorSpec, model):
        self.spec = spec
        self.name = spec.name
        self.values = np.zeros(self.shape(model))

    def shape(self, model) -> tuple[int, ...]:
        """Shape of ``values`` for ``model``."""
        return (len(self.interfaces),)

    def state_interfaces(self) -> list[str]:
        """``<name>/<interface>`` of each reading component (ros2_control's naming)."""
        return [f"{self.name}/{i}" for i in self.interfaces]

    def labels(self) -> tuple[str, ...] | None:
        """What the rows of ``values`` are of (a contact_wrench's bodies, an external_joint_torques' joints: its
        broadcaster's message per body, its JointState's names); None: ``values`` is one reading."""
        return None

    @abc.abstractmethod
    def measure(self, sim, v_prev: np.ndarray) -> np.ndarray:
        """Fill ``values`` from the Simulator ``sim`` after a step (its q, v, contacts, kinematics) and the
        generalized velocity ``v_prev`` before that step (for accelerations); returns ``values``."""

    def rebuild(self, model) -> None:
        """The model was replaced (spawn / delete of objects; the robots' links unchanged): rebuild what depends
        on it. Default: ``values`` resized if its shape changed."""
        shape = self.shape(model)
        if self.values.shape != shape:
            self.values = np.zeros(shape)


# ---------------------------------------------------------------------------------------------- registry

_SENSORS: dict[str, type] = {}
_loaded = False


def register_sensor(cls):
    """Class decorator: register a Sensor subclass under ``cls.type_name``."""
    if not cls.type_name:
        raise ConfigError(f"sensor class {cls.__name__} has no type_name")
    if cls.type_name in _SENSORS and _SENSORS[cls.type_name] is not cls:
        raise ConfigError(f"sensor type {cls.type_name!r} registered twice")
    _SENSORS[cls.type_name] = cls
    return cls


def _load_builtin_sensors() -> None:
    """Import every module of this package so that their @register_sensor decorators run."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    package = importlib.import_module(__package__)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{__package__}.{module.name}")


def sensor_types() -> list[str]:
    """The registered sensor type names, sorted."""
    _load_builtin_sensors()
    return sorted(_SENSORS)


def sensor_class(type_name: str, where: str = "") -> type:
    """The Sensor class of ``type_name``; ConfigError listing the valid types (prefixed with ``where``)."""
    _load_builtin_sensors()
    try:
        return _SENSORS[type_name]
    except KeyError:
        message = unknown_choice("sensor type", type_name, _SENSORS)
        raise ConfigError(f"{where}: {message}" if where else message) from None


def make_sensor(spec: SensorSpec, model) -> Sensor:
    """The sensor of ``spec`` on ``model`` (ConfigError: unknown type, bad parameters, unknown links)."""
    return sensor_class(spec.type, spec.where)(spec, model)


# ---------------------------------------------------------------------------------------------- specs

# the state interfaces that identify a <ros2_control> <sensor> without a 'type' parameter (ros2_control's
# semantic components: ForceTorqueSensor, IMUSensor)
_INTERFACE_TYPES = (("force.x", "force_torque"), ("torque.x", "force_torque"), ("linear_acceleration.x", "imu"),
                    ("angular_velocity.x", "imu"))


def spec_from_hardware(info, source: str, default_type: str = "") -> SensorSpec:
    """The spec of a ``<ros2_control>`` ``<sensor>`` (driver/config.SensorInfo): its ``type`` parameter, else
    the type its state interfaces name (force.x ...: force_torque; linear_acceleration.x ...: imu), else
    ``default_type`` (what the broadcaster that names it measures)."""
    params = dict(info.params)
    kind = params.pop("type", "")
    if not kind:
        names = set(info.state_interfaces)
        kind = next((t for i, t in _INTERFACE_TYPES if i in names), default_type)
    if not kind:
        raise ConfigError(f"{source}: <sensor name=\"{info.name}\">: give a 'type' parameter or the state "
                          f"interfaces of a known type; sensor types: {', '.join(sensor_types())}")
    return SensorSpec(info.name, kind, params, source)


def spec_from_preset(ft_sensor: dict, source: str) -> SensorSpec:
    """The spec of a robot preset's ``ft_sensor`` (keys parent_link, child_link, frame, name)."""
    name = ft_sensor.get("name") or ft_sensor.get("frame") or "ft_sensor"
    params = {"parent_link": ft_sensor.get("parent_link"), "child_link": ft_sensor.get("child_link"),
              "frame_id": ft_sensor.get("frame") or ""}
    return SensorSpec(name, "force_torque", params, f"{source}: ft_sensor")


def spec_from_mapping(name: str, data: dict, source: str) -> SensorSpec:
    """The spec of a YAML mapping ``{type: ..., <params>}`` (a scene's or a configuration's sensor entry)."""
    if not isinstance(data, dict) or "type" not in data:
        raise ConfigError(f"{source}: sensor {name!r}: expected a mapping with a 'type' key; sensor types: "
                          f"{', '.join(sensor_types())}")
    params = {k: v for k, v in data.items() if k != "type"}
    return SensorSpec(name, str(data["type"]), params, source)


def scene_sensors(entries, model, cameras=()) -> list[Sensor]:
    """A scene's sensors, built through the registry: its ``cameras:`` (``cameras``: the parsed
    cameras/spec.CameraSpec list, registered as ``camera`` sensors) then its ``sensors:`` list (``entries``: each a
    mapping ``{name, type, <the type's parameters>}``, the parameters as a ``<ros2_control>`` ``<sensor>``'s
    ``<param>``s give them: force_torque parent_link / child_link / frame_id, imu frame_id, camera parent / pose /
    width / height / fov ...). ConfigError naming the entry (``sensors[<i>] (<name>)``; the scene loader prefixes
    the file) and what is wrong: not a mapping, no name or type, an unknown type (the valid ones listed), a bad
    parameter, a repeated name."""
    out = [sensor_class("camera").of(c, model, f"cameras[{i}]") for i, c in enumerate(cameras)]
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ConfigError(f"sensors: a list of sensor entries ({{name, type, <parameters>}}), got {entries!r}; "
                          f"sensor types: {', '.join(sensor_types())}")
    for i, entry in enumerate(entries):
        where = f"sensors[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: a mapping {{name, type, <parameters>}}, got {entry!r}")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{where}: each sensor has a 'name' (string; it names its state interfaces), got "
                              f"{entry!r}")
        kind = entry.get("type")
        if not isinstance(kind, str) or not kind:
            raise ConfigError(f"{where} ({name}): each sensor has a 'type'; sensor types: {', '.join(sensor_types())}")
        params = {k: v for k, v in entry.items() if k not in ("name", "type")}
        out.append(make_sensor(SensorSpec(name, kind, params, where), model))
    names = [s.name for s in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"sensors: names must be unique among the cameras and the sensors; repeated: {repeated}")
    return out
