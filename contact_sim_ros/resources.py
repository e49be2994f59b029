"""Where the package's run-time data (config/, urdf/, scenes/, launch/) lives, however it was installed.

Search order of :func:`share_dir`:

1. ``$CONTACT_SIM_SHARE_DIR`` if set (an explicit override; must hold ``config/``);
2. the source checkout the code is imported from: the directory above the ``contact_sim_ros`` package when it
   holds this package's ``package.xml`` (``pip install -e .``, ``python -m pytest`` in the repo, and
   ``colcon build --symlink-install``);
3. the ament index: ``share/contact_sim_ros`` of the prefix that registered the package
   (``colcon build``; a venv with ``AMENT_PREFIX_PATH`` set);
4. ``<sys.prefix>/share/contact_sim_ros`` (a non-editable ``pip install .``, which installs the data_files
   there).

The checkout wins over the ament index on purpose: an editable pip install also copies the data files into
the venv's share/ at install time, and that copy goes stale while the checkout is edited.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import ConfigError

PACKAGE_NAME = "contact_sim_ros"
SHARE_DIR_ENV = "CONTACT_SIM_SHARE_DIR"
DATA_FOLDERS = ("config", "urdf", "scenes", "launch", "meshes")


def _is_source_checkout(root: Path) -> bool:
    """True if `root` is this package's source tree (its package.xml names contact_sim_ros)."""
    manifest = root / "package.xml"
    if not (manifest.is_file() and (root / PACKAGE_NAME).is_dir()):
        return False
    try:
        text = manifest.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return f"<name>{PACKAGE_NAME}</name>" in text


def _ament_share_dir() -> Path | None:
    """share/contact_sim_ros from the ament index, or None if the index does not know the package."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        return None
    try:
        return Path(get_package_share_directory(PACKAGE_NAME))
    except (PackageNotFoundError, LookupError, ValueError, KeyError, EnvironmentError):
        return None


def _candidates() -> list[tuple[str, Path]]:
    """(how it was found, directory) in search order; may contain directories that do not exist."""
    found: list[tuple[str, Path]] = []
    override = os.environ.get(SHARE_DIR_ENV)
    if override:
        found.append((f"${SHARE_DIR_ENV}", Path(override).expanduser()))
    checkout = Path(__file__).resolve().parent.parent
    if _is_source_checkout(checkout):
        found.append(("source checkout", checkout))
    ament = _ament_share_dir()
    if ament is not None:
        found.append(("ament index", ament))
    found.append(("sys.prefix", Path(sys.prefix) / "share" / PACKAGE_NAME))
    return found


def share_dir() -> Path:
    """The directory that holds config/ urdf/ scenes/ launch/ of this package (see the module docstring).

    Raises ConfigError naming every directory searched if none holds ``config/``.
    """
    candidates = _candidates()
    for how, path in candidates:
        if (path / "config").is_dir():
            return path
        if how == f"${SHARE_DIR_ENV}":
            raise ConfigError(f"${SHARE_DIR_ENV}={path} has no config/ folder; unset it or point it at the "
                              f"package's share directory (the one holding config/, urdf/, scenes/)")
    searched = ", ".join(f"{p} ({how})" for how, p in candidates)
    raise ConfigError(f"cannot find the {PACKAGE_NAME} data folder (a directory holding config/); searched: "
                      f"{searched}. Install the package (pip install -e . or colcon build) or set "
                      f"${SHARE_DIR_ENV}")


def resolve_resource(relative_path: str | os.PathLike) -> Path:
    """Absolute path of a package resource, e.g. ``resolve_resource("config/robots/iiwa_wsg.yaml")``.

    An absolute path is returned as is if it exists. Raises ConfigError naming the path and the directories
    searched if the file or folder does not exist.
    """
    rel = Path(relative_path).expanduser()
    if rel.is_absolute():
        if rel.exists():
            return rel
        raise ConfigError(f"resource {str(rel)!r} does not exist")
    tried = []
    # the share dir found first, then every other candidate holding the file (e.g. a file only in the
    # colcon install)
    try:
        first = share_dir()
    except ConfigError:
        first = None
    dirs = ([first] if first is not None else []) + [p for _, p in _candidates() if p != first]
    for base in dirs:
        path = base / rel
        tried.append(str(base))
        if path.exists():
            return path
    raise ConfigError(f"resource {str(rel)!r} not found; searched: {', '.join(tried)}")
