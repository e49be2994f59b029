"""Parameters declared once, as generate_parameter_library declares a ros2_controllers controller's: each
:class:`Parameter` has its name, type, unit, default, bounds, read-only flag and description, and a
:class:`ParameterTable` derives from them the validation (one-line ConfigError naming the parameter, the value and
what is allowed), the ROS parameter descriptors (ros/parameters.py) and the start-up list of the parameters given
but not emulated. No rclpy.

Types are the ROS 2 parameter types by generate_parameter_library's names: ``bool``, ``int``, ``double``,
``string``, ``string_array``, ``double_array``, ``bool_array`` (an array parameter is declared with its array
type, so that rcl merges several ``--params-file`` into it as a real node does). A name may hold ``{joint}``: one
parameter per joint (``constraints.{joint}.goal``, generate_parameter_library's ``__map_joints``). Doubles must be
finite (a ``.nan`` tolerance is refused at start-up) unless ``finite=False``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from ..errors import ConfigError

TYPES = ("bool", "int", "double", "string", "string_array", "double_array", "bool_array")


@dataclass(frozen=True)
class Parameter:
    """One parameter. ``lower`` / ``upper``: inclusive bounds (``lower_open``: ``> lower``); ``choices``: the
    allowed values of a string; ``emulated`` False: a parameter of the real controller that the emulation reads
    but does not honour (listed at start-up); ``required``: no default."""

    name: str
    type: str
    default: object = None
    unit: str = ""
    description: str = ""
    lower: float | None = None
    upper: float | None = None
    lower_open: bool = False
    choices: tuple = ()
    read_only: bool = True
    required: bool = False
    finite: bool = True
    emulated: bool = True
    what: str = ""             # how the value is named in a message ("a rate": "must be a rate >= 0 Hz")

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"parameter {self.name!r}: unknown type {self.type!r}; types: {TYPES}")

    @property
    def is_array(self) -> bool:
        return self.type.endswith("_array")

    def bounds_text(self) -> str:
        """'in (0, 0.1]', '>= 0', 'one of a, b' (empty without bounds)."""
        def text(x):     # an integer bound in full (step_count's 1000000000, not 1e+09)
            return str(x) if isinstance(x, int) else f"{x:g}"
        lo, hi = self.lower, self.upper
        if lo is not None and hi is not None:
            return f"in {'(' if self.lower_open else '['}{text(lo)}, {text(hi)}]"
        if lo is not None:
            return f"{'>' if self.lower_open else '>='} {text(lo)}"
        if hi is not None:
            return f"<= {text(hi)}"
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        return ""

    def _bad(self, where: str, value, must: str):
        what = f"{self.what} " if self.what else ""
        unit = f" {self.unit}" if self.unit and self.type in ("double", "int", "double_array") else ""
        return ConfigError(f"{where}parameter '{self.name}': must be {what}{must}{unit}, got {value!r}")

    def check(self, value, where: str = ""):
        """``value`` (already of this parameter's type) checked against its bounds; ConfigError naming it
        (``where``: a prefix such as "controller 'arm' (...): ")."""
        for x in (value if self.is_array else [value]):
            if self.type.startswith("double") and self.finite and not math.isfinite(x):
                bounds = self.bounds_text()
                raise self._bad(where, value, bounds if self.what and bounds else
                                "a finite number" + (f" {bounds}" if bounds else ""))
            if self.type.startswith(("double", "int")) and not (isinstance(x, float) and math.isnan(x)):
                low_bad = self.lower is not None and (x <= self.lower if self.lower_open else x < self.lower)
                if low_bad or (self.upper is not None and x > self.upper):
                    raise self._bad(where, value, self.bounds_text())
            if self.choices and x not in self.choices:
                raise self._bad(where, value, self.bounds_text())
        return value

    def convert(self, value, where: str = ""):
        """``value`` as this parameter's type, checked against its bounds; ConfigError naming it."""
        try:
            out = _convert(self.type, value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}parameter '{self.name}': expected {self.type}, got {value!r}") from None
        return self.check(out, where)


def _convert(kind: str, value):
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError
        return value
    if kind == "int":
        if isinstance(value, bool) or float(value) != int(float(value)):
            raise ValueError
        return int(float(value))
    if kind == "double":
        if isinstance(value, bool) or isinstance(value, str):
            raise ValueError
        return float(value)
    if kind == "string":
        if not isinstance(value, str):
            raise ValueError
        return value
    if not isinstance(value, (list, tuple)):
        raise ValueError
    return [_convert(kind[:-len("_array")], v) for v in value]


class ParameterTable:
    """The parameters of one controller type (or of the node), in declaration order."""

    def __init__(self, *parameters: Parameter):
        self.parameters = tuple(parameters)
        self._exact = {p.name: p for p in parameters if "{" not in p.name}
        self._patterns = [(re.compile("^" + re.escape(p.name).replace(r"\{joint\}", r"(?P<joint>[^.]+)") + "$"), p)
                          for p in parameters if "{" in p.name]

    def __iter__(self):
        return iter(self.parameters)

    def names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def find(self, key: str) -> Parameter | None:
        """The parameter declaring ``key`` (a ``{joint}`` pattern matches any joint name), None if none."""
        p = self._exact.get(key)
        if p is not None:
            return p
        for pattern, p in self._patterns:
            if pattern.match(key):
                return p
        return None

    def values(self, given: dict, where: str, joints_key: str | None = None) -> dict:
        """Every declared parameter's value (``given`` or its default; ``{joint}`` parameters for the joints of
        the parameter ``joints_key``), converted and checked; ConfigError naming ``where``, the parameter and the
        problem. A ``{joint}`` key for a joint not in those joints is refused (a typo would otherwise be
        ignored)."""
        out = {}
        for p in self.parameters:
            if "{" in p.name:
                continue
            if p.name in given and given[p.name] is not None:
                out[p.name] = p.convert(given[p.name], where + ": ")
            elif p.required:
                raise ConfigError(f"{where}: parameter '{p.name}' is required")
            else:
                out[p.name] = p.default
        joints = [str(j) for j in (out.get(joints_key) or [])] if joints_key else []
        for pattern, p in self._patterns:
            for key, value in given.items():
                m = pattern.match(key)
                if m is None:
                    continue
                if m.group("joint") not in joints:
                    raise ConfigError(f"{where}: parameter '{key}' names joint '{m.group('joint')}', which is not "
                                      f"one of its joints ({', '.join(joints)})")
                out[key] = dataclasses.replace(p, name=key).convert(value, where + ": ")
            for j in joints:
                out.setdefault(p.name.replace("{joint}", j), p.default)
        return out

    def not_emulated(self, given) -> list[str]:
        """The keys of ``given`` that no parameter declares or that are declared as not emulated."""
        out = []
        for key in given:
            p = self.find(key)
            if p is None or not p.emulated:
                out.append(key)
        return out

    def rows(self) -> list[tuple]:
        """(name, type, unit, default, bounds, read-only, description) per parameter (docs, tests)."""
        return [(p.name, p.type, p.unit, p.default, p.bounds_text(), p.read_only, p.description)
                for p in self.parameters]
