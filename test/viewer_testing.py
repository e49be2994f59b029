"""Helpers of the viewer tests (test_viewer.py, ros/test_spawned_objects.py): the objects' blue in a viewer page."""

from __future__ import annotations

import time
from pathlib import Path

from contact_sim_ros.viewer.headless_browser import object_pixel_fraction


class BluePixels:
    """The objects' blue in the page ``browser`` shows (a HeadlessChromium): the fraction of the scene's pixels
    (headless_browser.object_pixel_fraction) of a screenshot saved in ``folder`` as ``<tag>.png``."""

    def __init__(self, browser, folder: Path):
        self.browser, self.folder = browser, Path(folder)

    def __call__(self, tag: str) -> float:
        """The fraction now (a screenshot ``<tag>.png``)."""
        path = self.folder / f"{tag}.png"
        self.browser.screenshot(path)
        return object_pixel_fraction(path)

    def wait(self, predicate, what: str, timeout: float = 60.0) -> float:
        """The first fraction for which ``predicate`` holds, a screenshot every 0.5 s (``<what>_<k>.png``); an
        AssertionError naming ``what`` and the last fraction after ``timeout`` s (wall time: the page's drawing)."""
        deadline, k = time.monotonic() + timeout, 0
        while True:
            k += 1
            value = self(f"{what}_{k}")
            if predicate(value):
                return value
            assert time.monotonic() < deadline, f"{what}: blue fraction {value:.4f}"
            time.sleep(0.5)
