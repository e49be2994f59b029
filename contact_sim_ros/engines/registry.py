"""Name -> engine class registry. The one place where engine names are validated."""

from __future__ import annotations

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
    """Import the engine modules so that their @register_engine decorators run (each optional module may be
    missing its optional dependency; it then simply does not register)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib
    for module in ("semi_implicit", "tamsi", "lagged", "quasistatic_miqp", "lcp_minimal"):
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            # Only a missing engine module itself is tolerated; a missing dependency inside it is a bug
            # unless the engine guards it.
            if exc.name != f"{__package__}.{module}":
                raise
