"""The one exception tree of the package.

Messages name the file, joint, parameter or engine at fault and, where there is a closed set, the valid
choices, so that a user can fix the input without reading the code.
"""


class ContactSimError(Exception):
    """Base class of every error raised on purpose by contact_sim_ros."""


class ModelError(ContactSimError):
    """A URDF, mesh, robot preset or scene could not be turned into a model (file and problem named)."""


class ConfigError(ContactSimError):
    """A configuration value (YAML, ROS parameter, engine option) is invalid (parameter and valid values named)."""


class EngineError(ContactSimError):
    """An engine was asked for something it cannot do (unknown name, unsupported scene)."""


class SolverError(ContactSimError):
    """A contact solve failed and could not be recovered by sub-stepping (sim time and cause named)."""


def unknown_choice(kind: str, name: str, valid, plural: str | None = None) -> str:
    """Format 'unknown <kind> 'x'; valid <kinds>: a, b, c' consistently everywhere."""
    valid = sorted(set(valid))
    plural = plural or (kind[:-1] + "ies" if kind.endswith("y") else kind + "s")
    return f"unknown {kind} {name!r}; valid {plural}: {', '.join(valid) if valid else '(none)'}"
