"""Compiled kernels (numba) with one on-disk cache that every install location of the package shares.

Every kernel module decorates its functions with ``contact_sim_ros.jit.njit`` (numba's ``njit``, always with
``cache=True``). Compiling the kernels takes 15-60 s on 2 cores (TAMSI alone ~17 s), and numba's own caches are
per location: the ``__pycache__`` next to the source (a colcon install, a pip install and the checkout each
compile again; a read-only install never caches) or, with NUMBA_CACHE_DIR, a folder named after the source
directory's absolute path. Here the compiled code of ``contact_sim_ros/<dir>/<module>.py`` goes to
``cache_dir()/contact_sim_ros/<dir>/`` wherever the package is installed.

An entry is found by numba's index key (the signature, the CPU, the function's bytecode) and is valid while the
module's source stamp is the one it was saved with. numba's own stamp is a hash of the module's file alone, but a
kernel that calls a kernel of another module (``sim/free_body_step.py`` calls ``engines/tamsi_kernels.py``, many
callees ``inline='always'``) holds the callee's compiled code in its entry: a changed callee with an unchanged
caller file (a merge, a checkout, an editable install) would load the old callee's code. Here the stamp is
``source_stamp()``: a SHA-256 of the content (and the path inside the package) of the module's file and of every
package module it imports at its top level, transitively (kernel modules import only this module, numpy, math and
other kernel modules). So a changed callee compiles its callers again, and identical sources share the entries
whatever folder they are installed in. It is computed once per module per process (a few ms for all kernel modules).

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

import ast
import hashlib
import os
import re
import sys
from pathlib import Path

from numba import carray  # noqa: F401  (re-exported for the kernels: an array view of a pointer)
from numba import njit as _numba_njit
from numba.core import caching as _caching
from numba.core import types as _types
from numba.extending import intrinsic as _intrinsic

PACKAGE = "contact_sim_ros"

KERNELS: list = []   # (module name, dispatcher) of every function decorated with njit below, in definition order

_IMPORT_LINE = re.compile(rb"^(?:import|from)[ \t\\].*$", re.MULTILINE)
_FILES: dict = {}    # (path, package parent, mtime, size) -> (content's SHA-256, package_imports)
_STAMPS: dict = {}   # absolute path of a kernel module -> its source_stamp(), once per process


def cache_dir() -> Path:
    """The folder that holds the compiled kernels (see the module docstring)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env)
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix) and os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / ".cache" / "numba"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contact_sim_ros" / "numba"


def package_parent(module: str, py_file: str) -> str | None:
    """The folder holding the package (``<site-packages>``) that the package module ``module`` (dotted name)
    was loaded from ``py_file`` (its absolute path) in, or None when ``module`` is not a module of this package."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    folder, name = os.path.split(os.path.abspath(py_file))
    stem = os.path.splitext(name)[0]
    names = [] if stem == "__init__" else [stem]
    while len(names) < len(parts) and folder != os.path.dirname(folder):
        folder, name = os.path.split(folder)
        names.insert(0, name)
    return folder if names == parts else None


def _module_file(parent: str, parts: list) -> str | None:
    """The file of the package module ``parts`` (``["contact_sim_ros", "sim", "step_kernels"]``) under
    ``parent``: ``<...>.py`` or the package's ``__init__.py``; None when neither exists."""
    base = os.path.join(parent, *parts)
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _top_level_imports(source: bytes) -> list:
    """The import statements (ast nodes) at the top level of a module's source: the statements starting at a
    line's column 0 with ``import`` or ``from`` (with their continuation lines), parsed together (a whole
    ``ast.parse`` of the 13 kernel modules costs ~60 ms). A docstring line that starts so but is no statement is
    skipped (the statements are then parsed one by one); one that is an import statement only adds a file to the
    stamp."""
    statements = []
    for match in _IMPORT_LINE.finditer(source):
        end = match.end()
        statement = match.group()
        while (statement.count(b"(") > statement.count(b")") or statement.endswith(b"\\")) and end < len(source):
            nxt = source.find(b"\n", end + 1)
            nxt = len(source) if nxt < 0 else nxt
            statement, end = source[match.start():nxt], nxt
        statements.append(statement)
    try:
        return ast.parse(b"\n".join(statements)).body          # one parse, unless a line is no statement
    except SyntaxError:
        pass
    nodes = []
    for statement in statements:
        try:
            nodes.extend(ast.parse(statement).body)
        except SyntaxError:
            continue
    return nodes


def package_imports(py_file: str, parent: str, source: bytes | None = None) -> list[str]:
    """The files of the package modules that the module in ``py_file`` (under ``parent``, the folder holding the
    package) imports at its top level, absolute (``contact_sim_ros.x``) or relative (``from ..x import y``, ``from
    . import y``; a ``y`` that is a module counts as that module). Imports inside functions or ``if`` blocks (as
    this module's ``__main__`` block) are not followed. ``source``: the file's content, if already read."""
    if source is None:
        with open(py_file, "rb") as f:
            source = f.read()
    nodes = _top_level_imports(source)
    rel = os.path.relpath(os.path.abspath(py_file), parent).split(os.sep)
    package = rel[:-1]                       # the package the module is in (an __init__.py: its own)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            candidates = [[a.name.split(".")] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - (node.level - 1)] if node.level else []
            base = base + (node.module.split(".") if node.module else [])
            candidates = [[base + [a.name], base] for a in node.names]      # a submodule, else an attribute
        else:
            continue
        for options in candidates:
            for parts in options:
                path = _module_file(parent, parts) if parts and parts[0] == PACKAGE else None
                if path is not None:
                    found.append(path)
                    break
    return sorted(set(found))


def _file_digest_and_imports(path: str, parent: str) -> tuple:
    """(SHA-256 of the file's content, ``package_imports``), read once per process and file version."""
    st = os.stat(path)
    key = (path, parent, st.st_mtime_ns, st.st_size)
    entry = _FILES.get(key)
    if entry is None:
        with open(path, "rb") as f:
            content = f.read()
        entry = _FILES[key] = (hashlib.sha256(content).digest(), package_imports(path, parent, content))
    return entry


def source_stamp(py_file: str, parent: str) -> str:
    """SHA-256 (hex) of the kernel module ``py_file``'s source and of every package module it imports,
    transitively (``package_imports``), each with its path inside the package (``parent``: the folder holding the
    package): the same for identical sources in any folder, another one when the module or one of its imports
    changes."""
    files, todo = {}, [os.path.abspath(py_file)]
    while todo:
        path = todo.pop()
        if path not in files:
            digest, imports = _file_digest_and_imports(path, parent)
            files[path] = (os.path.relpath(path, parent).replace(os.sep, "/"), digest)
            todo.extend(os.path.abspath(p) for p in imports)
    stamp = hashlib.sha256()
    for rel, digest in sorted(files.values()):
        stamp.update(rel.encode() + b"\0" + digest)
    return stamp.hexdigest()


class _PackageCacheLocator(_caching._SourceFileBackedLocatorMixin, _caching._CacheLocator):
    """numba cache locator for this package's modules: ``cache_dir()/<path of the module's folder relative to
    the folder holding the package>`` (e.g. ``.../numba/contact_sim_ros/engines``), independent of where the
    package is installed. The source stamp is ``source_stamp()`` (the module's and its imports' content)."""

    def __init__(self, py_func, py_file):
        self._py_file = os.path.abspath(py_file)
        self._lineno = py_func.__code__.co_firstlineno
        self._parent = package_parent(py_func.__module__, py_file)
        rel = os.path.relpath(os.path.dirname(self._py_file), self._parent)
        self._cache_path = str(cache_dir() / rel)

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        stamp = _STAMPS.get(self._py_file)
        if stamp is None:
            stamp = _STAMPS[self._py_file] = source_stamp(self._py_file, self._parent)
        return stamp

    @classmethod
    def from_function(cls, py_func, py_file):
        if package_parent(py_func.__module__, py_file) is None:
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


def inline_helper(func):
    """numba's ``njit(inline="always")`` without a cache entry of its own: a small helper (an address table's view,
    contact_sim_ros/address_table.py) compiled only into its callers, whose cached code holds it (their cache stamp
    covers its module). Not a kernel of ``KERNELS``: the warm-up has nothing of its own to fill for it."""
    return _numba_njit(inline="always")(func)


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



@_intrinsic
def bool_pointer(typingctx, address):
    """An int64 address as a pointer to numpy's one-byte booleans (for ``carray``)."""
    if not isinstance(address, _types.Integer):
        return None
    return _types.CPointer(_types.boolean)(address), _pointer_codegen

if __name__ == "__main__":
    # `python -m contact_sim_ros.jit` (scripts/ensure_venv.sh's step 6) = `python -m contact_sim_ros.kernel_cache`.
    # Script-only code: not run on import, so this is no arrow from the decorator up to the warm-up.
    from contact_sim_ros.kernel_cache import main
    sys.exit(main())
