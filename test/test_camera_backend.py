"""The camera render back-end (contact_sim_ros/cameras/backend.py): a headless EGL context from the project's own
set-up, an error naming what to install when it is missing, and a scene without cameras that needs none of it."""

import subprocess
import sys
import threading

import pytest

from contact_sim_ros.cameras import backend
from contact_sim_ros.cameras.backend import RenderBackendError, create_context


@pytest.mark.process
def test_headless_context_renders_offscreen():
    gl = create_context()
    try:
        ctx = gl.ctx
        assert ctx.version_code >= 330
        fbo = ctx.simple_framebuffer((8, 4))
        fbo.use()
        fbo.clear(0.25, 0.5, 1.0, 1.0)
        gl.finish()
        pixels = fbo.read(components=3)
        assert len(pixels) == 8 * 4 * 3 and pixels[:3] == bytes([64, 128, 255])
    finally:
        gl.release()


@pytest.mark.process
def test_context_refuses_another_thread():
    gl = create_context()
    errors = []

    def use():
        try:
            gl.check_thread()
        except RenderBackendError as exc:
            errors.append(str(exc))
    t = threading.Thread(target=use, name="not-the-owner")
    t.start()
    t.join()
    gl.check_thread()        # the owner may
    gl.release()
    assert errors and "not-the-owner" in errors[0] and "only in the thread that created it" in errors[0]


def test_missing_moderngl_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "moderngl", None)      # import moderngl -> ImportError
    with pytest.raises(RenderBackendError) as info:
        create_context()
    msg = str(info.value)
    for what in (*backend.DEBIAN_PACKAGES, *backend.PIP_PACKAGES, "scripts/ensure_venv.sh"):
        assert what in msg


def test_no_egl_library_names_what_to_install(monkeypatch):
    moderngl = backend.import_moderngl()

    def no_egl(*args, **kwargs):
        raise Exception("(detect) libEGL.so.1 not found")    # what glcontext raises without libegl1
    monkeypatch.setattr(moderngl, "create_standalone_context", no_egl)
    with pytest.raises(RenderBackendError, match="libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri"):
        create_context()


@pytest.mark.process
def test_scene_without_cameras_needs_no_backend():
    """Loading and stepping a scene without cameras imports neither moderngl nor the renderer."""
    code = ("import sys; sys.modules['moderngl'] = None\n"
            "from contact_sim_ros.sim.simulator import Simulator\n"
            "sim = Simulator('scenario_pick_shake_place', engine='tamsi', time_step=1e-3)\n"
            "sim.step(); assert sim.scene.cameras == []\n"
            "assert 'contact_sim_ros.cameras.renderer' not in sys.modules\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
