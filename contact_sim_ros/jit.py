"""Compiled kernels (numba) with one on-disk cache that every install location of the package shares.

Every kernel module decorates its functions with ``contact_sim_ros.jit.njit`` (numba's ``njit``, always with
``cache=True``). Compiling the kernels takes 15-60 s on 2 cores (TAMSI alone ~17 s), and numba's own caches are
per location: the ``__pycache__`` next to the source (a colcon install, a pip install and the checkout each
compile again; a read-only install never caches) or, with NUMBA_CACHE_DIR, a folder named after the source
directory's absolute path. Here the compiled code of ``contact_sim_ros/<dir>/<module>.py`` goes to
``cache_dir()/contact_sim_ros/<dir>/`` wherever the package is installed: numba keys each entry by a hash of the
source file's content, the signature and the CPU, so identical sources share the entries and a changed file is
compiled again (and its entries replaced).

``cache_dir()``, the first that applies:

1. ``$NUMBA_CACHE_DIR`` (``scripts/venv_env.sh`` sets it to ``<venv>/.cache/numba`` for the project venv);
2. ``<sys.prefix>/.cache/numba`` when Python runs in a writable venv (the same folder for ``.venv/bin/python``
   started without ``venv_run.sh``);
3. ``$XDG_CACHE_HOME/contact_sim_ros/numba``, default ``~/.cache/contact_sim_ros/numba`` (colcon / system
   installs).

If that folder cannot be written, numba's own locations are used (``__pycache__``, then its user-wide cache).

This module is the bottom layer: the kernel modules import only it (and numpy, math). Filling the cache and
asking what it holds (the warm-up, which steps a Simulator) is ``contact_sim_ros.kernel_cache``, at the top.

It also gives kernels what they need to call C functions of the package's compiled modules by address (the fused
tree step, sim/tree_step.py): ``c_call3`` ... ``c_call9`` (call the C function at an int64 address with integer
and float arguments, an int64 result), ``float_pointer`` / ``int_pointer`` (an int64 address as a float64 /
int64 pointer) and ``carray`` (numba's: an array view of a pointer). The address is a runtime argument, so the
kernels stay cache-able (a ctypes function object baked in as a global would not).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from numba import carray  # noqa: F401  (re-exported for the kernels: an array view of a pointer)
from numba import njit as _numba_njit
from numba.core import caching as _caching
from numba.core import types as _types
from numba.extending import intrinsic as _intrinsic

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the folder holding the package

KERNELS: list = []   # (module name, dispatcher) of every function decorated with njit below, in definition order


def cache_dir() -> Path:
    """The folder that holds the compiled kernels (see the module docstring)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env)
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix) and os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / ".cache" / "numba"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contact_sim_ros" / "numba"


class _PackageCacheLocator(_caching._SourceFileBackedLocatorMixin, _caching._CacheLocator):
    """numba cache locator for this package's modules: ``cache_dir()/<path of the module's folder relative to
    the folder holding the package>`` (e.g. ``.../numba/contact_sim_ros/engines``), independent of where the
    package is installed. The source stamp is numba's (a hash of the file's content)."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE_PARENT)
        self._cache_path = str(cache_dir() / rel)

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        rel = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE_PARENT)
        if rel.startswith(".."):
            return None                     # not a module of this package
        return super().from_function(py_func, py_file)   # None when the folder cannot be written


class _PackageCacheImpl(_caching.CompileResultCacheImpl):
    _locator_classes = [_PackageCacheLocator, *_caching.CompileResultCacheImpl._locator_classes]


class _PackageFunctionCache(_caching.FunctionCache):
    _impl_class = _PackageCacheImpl


def njit(*args, **kwargs):
    """``numba.njit`` with the package's shared on-disk cache (``cache=True`` is implied)."""
    kwargs.pop("cache", None)

    def register(dispatcher):
        dispatcher._cache = _PackageFunctionCache(dispatcher.py_func)     # what enable_caching() does
        KERNELS.append((dispatcher.py_func.__module__, dispatcher))
        return dispatcher

    if len(args) == 1 and callable(args[0]) and not kwargs:
        return register(_numba_njit(args[0]))
    decorator = _numba_njit(*args, **kwargs)
    return lambda func: register(decorator(func))


# ----------------------------------------------------------------------------- C functions called by address

def _c_call_typing(fn, argtys):
    """int64(fn, *argtys) for an integer address and integer (pointers: ``arr.ctypes.data``) or float arguments."""
    if not isinstance(fn, _types.Integer) or not all(isinstance(t, (_types.Integer, _types.Float)) for t in argtys):
        return None
    return _types.int64(fn, *argtys)


def _c_call_codegen(context, builder, signature, args):
    """Call the C function at address args[0] as int64 f(int64 or double, ...): the address cast to numba's
    external-function-pointer type of that C signature (x86-64 passes integers and pointers alike)."""
    argtys = tuple(_types.float64 if isinstance(t, _types.Float) else _types.int64 for t in signature.args[1:])
    pointer_type = _types.ExternalFunctionPointer(_types.int64(*argtys), get_pointer=None)
    address = context.cast(builder, args[0], signature.args[0], _types.int64)
    function = builder.inttoptr(address, context.get_value_type(pointer_type))
    values = [context.cast(builder, a, t, want) for a, t, want in zip(args[1:], signature.args[1:], argtys)]
    return builder.call(function, values)


@_intrinsic
def c_call3(typingctx, fn, a0, a1, a2):
    """``fn(a0, a1, a2)``: the C function at address ``fn`` (int64 result)."""
    return _c_call_typing(fn, (a0, a1, a2)), _c_call_codegen


@_intrinsic
def c_call5(typingctx, fn, a0, a1, a2, a3, a4):
    """``fn(a0, ..., a4)``: the C function at address ``fn`` (int64 result)."""
    return _c_call_typing(fn, (a0, a1, a2, a3, a4)), _c_call_codegen


@_intrinsic
def c_call6(typingctx, fn, a0, a1, a2, a3, a4, a5):
    """``fn(a0, ..., a5)``: the C function at address ``fn`` (int64 result)."""
    return _c_call_typing(fn, (a0, a1, a2, a3, a4, a5)), _c_call_codegen


@_intrinsic
def c_call9(typingctx, fn, a0, a1, a2, a3, a4, a5, a6, a7, a8):
    """``fn(a0, ..., a8)``: the C function at address ``fn`` (int64 result)."""
    return _c_call_typing(fn, (a0, a1, a2, a3, a4, a5, a6, a7, a8)), _c_call_codegen


def _pointer_codegen(context, builder, signature, args):
    address = context.cast(builder, args[0], signature.args[0], _types.int64)
    return builder.inttoptr(address, context.get_value_type(signature.return_type))


@_intrinsic
def float_pointer(typingctx, address):
    """An int64 address as a float64 pointer (for ``carray``)."""
    if not isinstance(address, _types.Integer):
        return None
    return _types.CPointer(_types.float64)(address), _pointer_codegen


@_intrinsic
def int_pointer(typingctx, address):
    """An int64 address as an int64 pointer (for ``carray``)."""
    if not isinstance(address, _types.Integer):
        return None
    return _types.CPointer(_types.int64)(address), _pointer_codegen


if __name__ == "__main__":
    # `python -m contact_sim_ros.jit` (scripts/ensure_venv.sh's step 6) = `python -m contact_sim_ros.kernel_cache`.
    # Script-only code: not run on import, so this is no arrow from the decorator up to the warm-up.
    from contact_sim_ros.kernel_cache import main
    sys.exit(main())
