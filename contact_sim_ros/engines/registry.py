"""Name -> engine class registry. The one place where engine names are validated."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from ..errors import EngineError, unknown_choice

_ENGINES: dict[str, type] = {}


def register_engine(cls):
    """Class decorator: register an engine class under ``cls.name``."""
    if cls.name in _ENGINES and _ENGINES[cls.name] is not cls:
        raise EngineError(f"engine name {cls.name!r} registered twice")
    _ENGINES[cls.name] = cls
    return cls


def engine_names() -> list[str]:
    _load_builtin_engines()
    return sorted(_ENGINES)


def engine_class(name: str):
    _load_builtin_engines()
    try:
        return _ENGINES[name]
    except KeyError:
        raise EngineError(unknown_choice("engine", name, _ENGINES)) from None


def make_engine(name: str, model, options=None):
    """Instantiate engine ``name`` for ``model`` with ``options`` (dict or the engine's Options)."""
    return engine_class(name)(model, options)


_loaded = False


def _load_builtin_engines() -> None:
    """Import every module of this package so that the engines' @register_engine decorators run: an engine is
    its module, named nowhere else (a missing dependency inside a module is a bug unless the engine guards it)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__package__}.{module.name}")
