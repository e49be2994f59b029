"""Vendors' files for the tests, read where they are kept, never copied into the project (issue 41, item 7).

Robot vendors' files as they ship them (franka_ros2's and the UR driver's controllers files, the LBR stack's,
franka_description and lbr_description) are kept OUTSIDE the project in ``../shared/vendor/`` relative to the
project's root (README.md there lists them). Every test that reads one goes through :func:`vendor_path`: where that
folder is absent (a clone outside the project's machines) the test is skipped with that reason; where the folder
exists, a missing file is a failure (a renamed or lost vendor file must not turn a test into a skip).
``vendor_package_path(monkeypatch)`` points ROS_PACKAGE_PATH at the robot descriptions, as a user's workspace
would (``$(find franka_description)`` in a xacro, ``package://`` mesh URIs).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
VENDOR_DIR = PROJECT_ROOT.parent / "shared" / "vendor"
DESCRIPTIONS = ("robot_descriptions",)


def vendor_dir() -> Path:
    """``../shared/vendor`` (relative to the project root); the calling test is skipped if it is absent."""
    if not VENDOR_DIR.is_dir():
        pytest.skip(f"the vendors' files folder {VENDOR_DIR} (../shared/vendor relative to the project root) is "
                    f"absent on this machine")
    return VENDOR_DIR


def vendor_path(*parts: str) -> Path:
    """A vendor file or folder, e.g. ``vendor_path("ros2_control_files", "ur_controllers.ur_driver.yaml")``:
    skipped where the vendor folder is absent, an assertion error naming the path where only the file is."""
    path = vendor_dir().joinpath(*parts)
    assert path.exists(), f"{path} is missing from the vendors' files folder {VENDOR_DIR} (see its README.md)"
    return path


def vendor_package_path(monkeypatch) -> Path:
    """Put ``robot_descriptions/`` (franka_description, lbr_description) first on ROS_PACKAGE_PATH for the test
    (``monkeypatch``), as a user's workspace has them; returns that folder."""
    root = vendor_path(*DESCRIPTIONS)
    monkeypatch.setenv("ROS_PACKAGE_PATH", os.pathsep.join(
        [str(root)] + [d for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]))
    return root
