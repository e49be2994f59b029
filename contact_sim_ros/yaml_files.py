"""Reading configuration mappings from YAML with errors that name the file, the thing and the valid keys.

Every YAML text the package reads goes through ``load_yaml`` (``YamlLoader``): PyYAML's safe loader follows
YAML 1.1, where a float needs a dot and a signed exponent, so ``1e-4``, ``-2E5``, ``1.0e5`` and ``.5e3`` are
read as strings (``stiction_tolerance: 1e-4`` -> "got '1e-4'"). ``YamlLoader`` adds YAML 1.2's exponent
forms as floats; everything else resolves as in ``yaml.safe_load``.

Where PyYAML has its libyaml binding (``yaml.__with_libyaml__``), a document is parsed by ``YamlCLoader``
(libyaml's parser, the same constructor and resolvers: the same values, ~10x faster, which a campaign trial pays
for every configuration file it reads); a document libyaml rejects is parsed again by the pure-Python
``YamlLoader``, whose error (the problem, its line and column, the line quoted) is the one raised.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from .errors import ConfigError


class YamlLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also resolves numbers in exponent form as floats: ``1e-4``, ``-2E5``,
    ``+3e+2``, ``1.0e5``, ``1.e5``, ``.5e3`` (YAML 1.2 core schema; YAML 1.1 reads them as strings)."""


def _with_exponent_floats(loader_class):
    """``loader_class`` with YAML 1.2's exponent-form floats among its implicit resolvers (in place)."""
    loader_class.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$"),
        list("-+0123456789."))
    return loader_class


_with_exponent_floats(YamlLoader)

if getattr(yaml, "__with_libyaml__", False):
    class YamlCLoader(yaml.CSafeLoader):
        """``YamlLoader`` on libyaml's parser (``yaml.CSafeLoader``: the same SafeConstructor and resolvers)."""

    _with_exponent_floats(YamlCLoader)
else:                  # PyYAML built without libyaml: the pure-Python loader only
    YamlCLoader = None


#: the loaders to try in order: libyaml's first where there is one; the last one's error is the one to raise
YAML_LOADERS = (YamlLoader,) if YamlCLoader is None else (YamlCLoader, YamlLoader)


def load_yaml(text: str):
    """``yaml.safe_load`` with exponent-form floats; raises ``yaml.YAMLError`` as ``yaml.safe_load`` does (parsed
    by ``YamlCLoader`` where there is libyaml; a document it rejects by ``YamlLoader``, for the same error)."""
    if YamlCLoader is not None:
        try:
            return yaml.load(text, Loader=YamlCLoader)  # noqa: S506 - a CSafeLoader subclass
        except yaml.YAMLError:
            pass       # the pure-Python loader's error (it quotes the line), or its value where libyaml differs
    return yaml.load(text, Loader=YamlLoader)  # noqa: S506 - a SafeLoader subclass


def parse_yaml(text: str, what: str):
    """``load_yaml(text)``; ConfigError naming ``what`` (e.g. "engine option 'x'") on malformed YAML."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{what}: malformed YAML {text!r}: {detail}") from None


def missing_file(path) -> str:
    """Why ``path`` cannot be read as a file: 'is a directory, not a file' or 'file not found'."""
    return "is a directory, not a file" if Path(path).is_dir() else "file not found"


def read_text_file(path: str | Path, what: str) -> str:
    """The text of the file ``path``; ConfigError naming the file and the problem (not found, a directory, not
    readable, not UTF-8 text) instead of an OSError. ``what``: e.g. 'controllers file', for the message."""
    p = Path(path)
    try:
        return p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: {what}: is a directory, not a file") from None
    except PermissionError:
        raise ConfigError(f"{path}: {what}: permission denied") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {what}: not a text file ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {what}: cannot be read: {exc.strerror or exc}") from None


def load_yaml_file(path: str | Path, what: str):
    """The YAML document in the file ``path`` (None if empty); ConfigError naming the file on an unreadable file
    (``read_text_file``) or malformed YAML (one line: the problem and its line and column)."""
    text = read_text_file(path, what)
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{path}: malformed YAML ({what}): {detail}") from None


def read_mapping(path: str | Path, what: str) -> dict:
    """The mapping in a YAML file (an empty file is {}); ConfigError naming the file on malformed YAML or a
    non-mapping. ``what``: e.g. 'a robot preset', for the message."""
    data = load_yaml_file(path, what)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} is a mapping, got {type(data).__name__}")
    return data


def check_keys(mapping: dict, valid, where: str) -> None:
    """ConfigError listing the unknown and the valid keys."""
    unknown = set(mapping) - set(valid)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {sorted(valid)}")


def parse_vector(value, n: int, where: str) -> np.ndarray:
    """``n`` finite numbers (a list, or a number when n = 1) -> float array (n,); ConfigError naming ``where``."""
    try:
        arr = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {n} numbers, got {value!r}") from None
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{where}: expected {n} finite numbers, got {value!r}")
    return arr


def parse_pose(value, where: str):
    """``{xyz: [x, y, z], rpy: [r, p, y]}`` (m, rad; either key optional) or None -> ``pinocchio.SE3``."""
    if value is None:
        return pin.SE3.Identity()
    if not isinstance(value, dict) or set(value) - {"xyz", "rpy"}:
        raise ConfigError(f"{where}: a pose is a mapping with keys 'xyz' (m) and 'rpy' (rad), got {value!r}")
    xyz = parse_vector(value.get("xyz", [0, 0, 0]), 3, f"{where}.xyz")
    rpy = parse_vector(value.get("rpy", [0, 0, 0]), 3, f"{where}.rpy")
    return pin.SE3(pin.rpy.rpyToMatrix(*rpy), xyz)
