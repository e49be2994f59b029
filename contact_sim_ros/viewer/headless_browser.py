"""Drive a headless Chromium through the DevTools protocol: load the viewer page, click its buttons, read its
texts (the click tests of the viewer; ``benchmarks/viewer/run.py`` uses it to attach a browser).

Debian's ``chromium`` (installed by the project's set-up) with software WebGL (SwiftShader); the protocol is
spoken over a websocket with the ``websockets`` package (a viser dependency).
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
import base64

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
                  "--use-angle=swiftshader", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--mute-audio")


class BrowserError(RuntimeError):
    """Chromium could not be started, or the page did not do what was asked in time."""


class HeadlessChromium:
    """One headless Chromium showing ``url``; ``evaluate`` runs JavaScript in the page (DevTools protocol).

    ``timeout`` (s) bounds every wait; ``close()`` (or the context manager) kills the browser and its profile.
    """

    def __init__(self, url: str, timeout: float = 30.0, window_size=(1000, 700)):
        if CHROMIUM is None:
            raise BrowserError("Debian's chromium is not installed (the project's set-up installs it)")
        self.timeout = float(timeout)
        self._profile = tempfile.mkdtemp(prefix="contact-sim-chromium-")
        self._ids = itertools.count(1)
        self._ws = None
        self.process = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}",
             f"--window-size={window_size[0]},{window_size[1]}", "--remote-debugging-port=0", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.process.pid
        try:
            self._connect(url)
        except BaseException:
            self.close()
            raise

    def _connect(self, url: str) -> None:
        from websockets.sync.client import connect  # deferred: only the viewer's tests need it

        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not port_file.is_file() or not port_file.read_text().strip():
            if self.process.poll() is not None:
                raise BrowserError(f"chromium exited with code {self.process.returncode} before it listened")
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium did not open its DevTools port within {self.timeout} s")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            if pages:
                break
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium shows no page for {url}")
            time.sleep(0.05)
        self._ws = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=self.timeout)

    def command(self, method: str, **params) -> dict:
        """Send one DevTools command and return its result."""
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"no answer to {method} within {self.timeout} s")
            reply = json.loads(self._ws.recv(timeout=remaining))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        result = self.command("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"JavaScript error in {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float | None = None):
        """Poll a JavaScript expression until it is truthy; returns its value."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {what}")
            time.sleep(0.1)

    # -------------------------------------------------------------- the viewer's page (viser GUI)

    def wait_for_button(self, label: str, timeout: float | None = None) -> None:
        self.wait_for(_find_button(label) + " !== undefined", f"a button {label!r} on the page", timeout)

    def click_button(self, label: str) -> None:
        """Click the viser GUI button whose text is ``label`` (a real DOM click event)."""
        self.wait_for_button(label)
        self.evaluate(_find_button(label) + ".click()")

    def text_value(self, label: str) -> str:
        """The value of the viser GUI text field labelled ``label``."""
        return self.wait_for(f"{text_field_js(label)} !== null && {text_field_js(label)}",
                             f"a text field {label!r} on the page")

    def panel_layout(self, labels=(), buttons=(), timeout: float | None = None, settle: float = 0.3) -> dict:
        """Wait until the viser panel shows the text fields ``labels`` and the buttons ``buttons`` and its layout
        has stopped moving (the panel grows with an animation as its content arrives), then return
        ``{name: {"value" (text fields), "rect": [x, y, width, height] in screenshot pixels}}``. The panel's
        content arrives over the websocket after the page has loaded: a screenshot taken without this wait can
        show the scene next to an empty panel."""
        expr = ("(() => { const out = {}; const ratio = window.devicePixelRatio || 1;"
                " const box = e => { const r = e.getBoundingClientRect();"
                " return [r.x * ratio, r.y * ratio, r.width * ratio, r.height * ratio]; };"
                f" for (const name of {json.dumps(list(labels))}) {{"
                "   for (const l of document.querySelectorAll('label')) if (l.textContent.trim() === name) {"
                "     let e = l; while (e && !e.querySelector('input')) e = e.parentElement;"
                "     if (e) { const i = e.querySelector('input'); out[name] = {value: i.value, rect: box(i)}; } } }"
                f" for (const name of {json.dumps(list(buttons))}) {{"
                "   const b = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === name);"
                "   if (b) out[name] = {rect: box(b)}; }"
                " return JSON.stringify(out); })()")
        wanted = set(labels) | set(buttons)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        last = None
        while True:
            layout = json.loads(self.evaluate(expr))
            complete = set(layout) == wanted and all(v["rect"][2] > 0 and v["rect"][3] > 0 for v in layout.values())
            if complete and layout == last:
                return layout
            if time.monotonic() > deadline:
                raise BrowserError(f"the panel did not show {sorted(wanted)} (shown: {sorted(layout)}) in time")
            last = layout if complete else None
            time.sleep(settle)

    def screenshot(self, path) -> None:
        data = self.command("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            except Exception:  # noqa: BLE001 - the browser may already be gone
                pass
            self._ws = None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def object_pixel_fraction(png) -> float:
    """Fraction of a viewer screenshot's scene pixels (a 1000 x 700 window, without the side panel's blue buttons,
    the notice and the axes gizmo) in the objects' blue (scene_viewer.OBJECT_COLOR under the scene's lighting)."""
    import matplotlib.image  # deferred: matplotlib (~0.5 s to import), only for the plots
    image = matplotlib.image.imread(str(png))[200:480, 100:640, :3]
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    return float((((b - r) > 0.25) & (b > g)).mean())


def _find_button(label: str) -> str:
    return ("[...document.querySelectorAll('button')].find(b => b.textContent.trim() === "
            f"{json.dumps(label)})")


def text_field_js(label: str) -> str:
    """A JavaScript expression: the value of the viser GUI text field labelled ``label`` (null if not shown).
    The label's ``for`` does not name the input (viser 1.1): the input is the one in the label's row."""
    return ("(() => { for (const l of document.querySelectorAll('label')) if (l.textContent.trim() === "
            f"{json.dumps(label)}) {{ let e = l; while (e && !e.querySelector('input')) e = e.parentElement; "
            "if (e) return e.querySelector('input').value; } return null; })()")
