"""Reading configuration mappings from YAML with errors that name the file, the thing and the valid keys."""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import ConfigError


def read_mapping(path: str | Path, what: str) -> dict:
    """The mapping in a YAML file (an empty file is {}); ConfigError naming the file on malformed YAML or a
    non-mapping. ``what``: e.g. 'a robot preset', for the message."""
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: malformed YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {what} is a mapping, got {type(data).__name__}")
    return data


def check_keys(mapping: dict, valid, where: str) -> None:
    """ConfigError listing the unknown and the valid keys."""
    unknown = set(mapping) - set(valid)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; valid keys: {sorted(valid)}")
