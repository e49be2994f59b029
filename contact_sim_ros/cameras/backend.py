"""The render back-end: an OpenGL 3.3 context without a display, through EGL (moderngl + glcontext).

On a machine without a GPU, Mesa's llvmpipe renders on the CPU; where a GPU and its EGL driver are present the
same code uses them. What must be installed (scripts/ensure_venv.sh does both): the Debian packages
``libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri`` and the pip packages pinned in requirements.txt
(``moderngl``, ``glcontext``).

A GL context belongs to the thread that made it: used from another thread, moderngl silently returns the
previous frame (docs: ../shared/notes/rendering-headless.md). ``create_context`` therefore records its thread
and ``check_thread`` refuses any other.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

from ..errors import ContactSimError

DEBIAN_PACKAGES = ("libegl1", "libegl-mesa0", "libgl1", "libgl1-mesa-dri")
PIP_PACKAGES = ("moderngl==5.13.0", "glcontext==3.1.0")
INSTALL_HINT = (f"install the render back-end: apt-get install {' '.join(DEBIAN_PACKAGES)} and "
                f"pip install {' '.join(PIP_PACKAGES)} (both done by scripts/ensure_venv.sh, i.e. make venv)")


class RenderBackendError(ContactSimError):
    """The camera render back-end is missing or cannot make a context (what to install is named)."""


def import_moderngl():
    """moderngl, or RenderBackendError naming what to install. Deferred (not a module-level import): only a
    scene with cameras needs it, and a node without cameras must start without it."""
    try:
        import moderngl
    except ImportError as exc:
        raise RenderBackendError(f"cameras need moderngl, which is not importable ({exc}); {INSTALL_HINT}") from None
    return moderngl


class GLContext:
    """A standalone (off-screen) OpenGL >= 3.3 context and the thread that owns it."""

    def __init__(self, ctx, owner: threading.Thread):
        self.ctx = ctx
        self.owner = owner
        self.renderer = ctx.info.get("GL_RENDERER", "?")
        self._gl_finish = _gl_finish_function()

    def check_thread(self) -> None:
        """RenderBackendError unless called from the thread that created the context."""
        if threading.current_thread() is not self.owner:
            raise RenderBackendError(
                f"the camera GL context was made in thread {self.owner.name!r} and is used from "
                f"{threading.current_thread().name!r}: a GL context renders only in the thread that created it "
                f"(elsewhere it returns a stale frame); create the renderer in the render thread")

    def finish(self) -> None:
        """Wait for the GPU (llvmpipe: the raster threads) to finish, with the GIL released (a ctypes call):
        moderngl's own calls hold the GIL while llvmpipe rasterises."""
        if self._gl_finish is not None:
            self._gl_finish()
        else:
            self.ctx.finish()

    def release(self) -> None:
        self.ctx.release()


def _gl_finish_function():
    """glFinish through ctypes (releases the GIL while it waits), or None if no GL library is found."""
    for name in ("OpenGL", "GL"):
        path = ctypes.util.find_library(name)
        if path:
            try:
                fn = ctypes.CDLL(path).glFinish
            except (OSError, AttributeError):
                continue
            fn.restype, fn.argtypes = None, []
            return fn
    return None


def create_context() -> GLContext:
    """A headless OpenGL 3.3 context owned by the calling thread; RenderBackendError naming what to install."""
    moderngl = import_moderngl()
    try:
        ctx = moderngl.create_standalone_context(backend="egl", require=330)
    except Exception as exc:     # glcontext raises plain Exceptions (no libEGL, no EGL device, no GL 3.3)
        raise RenderBackendError(f"cannot create a headless OpenGL 3.3 context through EGL ({exc}); "
                                 f"{INSTALL_HINT}") from None
    return GLContext(ctx, threading.current_thread())
