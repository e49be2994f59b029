"""A robot description's text, below the loader: xacro (``*.xacro``, ``*.urdf.xacro``) with arguments, where packages
and mesh URIs are found (``default_package_dirs``, ``resolve_uri``), and name prefixes (``prefix_urdf``).

A xacro file is expanded with the ``xacro`` Python package (the same code as ROS 2's ``xacro`` command) into a
URDF that is written to a private cache folder (``<tmp>/contact_sim_ros-xacro-<uid>/<stem>-<hash>.urdf``,
never next to the user's files) and then loaded exactly like a URDF (``loader.load_urdf``). Equal inputs give
the same file, so repeated loads do not accumulate files.

* ``split_description("robot.urdf.xacro arm_id:=fr3 hand:=true")`` -> ``("robot.urdf.xacro", {...})``: the
  command-line form ``--urdf "FILE name:=value ..."`` (as ``xacro FILE name:=value``).
* ``is_xacro(path)``: the name ends with ``.xacro``.
* ``urdf_from_description(path, xacro_args)`` -> path of a URDF file: the file itself for a URDF, the expanded
  file for a xacro.

Inside a xacro, ``$(find pkg)`` resolves through the ament index (a ROS 2 install) and, failing that, in the
folders of ``default_package_dirs`` (``ROS_PACKAGE_PATH``, cmeel wheels such as example-robot-data, this
package's share folder), so that description packages that are not installed as ROS packages still expand.
Relative mesh file names in the expanded URDF are made absolute against the xacro file's folder (they would
otherwise resolve against the cache folder). ``package://`` URIs are left to the loader.

Errors (file missing, xacro failure: syntax, missing argument, unknown package) raise ``ModelError`` naming the
xacro file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

from ..errors import ConfigError, ModelError
from ..resources import share_dir

XACRO_SUFFIX = ".xacro"
_LOCK = threading.Lock()          # xacro keeps its state (file stack, arguments) in module globals


def is_xacro(path) -> bool:
    return str(path).endswith(XACRO_SUFFIX)


def split_description(value: str) -> tuple[str, dict]:
    """``"FILE name:=value name2:=value2"`` -> ``("FILE", {"name": "value", ...})``. A path without ``:=``
    tokens comes back unchanged with no arguments (paths containing spaces are kept whole then)."""
    text = str(value).strip()
    tokens = text.split()
    if not any(":=" in t for t in tokens[1:]):
        return text, {}
    args, path_tokens = {}, []
    for tok in tokens:
        if ":=" in tok:
            name, _, val = tok.partition(":=")
            if not name:
                raise ModelError(f"robot description {text!r}: argument {tok!r} has no name (expected name:=value)")
            args[name] = val
        elif args:
            raise ModelError(f"robot description {text!r}: {tok!r} after the xacro arguments; expected "
                             f"'FILE name:=value ...'")
        else:
            path_tokens.append(tok)
    return " ".join(path_tokens), args


def cache_dir() -> Path:
    """The folder of expanded xacro files (created on demand)."""
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    d = Path(tempfile.gettempdir()) / f"contact_sim_ros-xacro-{uid}"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d


def urdf_from_description(path, xacro_args: dict | None = None) -> str:
    """Path of a URDF file for the robot description ``path``: a URDF file is returned as is (absolute), a xacro
    file (or any file given ``xacro_args``) is expanded with ``xacro_args`` (``{name: value}``) into the cache
    folder. Raises ModelError naming the file."""
    src = Path(str(path)).expanduser()
    if not src.is_file():
        raise ModelError(f"robot description {src}: " + ("is a directory, not a file" if src.is_dir() else
                                                          "file not found"))
    src = src.resolve()
    if not is_xacro(src) and not xacro_args:
        return str(src)
    xml_text = expand_xacro(src, xacro_args or {})
    digest = hashlib.sha256(xml_text.encode()).hexdigest()[:16]
    stem = src.name[: -len(XACRO_SUFFIX)] if is_xacro(src) else src.name
    stem = stem[:-5] if stem.endswith(".urdf") else stem
    out = cache_dir() / f"{stem}-{digest}.urdf"
    if not out.is_file() or out.read_text() != xml_text:
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".tmp-", suffix=".urdf")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(xml_text)
            os.replace(tmp, out)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return str(out)


def expand_xacro(path, xacro_args: dict | None = None) -> str:
    """The URDF XML text of the xacro file ``path`` with arguments ``{name: value}`` (values become strings,
    as on the command line). Relative mesh file names are made absolute against the file's folder."""
    src = Path(str(path)).resolve()
    if not src.is_file():
        raise ModelError(f"xacro {src}: " + ("is a directory, not a file" if src.is_dir() else "file not found"))
    try:
        import xacro
        from xacro import substitution_args
    except ImportError:
        raise ModelError(f"{src}: expanding a xacro file needs the 'xacro' Python package "
                         f"(pip install xacro)") from None
    mappings = {str(k): _arg_text(v) for k, v in (xacro_args or {}).items()}
    stderr = io.StringIO()
    with _LOCK, _find_fallback(substitution_args), contextlib.redirect_stderr(stderr):
        try:
            doc = xacro.process_file(str(src), mappings=mappings)
            text = doc.toprettyxml(indent="  ")
            doc.unlink()         # minidom's nodes refer to their parents: free them now, not at the next full GC
        except Exception as exc:  # xacro raises XacroException, ArgException, XML/Name/Key errors
            detail = _xacro_message(exc, stderr.getvalue())
            raise ModelError(f"{src}: xacro expansion failed: {detail}") from None
        finally:
            # xacro's globals keep the failed file stack; start clean next time
            with contextlib.suppress(Exception):
                xacro.init_stacks(None)
    return _absolute_mesh_paths(text, src)


def _arg_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _xacro_message(exc, stderr_text: str) -> str:
    name = type(exc).__name__
    msg = str(exc).strip() or name
    if name == "ArgException":
        msg = f"undefined argument {msg!r} (pass it as name:=value)"
    elif name == "PackageNotFoundError":
        msg = f"package {msg!r} not found by $(find) (ament index and package dirs)"
    context = " ".join(line.strip() for line in stderr_text.splitlines() if line.strip())
    return f"{msg} [{context}]" if context else msg


@contextlib.contextmanager
def _find_fallback(substitution_args):
    """``$(find pkg)`` through the ament index, then the loader's package folders (held under _LOCK)."""
    original = substitution_args._eval_find

    def find(pkg):
        try:
            return original(pkg)
        except Exception as exc:   # ament_index_python missing, or PackageNotFoundError
            for d in default_package_dirs():
                cand = os.path.join(d, pkg)
                if os.path.isdir(cand):
                    return cand
            err = type("PackageNotFoundError", (KeyError,), {})
            raise err(pkg) from exc

    substitution_args._eval_find = find
    substitution_args._eval_dict["find"] = find
    try:
        yield
    finally:
        substitution_args._eval_find = original
        substitution_args._eval_dict["find"] = original


def _absolute_mesh_paths(xml_text: str, src: Path) -> str:
    """Relative ``<mesh filename>`` (no scheme) -> absolute against the xacro file's folder."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ModelError(f"{src}: xacro produced malformed XML: {exc}") from None
    changed = False
    for mesh in root.iter("mesh"):
        name = mesh.get("filename", "")
        if name and "://" not in name and not os.path.isabs(name):
            mesh.set("filename", str((src.parent / name).resolve()))
            changed = True
    if not changed:
        return xml_text
    return '<?xml version="1.0" ?>\n' + ET.tostring(root, encoding="unicode")


# ----------------------------------------------------------------------------------- package paths


def default_package_dirs(extra=None) -> list[str]:
    """Folders that CONTAIN ROS packages, searched for ``package://pkg/...`` URIs, in order: explicit dirs,
    ``ROS_PACKAGE_PATH``, ``<prefix>/share`` of every ``AMENT_PREFIX_PATH`` entry, the share folder of
    cmeel wheels (example-robot-data) and this package's own share/source folder."""
    dirs = [str(d) for d in (extra or [])]
    dirs += [d for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
    dirs += [os.path.join(p, "share") for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for entry in sys.path:
        cmeel = os.path.join(entry, "cmeel.prefix", "share")
        if os.path.isdir(cmeel):
            dirs.append(cmeel)
    # the folder holding this package's data folder (resources.share_dir()): package://contact_sim_ros/... of an
    # install space, package://<checkout dir name>/... of a source checkout
    with contextlib.suppress(ConfigError):
        dirs.append(str(share_dir().parent))
    seen, out = set(), []
    for d in dirs:
        if d not in seen and os.path.isdir(d):
            seen.add(d)
            out.append(d)
    return out


def resolve_uri(uri: str, base_dir: str | None, package_dirs: list[str]) -> str | None:
    """Resolve a mesh URI (package://, file:// or a relative/absolute path) to an existing file or None."""
    if uri.startswith("package://"):
        rel = uri[len("package://"):]
        pkg = rel.split("/", 1)[0]
        for d in package_dirs:
            cand = os.path.join(d, rel)
            if os.path.isfile(cand):
                return cand
        if pkg == "contact_sim_ros":       # this package's data folder, whatever its folder's name
            try:
                own = share_dir() / rel.split("/", 1)[1]
            except ConfigError:
                return None
            if own.is_file():
                return str(own)
        return None
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    if not os.path.isabs(path) and base_dir:
        path = os.path.join(base_dir, path)
    return path if os.path.isfile(path) else None


# ------------------------------------------------------------------------------------- name prefixes


def prefix_urdf(root: ET.Element, prefix: str) -> None:
    """Prepend ``prefix`` in place to every link and joint name of a parsed URDF ``<robot>`` and to every
    reference to them: joint ``<parent>``/``<child>`` links, ``<mimic joint>``, the joints (and sensors) of
    ``<ros2_control>`` blocks and ``<transmission>``s, ``<gazebo reference>``. Material names are global to the
    file and stay. Pinocchio names frames after links and joints and collision geometries ``<link>_<k>``, so
    every name of the robot in the model carries the prefix."""
    if not prefix:
        return

    def add(el, attr):
        if el is not None and el.get(attr):
            el.set(attr, prefix + el.get(attr))
    for link in root.findall("link"):
        add(link, "name")
    for joint in root.findall("joint"):
        add(joint, "name")
        add(joint.find("parent"), "link")
        add(joint.find("child"), "link")
        add(joint.find("mimic"), "joint")
    for block in root.iter("ros2_control"):
        for el in block.findall("joint") + block.findall("sensor"):
            add(el, "name")
            for param in el.findall("param"):     # mimic leader, a sensor's links and frame
                if param.get("name") in ("mimic", "parent_link", "child_link", "frame_id") and param.text:
                    if param.get("name") != "mimic" or param.text.strip() != "urdf":
                        param.text = prefix + param.text.strip()
    for tr in root.findall("transmission"):
        for el in tr.findall("joint"):
            add(el, "name")
    for gz in root.findall("gazebo"):
        add(gz, "reference")


def prefix_urdf_xml(xml_text: str, prefix: str) -> str:
    """``prefix_urdf`` on a URDF document (e.g. a robot's ``robot_description`` for its own namespace, or a
    ``<ros2_control>`` file): the prefixed XML text."""
    root = ET.fromstring(xml_text)
    prefix_urdf(root, prefix)
    return ET.tostring(root, encoding="unicode")
