"""Free objects given as triangle meshes (OBJ, STL, PLY, OFF, GLB/glTF, DAE): collision pieces and mass properties.

A mesh object is one rigid body (one free-flyer joint) whose collision geometry is one or more CONVEX pieces, all
attached to that body's joint, so the model loader never makes a pair of two pieces of the same body
(``loader._collision_pairs`` skips pairs on one joint). The contact query only handles convex shapes (coal's
signed distance of a triangle soup is wrong in penetration), so a non-convex mesh must be cut into convex pieces:

* ``collision: hull``: one piece, the convex hull of the mesh (what every mesh was before issue 29: a mug's handle
  is filled, a bowl has a lid);
* ``collision: decompose`` (``decompose_keeping_surface``): the hulls of the mesh's connected components when each
  is closed and convex (pybullet's tray, V-HACD files), else approximate convex decomposition with CoACD
  (``coacd`` on PyPI, MIT; Wei et al., SIGGRAPH 2022) of its non-convex components, without CoACD's manifold
  pre-processing when they are closed (it thickens thin plates); parameters ``DECOMPOSITION_DEFAULTS`` overridable
  per object (``decomposition: {...}``, and ``max_surface_error_m``: refine until the surface error is below it);
* ``collision: auto`` (default): the mesh itself when it is convex, else decomposed.

Decomposition takes seconds to a minute per object, so its pieces are cached on disk (``mesh_cache_dir()``, next
to the compiled kernels' cache) under a hash of the mesh's content (scaled vertices and faces), the parameters and
the CoACD version: a second start reads them (milliseconds) and gets the same pieces. A decomposition prints a
progress line on stderr when it starts, every ``PROGRESS_PERIOD`` s while it runs, and when it ends. Every
decomposition's surface error (``surface_error``: how far the pieces stand outside the mesh, how far the mesh lies
off the pieces, their volume ratio; in m) is printed at load and kept in the cache with the pieces.

Mass properties (``MeshBody.mass``, ``com``, ``inertia``), unless the file (a URDF's ``<inertial>``) gives them:
of the watertight mesh at the density (trimesh's exact integrals over the closed surface), ``density = mass /
volume`` when a mass is given (a mesh with triangle or quad holes, e.g. a box exported without a face, is closed
first with trimesh's ``fill_holes``); of the union of the convex pieces at ``mass / their volume`` when the mesh is not
watertight (an open surface has no volume, so a density alone is an error saying what to do). Reported on stderr
once per mesh and process.

Every problem is a ``ModelError`` naming the file and the problem: missing file, unreadable format, no triangles,
NaN or infinite vertices, a scale <= 0, zero volume without a mass, a non-watertight mesh with a density only.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from urllib.parse import parse_qs, unquote

import coal
import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError, unknown_choice
from ..jit import cache_dir

COLLISION_MODES = ("auto", "hull", "decompose")
# CoACD's parameters (coacd.run_coacd): concavity threshold (fraction of the mesh's size; smaller: more, finer
# pieces), at most 16 pieces per object (each piece is one more geometry in the broad phase), and a search cut
# down from CoACD's defaults (mcts_iterations 150, mcts_nodes 20, resolution 2000) to 3-10 s per object on 2 cores
# with the same pieces to the eye on the mug and the bowl of the tests
DECOMPOSITION_DEFAULTS = {"threshold": 0.08, "max_convex_hull": 16, "preprocess_mode": "auto", "resolution": 1000,
                          "mcts_nodes": 10, "mcts_iterations": 30, "mcts_max_depth": 3, "seed": 0}
_DECOMPOSITION_TYPES = {"threshold": float, "max_convex_hull": int, "preprocess_mode": str, "resolution": int,
                        "mcts_nodes": int, "mcts_iterations": int, "mcts_max_depth": int, "seed": int,
                        "preprocess_resolution": int, "merge": bool, "decimate": bool, "max_ch_vertex": int,
                        "max_surface_error_m": float}
# a closed connected component whose convex hull's volume is at most (1 + this) times its own is taken as convex
# (its hull is its piece): pybullet's tray's plates come out at 1.000-1.011 (bevelled edges), a V-HACD file's
# hulls at 1.000, a cup or a bowl at 3-10
CONVEX_COMPONENT_TOLERANCE = 0.02
SURFACE_SAMPLES = 4000          # points sampled on the pieces' and on the mesh's surface (surface_error)
MIN_THRESHOLD = 0.01            # CoACD's smallest concavity threshold (its documented range: [0.01, 1])
MAX_PIECES = 128                # the refinement's largest piece budget per component
CACHE_VERSION = 2               # 2: components' hulls, pre-processing off for closed meshes, surface error kept
PROGRESS_PERIOD = 10.0          # s between the "still decomposing" lines
# relative volume below which a mesh counts as flat (of its bounding box's volume)
ZERO_VOLUME = 1e-9
MESH_SUFFIXES = (".obj", ".stl", ".ply", ".off", ".glb", ".gltf", ".dae")


def mesh_cache_dir() -> Path:
    """The folder of the cached decompositions: ``$CONTACT_SIM_MESH_CACHE`` if set, else ``meshes/`` beside the
    compiled kernels' folder (``jit.cache_dir()``: the venv's ``.cache`` or ``~/.cache/contact_sim_ros``)."""
    env = os.environ.get("CONTACT_SIM_MESH_CACHE")
    if env:
        return Path(env)
    return cache_dir().parent / "meshes"


@dataclass(frozen=True)
class MeshSpec:
    """A mesh object's collision source: a mesh file, its scale and how it becomes convex pieces."""

    path: str                                    # absolute path of the mesh file
    scale: tuple = (1.0, 1.0, 1.0)               # per axis of the file's frame (file units -> m)
    collision: str = "auto"                      # auto | hull | decompose
    decomposition: dict = field(default_factory=dict)   # CoACD parameters over DECOMPOSITION_DEFAULTS


@dataclass(frozen=True)
class VisualSpec:
    """What cameras draw for an object instead of its collision geometry (cameras/visual_scene.py): a mesh file
    with its colours (face / vertex colours, materials, textures sampled at the vertices), scaled; ``color``
    (RGBA 0..1) overrides the file's."""

    path: str                                    # absolute path of the mesh file
    scale: tuple = (1.0, 1.0, 1.0)               # per axis (file units -> m)
    color: tuple | None = None


def parse_visual_entry(value, resolve, default_scale: tuple, where: str) -> VisualSpec:
    """A scene object's ``visual``: ``FILE`` or ``{mesh: FILE, scale: S, color: [r, g, b(, a)]}`` (scale default:
    the object's mesh scale, else 1) -> VisualSpec. ``resolve(file)``: the existing file or None.
    ConfigError / ModelError naming ``where`` and the problem."""
    entry = {"mesh": value} if isinstance(value, str) else value
    if not isinstance(entry, dict) or not isinstance(entry.get("mesh"), str) or set(entry) - {"mesh", "scale",
                                                                                             "color"}:
        raise ConfigError(f"{where}: a mesh file, or a mapping with 'mesh' (a file) and optional 'scale' and "
                          f"'color' ([r, g, b] or [r, g, b, a], 0..1), got {value!r}")
    path = resolve(entry["mesh"])
    if path is None:
        raise ModelError(f"{where}: visual mesh file not found: {entry['mesh']} (looked relative to the scene, the "
                         f"working directory and the object set)")
    scale = parse_scale(entry["scale"], f"{where}.scale (visual {path})") if "scale" in entry else default_scale
    color = None
    if "color" in entry:
        c = entry["color"]
        ok = isinstance(c, (list, tuple)) and len(c) in (3, 4) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0.0 <= x <= 1.0 for x in c)
        if not ok:
            raise ConfigError(f"{where}.color: [r, g, b] or [r, g, b, a] with each in 0..1, got {c!r}")
        color = tuple(float(x) for x in c) + ((1.0,) if len(c) == 3 else ())
    return VisualSpec(str(path), tuple(scale), color)


def parse_mesh_entry(entry: dict, path: str, where: str) -> MeshSpec:
    """The mesh keys of a scene object (``mesh``: already resolved to the existing file ``path``, ``scale``,
    ``collision``, ``decomposition``) -> MeshSpec. ConfigError naming ``where`` and the problem."""
    return MeshSpec(path, parse_scale(entry.get("scale", 1.0), f"{where}.scale (mesh {path})"),
                    parse_collision(entry.get("collision", "auto"), f"{where}.collision"),
                    parse_decomposition(entry.get("decomposition"), f"{where}.decomposition"))


def parse_scale(value, where: str) -> tuple:
    """A number or 3 numbers, each > 0 -> (sx, sy, sz)."""
    try:
        arr = np.array([value] * 3 if np.isscalar(value) else value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        arr = np.zeros(0)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{where}: a number or a list of 3 numbers (file units -> m), got {value!r}")
    if np.any(arr <= 0):
        raise ConfigError(f"{where}: the scale must be > 0 on every axis, got {value!r} (a mirror image is not a "
                          f"rigid body: mirror the mesh file instead)")
    return tuple(float(x) for x in arr)


def parse_collision(value, where: str) -> str:
    if value not in COLLISION_MODES:
        raise ConfigError(f"{where}: " + unknown_choice("collision mode", str(value), COLLISION_MODES))
    return str(value)


def parse_decomposition(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: a mapping of CoACD parameters, got {value!r}")
    out = {}
    for key, v in value.items():
        if key not in _DECOMPOSITION_TYPES:
            raise ConfigError(f"{where}: " + unknown_choice("CoACD parameter", str(key), _DECOMPOSITION_TYPES))
        try:
            out[key] = _DECOMPOSITION_TYPES[key](v)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}.{key}: expected {_DECOMPOSITION_TYPES[key].__name__}, got {v!r}") from None
    if "threshold" in out and not 0.01 <= out["threshold"] <= 1.0:
        raise ConfigError(f"{where}.threshold: CoACD's concavity threshold is in [0.01, 1], got {out['threshold']}")
    if "max_surface_error_m" in out and not (np.isfinite(out["max_surface_error_m"])
                                             and out["max_surface_error_m"] > 0):
        raise ConfigError(f"{where}.max_surface_error_m: the largest surface error the pieces may have, in m, > 0; "
                          f"got {value['max_surface_error_m']!r}")
    return out


# ------------------------------------------------------------------------------------------ loading


def load_mesh(path: str, scale=(1.0, 1.0, 1.0)) -> trimesh.Trimesh:
    """The mesh file as one triangle mesh (every geometry of a GLB/DAE scene, in the file's frame), scaled.
    ModelError naming the file: missing, unreadable, no triangles, non-finite vertices, scale <= 0."""
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"mesh file not found: {path}")
    scale = np.asarray(scale, dtype=float).reshape(-1)
    if scale.size == 1:
        scale = np.repeat(scale, 3)
    if scale.size != 3 or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ModelError(f"{path}: mesh scale must be > 0 on every axis, got {scale.tolist()}")
    suffix = p.suffix.lower()
    import trimesh  # deferred: ~20x pinocchio's import time (scipy, ...); only a scene with a mesh object needs it
    try:
        loaded = trimesh.load(str(p), force="mesh", process=False)
    except Exception as exc:  # noqa: BLE001 - trimesh raises many types (ValueError, KeyError, NotImplementedError..)
        raise ModelError(f"{path}: cannot read the mesh ({suffix or 'no extension'}; readable: "
                         f"{', '.join(MESH_SUFFIXES)}): {type(exc).__name__}: {exc}") from None
    if not isinstance(loaded, trimesh.Trimesh):
        raise ModelError(f"{path}: the file holds no triangle mesh (got {type(loaded).__name__})")
    vertices = np.asarray(loaded.vertices, dtype=float)
    faces = np.asarray(loaded.faces, dtype=np.int64)
    if len(faces) == 0 or len(vertices) == 0:
        raise ModelError(f"{path}: the mesh is empty (no triangles)")
    if not np.all(np.isfinite(vertices)):
        bad = int(np.count_nonzero(~np.all(np.isfinite(vertices), axis=1)))
        raise ModelError(f"{path}: {bad} vertex(es) with NaN or infinite coordinates")
    return trimesh.Trimesh(vertices * scale, faces, process=True)


# ---------------------------------------------------------------------------------------- the body


@dataclass(frozen=True, eq=False)
class MeshBody:
    """A mesh object's convex collision pieces and mass properties, in the mesh file's (scaled) frame."""

    source: str                          # the mesh file
    pieces: tuple                        # vertices (n_i, 3) m of each convex piece
    decomposed: bool                     # pieces from CoACD (else: the mesh or its hull, one piece)
    from_cache: bool                     # the pieces were read from the disk cache
    cache_file: str | None
    mass: float                          # kg
    com: np.ndarray                      # (3,) m, centre of mass
    inertia: np.ndarray                  # (3, 3) kg*m^2 about the centre of mass
    volume: float                        # m^3, of the mesh (watertight) or of the pieces
    watertight: bool
    holes_filled: bool = False           # the file's mesh had triangle/quad holes, filled for its volume
    surface_error: SurfaceError | None = None   # of the decomposed pieces (None: the mesh's hull, one piece)
    method: str = "hull"                 # hull | components | coacd | coacd+manifold (decompose_keeping_surface)
    cpu_s: float = 0.0                   # CPU s of the decomposition (when it ran, also for a cached one)

    def pin_inertia(self) -> pin.Inertia:
        return pin.Inertia(self.mass, self.com, self.inertia)

    def collision_geometries(self) -> list:
        """One coal convex shape per piece (qhull, as the loader's hulls)."""
        out = []
        for k, verts in enumerate(self.pieces):
            pts = coal.StdVec_Vec3s()
            pts.extend(list(np.asarray(verts, dtype=float)))
            try:
                out.append(coal.Convex.convexHull(pts, True, "Qt"))
            except Exception as exc:  # noqa: BLE001 - qhull on a degenerate (flat) piece
                raise ModelError(f"{self.source}: convex piece {k} ({len(verts)} vertices): convex hull failed: "
                                 f"{exc}") from None
        return out

    def report(self) -> str:
        what = {"components": "hulls of its convex components", "coacd": "CoACD",
                "coacd+manifold": "CoACD after manifold pre-processing"}.get(self.method, self.method)
        how = (f"{len(self.pieces)} convex pieces ({what}{', cached' if self.from_cache else ''}"
               f"{'; ' + self.surface_error.text() if self.surface_error is not None else ''})"
               if self.decomposed else "1 convex piece")
        src = ("mesh, its holes filled" if self.holes_filled else "mesh") if self.watertight else \
            "convex pieces (the mesh is not watertight)"
        I = np.linalg.eigvalsh(self.inertia)
        return (f"mesh object {self.source}: {how}; mass {self.mass:.6g} kg, volume {self.volume:.6g} m^3 "
                f"(of the {src}), centre of mass [{', '.join(f'{c:.6g}' for c in self.com)}] m, principal "
                f"inertia [{', '.join(f'{x:.6g}' for x in I)}] kg*m^2")


_MEMO: dict = {}           # (content key, mass, density) -> MeshBody: a scene rebuilt in the process reloads nothing
_REPORTED: set = set()


def mesh_body(spec: MeshSpec, mass: float | None = None, density: float | None = None,
              quiet: bool = False) -> MeshBody:
    """The collision pieces and mass properties of a mesh object (see the module docstring). Give ``mass`` (kg)
    or ``density`` (kg/m^3); with both None only the pieces are wanted (mass 0: a URDF gives the inertia)."""
    mesh = load_mesh(spec.path, spec.scale)
    params = {**DECOMPOSITION_DEFAULTS, **spec.decomposition}
    key = _content_key(mesh, spec.collision, params)
    memo_key = (key, mass, density)
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    mesh, filled = _closed(mesh)
    with np.errstate(invalid="ignore", divide="ignore"):      # a flat mesh: trimesh divides by its zero volume
        mesh = _outward(mesh)
        volume = float(mesh.volume) if is_closed(mesh) else 0.0
    flat = abs(volume) <= ZERO_VOLUME * max(float(np.prod(mesh.extents)), 1e-300) if is_closed(mesh) else False
    if mass is not None and (not np.isfinite(mass) or mass <= 0):
        raise ModelError(f"{spec.path}: mass must be > 0 kg, got {mass!r}")
    if density is not None and (not np.isfinite(density) or density <= 0):
        raise ModelError(f"{spec.path}: density must be > 0 kg/m^3, got {density!r}")
    wants_mass = mass is not None or density is not None
    if wants_mass and mass is None and flat:
        raise ModelError(f"{spec.path}: the mesh has zero volume (a flat or degenerate surface): a density gives no "
                         f"mass; give 'mass' (kg)")
    if wants_mass and mass is None and not is_closed(mesh):
        raise ModelError(f"{spec.path}: the mesh is not watertight ({_open_edges(mesh)} edges not shared by exactly "
                         f"two triangles), so it has no "
                         f"volume for a density: give 'mass' (kg) (the mass properties then come from its convex "
                         f"pieces) or close the mesh (e.g. trimesh's fill_holes, MeshLab 'Close Holes')")

    pieces, decomposed, from_cache, cache_file, err, method, cpu = _pieces(mesh, spec, params, key)
    if not wants_mass:
        m, com, inertia, vol = 0.0, np.zeros(3), np.zeros((3, 3)), volume
    elif is_closed(mesh) and not flat:
        d = density if mass is None else mass / volume
        m, com, inertia, vol = _mesh_mass_properties(mesh, d)
    else:       # mass given, the mesh has no volume of its own: the pieces' union
        m, com, inertia, vol = _pieces_mass_properties(pieces, mass, spec.path)
    body = MeshBody(spec.path, tuple(pieces), decomposed, from_cache, cache_file, float(m), np.asarray(com, float),
                    np.asarray(inertia, float), float(vol), bool(is_closed(mesh) and not flat), filled, err,
                    method, cpu)
    _MEMO[memo_key] = body
    if not quiet and memo_key not in _REPORTED and (wants_mass or decomposed):
        _REPORTED.add(memo_key)
        print(body.report() if wants_mass else f"collision mesh {spec.path}: " + body.report().split(": ", 1)[1]
              .split("; mass", 1)[0], file=sys.stderr, flush=True)
    return body


def is_closed(mesh: trimesh.Trimesh) -> bool:
    """The mesh bounds a volume: watertight, or every connected component watertight (a tray of boxes whose
    edges touch shares those edges between four triangles, so trimesh calls the whole not watertight; its volume
    integrals are still the sum of its closed parts'). Cached on the mesh."""
    if mesh.is_watertight:
        return True
    key = "contact_sim_closed"
    if key not in mesh.metadata:
        _, counts = np.unique(mesh.edges_sorted, axis=0, return_counts=True)
        # no boundary edge (each shared by an even count: 2, or 4 where two closed parts touch), every part closed
        mesh.metadata[key] = bool(len(mesh.faces)) and not np.any(counts % 2) and all(
            c.is_watertight for c in mesh.split(only_watertight=False))
    return mesh.metadata[key]


def _closed(mesh: trimesh.Trimesh) -> tuple[trimesh.Trimesh, bool]:
    """(mesh, holes filled): a mesh that is not watertight with its triangle and quad holes filled (trimesh's
    fill_holes: a box exported without one face) when that closes it; else the mesh as it is."""
    if is_closed(mesh):
        return mesh, False
    filled = mesh.copy()
    filled.fill_holes()
    return (filled, True) if filled.is_watertight else (mesh, False)


def _outward(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    """A watertight mesh with inward-facing triangles (negative volume) turned outward."""
    if is_closed(mesh) and mesh.volume < 0:
        mesh = mesh.copy()
        mesh.invert()
    return mesh


def _open_edges(mesh) -> int:
    """Edges not shared by exactly two triangles (open boundaries and non-manifold joins)."""
    _, counts = np.unique(mesh.edges_sorted, axis=0, return_counts=True)
    return int(np.count_nonzero(counts != 2))


def _mesh_mass_properties(mesh: trimesh.Trimesh, density: float):
    """(mass kg, com m, inertia about com kg*m^2, volume m^3) of a closed mesh at ``density`` (trimesh)."""
    import trimesh  # deferred: ~20x pinocchio's import time (scipy, ...); only a scene with a mesh object needs it
    mp = trimesh.triangles.mass_properties(mesh.triangles, density=density)
    return mp.mass, np.asarray(mp.center_mass), np.asarray(mp.inertia), mp.volume


def _pieces_mass_properties(pieces, mass: float, source: str):
    """Mass properties of the union of convex pieces (disjoint: CoACD cuts the mesh) carrying ``mass`` kg."""
    import trimesh  # deferred: ~20x pinocchio's import time (scipy, ...); only a scene with a mesh object needs it
    props = []
    for verts in pieces:
        hull = trimesh.Trimesh(verts).convex_hull
        props.append(trimesh.triangles.mass_properties(hull.triangles, density=1.0))
    volume = sum(p.volume for p in props)
    if not volume > 0:
        raise ModelError(f"{source}: the mesh and its convex pieces have zero volume: it cannot be a solid body")
    d = mass / volume
    com = sum(p.volume * np.asarray(p.center_mass) for p in props) / volume
    inertia = np.zeros((3, 3))
    for p in props:
        r = np.asarray(p.center_mass) - com
        inertia += d * np.asarray(p.inertia) + d * p.volume * (r @ r * np.eye(3) - np.outer(r, r))
    return mass, com, inertia, volume


# ---------------------------------------------------------------------------------- pieces and cache


def _coacd_version() -> str:
    try:
        return version("coacd")
    except PackageNotFoundError:
        return "missing"


def _content_key(mesh: trimesh.Trimesh, collision: str, params: dict) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(mesh.vertices, dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(mesh.faces, dtype="<i8").tobytes())
    h.update(json.dumps({"collision": collision, "params": params if collision != "hull" else None,
                         "coacd": _coacd_version(), "method": CACHE_VERSION}, sort_keys=True).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class SurfaceError:
    """How far a set of convex pieces departs from the mesh they stand for (``surface_error``), in m.

    ``outward``: the largest distance of a point of the pieces' surface OUTSIDE the mesh from the mesh's surface
    (what a resting or grasped object touches too early: a thickened plate, a lid); ``inward``: the largest
    distance of a point of the mesh's surface from the pieces (a part of the surface no piece reaches); both from
    ``SURFACE_SAMPLES`` points sampled on each surface, so a sub-sample-spacing feature can be missed.
    ``volume_ratio``: the pieces' summed volume over the mesh's (1 when exact; overlaps count twice; nan when the
    mesh is not closed)."""

    outward: float
    inward: float
    volume_ratio: float

    @property
    def largest(self) -> float:
        return max(self.outward, self.inward)

    def text(self) -> str:
        ratio = "n/a (open mesh)" if not np.isfinite(self.volume_ratio) else f"{self.volume_ratio:.3f}"
        return (f"surface error {self.largest * 1e3:.2f} mm (pieces outside the mesh by up to "
                f"{self.outward * 1e3:.2f} mm, mesh surface off the pieces by up to {self.inward * 1e3:.2f} mm), "
                f"volume ratio pieces/mesh {ratio}")


def _piece_halfspaces(pieces):
    """(A, b, owner) of every piece's hull facets, A x <= b inside (unit normals), and the hulls (trimesh)."""
    import trimesh  # deferred: ~20x pinocchio's import time (scipy, ...); only a scene with a mesh object needs it
    hulls = [trimesh.Trimesh(np.asarray(v, float)).convex_hull for v in pieces]
    A = np.concatenate([h.face_normals for h in hulls])
    b = np.concatenate([np.einsum("ij,ij->i", h.face_normals, h.triangles[:, 0]) for h in hulls])
    owner = np.concatenate([np.full(len(h.faces), k) for k, h in enumerate(hulls)])
    return A, b, owner, hulls


def surface_error(mesh: trimesh.Trimesh, pieces, samples: int | None = None, seed: int = 0) -> SurfaceError:
    """The surface error of convex ``pieces`` (vertex arrays, m) for ``mesh`` (see ``SurfaceError``): points
    sampled on the pieces' hulls and on the mesh (``samples`` each, default ``SURFACE_SAMPLES``), distances with
    trimesh.proximity (closest points on the triangles: exact, not a voxel estimate)."""
    import trimesh  # deferred: ~20x pinocchio's import time (scipy, ...); only a scene with a mesh object needs it
    try:
        import rtree  # noqa: F401 - trimesh.proximity's triangle tree
    except ImportError:
        raise ModelError("measuring a decomposition's surface error needs the 'rtree' package (trimesh.proximity's "
                         "triangle tree): pip install rtree") from None
    n = int(samples or SURFACE_SAMPLES)
    A, b, owner, hulls = _piece_halfspaces(pieces)
    union = trimesh.util.concatenate(hulls)
    rng = np.random.default_rng(seed)
    on_pieces, _ = trimesh.sample.sample_surface(union, n, seed=rng)
    on_mesh, _ = trimesh.sample.sample_surface(mesh, n, seed=rng)
    # outward: a piece point outside the mesh -> its distance to the mesh surface (inside: 0). trimesh's signed
    # distance is > 0 inside; an open mesh has no inside: the unsigned distance, so internal cuts would count
    if is_closed(mesh):
        d = trimesh.proximity.signed_distance(mesh, on_pieces)
        outward = float(np.max(np.maximum(-d, 0.0), initial=0.0))
    else:
        _, dist, _ = trimesh.proximity.closest_point(mesh, on_pieces)
        outward = float(np.max(dist, initial=0.0))
    # inward: a mesh point inside some piece -> 0, else its distance to the nearest piece's surface
    slack = A @ on_mesh.T - b[:, None]                          # (facets, points)
    inside = np.zeros(len(on_mesh), dtype=bool)
    for k in range(len(hulls)):
        inside |= np.all(slack[owner == k] <= 1e-9, axis=0)
    inward = 0.0
    if not np.all(inside):
        _, dist, _ = trimesh.proximity.closest_point(union, on_mesh[~inside])
        inward = float(np.max(dist, initial=0.0))
    ratio = float(sum(h.volume for h in hulls) / mesh.volume) if is_closed(mesh) and mesh.volume > 0 \
        else float("nan")
    return SurfaceError(outward, inward, ratio)


def _closed_components(mesh: trimesh.Trimesh):
    """(convex hulls, non-convex closed components) when every component is closed and has a volume, else None;
    a component counts as convex when its hull's volume is within ``CONVEX_COMPONENT_TOLERANCE`` of its own (a box
    with a bevelled or slightly bowed face passes)."""
    parts = mesh.split(only_watertight=False) if len(mesh.faces) else []
    convex, other = [], []
    for c in parts:
        if not c.is_watertight:
            return None
        with np.errstate(invalid="ignore", divide="ignore"):
            vol = abs(float(c.volume))
        if not vol > ZERO_VOLUME * max(float(np.prod(c.extents)), 1e-300):
            return None
        if c.volume < 0:
            c.invert()
        if c.convex_hull.volume <= (1.0 + CONVEX_COMPONENT_TOLERANCE) * vol:
            convex.append(np.asarray(c.convex_hull.vertices, dtype=float))
        else:
            other.append(c)
    return convex, other


def piece_budget(mesh: trimesh.Trimesh) -> int:
    """The first piece budget of a CoACD decomposition, scaled to the mesh: 8 pieces per unit of its hull's volume
    over its own (a cup ~4 -> 32, a tray ~12 -> 96; the concavity CoACD has to cut away), in [16, 96]; an open mesh
    (no volume): 16."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = float(mesh.convex_hull.volume / mesh.volume) if is_closed(mesh) and mesh.volume > 0 else 2.0
    return int(np.clip(np.ceil(8.0 * ratio), 16, 96))


def _read_cache(cache: Path):
    try:
        with np.load(cache) as data:
            verts, counts = data["vertices"], data["counts"]
            err = SurfaceError(*(float(x) for x in data["surface_error"])) if "surface_error" in data else None
            method = str(data["method"]) if "method" in data else "coacd"
            cpu = float(data["cpu_s"]) if "cpu_s" in data else float("nan")
        return list(np.split(verts, np.cumsum(counts)[:-1])), err, method, cpu
    except Exception:  # noqa: BLE001 - a truncated/corrupt entry is decomposed again and rewritten
        return None


def _pieces(mesh: trimesh.Trimesh, spec: MeshSpec, params: dict, key: str):
    """(pieces, decomposed, from_cache, cache_file, surface error, method, CPU s)."""
    if spec.collision == "hull" or (spec.collision == "auto" and mesh.is_convex):
        hull = [np.asarray(mesh.convex_hull.vertices, dtype=float)]
        return hull, False, False, None, None, "hull", 0.0
    cache = mesh_cache_dir() / f"{key[:40]}.npz"
    if cache.is_file():
        hit = _read_cache(cache)
        if hit is not None:
            pieces, err, method, cpu = hit
            return pieces, True, True, str(cache), err, method, cpu
    start = time.process_time()
    pieces, err, method = decompose_keeping_surface(mesh, params, spec.path, set(spec.decomposition))
    cpu = time.process_time() - start
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, vertices=np.concatenate(pieces), counts=np.array([len(p) for p in pieces]),
                 surface_error=np.array([err.outward, err.inward, err.volume_ratio]), method=np.array(method),
                 cpu_s=np.array(cpu))
        os.replace(tmp, cache)
        written = str(cache)
    except OSError as exc:
        print(f"note: cannot cache the decomposition of {spec.path} in {cache.parent}: {exc}", file=sys.stderr)
        written = None
    return pieces, True, False, written, err, method, cpu


def decompose_keeping_surface(mesh: trimesh.Trimesh, params: dict, source: str, explicit=()):
    """(pieces, SurfaceError, method) of a non-convex mesh, in this order:

    1. every connected component closed and convex (within ``CONVEX_COMPONENT_TOLERANCE``): their hulls
       ("components": pybullet's tray of 6 boxes, a V-HACD file's hulls; exact, milliseconds);
    2. every component closed: the convex ones' hulls and CoACD on each other one WITHOUT CoACD's manifold
       pre-processing (it thickens a 1 cm plate by ~3.4 mm per side), budget ``piece_budget`` ("coacd");
    3. else (an open or non-manifold mesh): CoACD on the whole mesh with its pre-processing (it needs a manifold)
       ("coacd+manifold").

    ``params``: CoACD's parameters over ``DECOMPOSITION_DEFAULTS`` (``explicit``: the keys the user gave; a given
    ``max_convex_hull`` or ``preprocess_mode`` wins) and ``max_surface_error_m``: while the surface error
    (``surface_error``) is above it, CoACD runs again with half the concavity threshold and twice the budget, down to threshold 0.01 and 128 pieces
    per component; when that does not meet it, the closest decomposition tried is used and a warning on stderr
    says so. The surface error is printed."""
    params = dict(params)
    target = params.pop("max_surface_error_m", None)
    explicit = set(explicit)
    name = Path(source).name
    split = _closed_components(mesh)
    if split is not None and split[0] and not split[1]:
        hulls = split[0]          # every component closed and convex (a tray's plates, a V-HACD file's hulls)
        err = surface_error(mesh, hulls)
        print(f"{name}: {len(hulls)} closed convex components: their hulls are the pieces; {err.text()}",
              file=sys.stderr, flush=True)
        return hulls, err, "components"
    if split is not None:
        convex, targets, method = split[0], split[1], "coacd"
        preprocess = "off"
    else:
        convex, targets, method = [], [mesh], "coacd+manifold"
        preprocess = "auto"
    run = {**params}
    if "preprocess_mode" not in explicit:
        run["preprocess_mode"] = preprocess
    budgets = [run["max_convex_hull"] if "max_convex_hull" in explicit else piece_budget(t) for t in targets]
    best = None
    while True:
        pieces = list(convex)
        for t, budget in zip(targets, budgets):
            pieces += decompose(t, {**run, "max_convex_hull": budget}, source)
        err = surface_error(mesh, pieces)
        print(f"{name}: {len(pieces)} convex pieces (CoACD threshold {run['threshold']}, preprocess "
              f"{run['preprocess_mode']}); {err.text()}", file=sys.stderr, flush=True)
        if target is None or err.largest <= target:
            return pieces, err, method
        if best is None or err.largest < best[1].largest:
            best = (pieces, err, run["threshold"])
        if run["threshold"] <= MIN_THRESHOLD and all(b >= MAX_PIECES for b in budgets):
            pieces, err, threshold = best
            print(f"warning: {source}: could not meet max_surface_error_m {target * 1e3:.2f} mm down to CoACD "
                  f"threshold {MIN_THRESHOLD} and {MAX_PIECES} pieces; using the closest decomposition tried "
                  f"(threshold {threshold}, {len(pieces)} pieces), {err.largest * 1e3:.2f} mm off the mesh",
                  file=sys.stderr, flush=True)
            return pieces, err, method
        run["threshold"] = max(MIN_THRESHOLD, run["threshold"] / 2.0)
        budgets = [min(MAX_PIECES, 2 * b) for b in budgets]
        print(f"{name}: surface error {err.largest * 1e3:.2f} mm > max_surface_error_m {target * 1e3:.2f} mm: "
              f"refining (threshold {run['threshold']}, budget {budgets} pieces)", file=sys.stderr, flush=True)


_COACD_RUNS: dict = {}      # (mesh content, parameters) -> pieces: a refinement or a new target repeats no run


def decompose(mesh: trimesh.Trimesh, params: dict, source: str) -> list:
    """CoACD's convex pieces of ``mesh`` (vertices of each hull), with progress lines on stderr; a run with the
    same mesh and parameters earlier in the process is not repeated (CoACD is deterministic for a seed)."""
    params = {k: v for k, v in params.items() if k != "max_surface_error_m"}
    run_key = _content_key(mesh, "decompose", params)
    if run_key in _COACD_RUNS:
        return [p.copy() for p in _COACD_RUNS[run_key]]
    pieces = _run_coacd(mesh, params, source)
    _COACD_RUNS[run_key] = [p.copy() for p in pieces]
    return pieces


def _run_coacd(mesh: trimesh.Trimesh, params: dict, source: str) -> list:
    import coacd      # deferred: a C++ extension (~30 MB) that only a scene with a non-convex mesh needs
    coacd.set_log_level("error")
    print(f"decomposing {source} ({len(mesh.faces)} triangles) into convex pieces with CoACD "
          f"(threshold {params['threshold']}, at most {params['max_convex_hull']} pieces, pre-processing "
          f"{params['preprocess_mode']}); cached for the next start", file=sys.stderr, flush=True)
    start = time.monotonic()
    done = threading.Event()

    def progress():
        while not done.wait(PROGRESS_PERIOD):
            print(f"  ... still decomposing {Path(source).name}: {time.monotonic() - start:.0f} s", file=sys.stderr,
                  flush=True)
    ticker = threading.Thread(target=progress, daemon=True)
    ticker.start()
    try:
        parts = coacd.run_coacd(coacd.Mesh(np.asarray(mesh.vertices, float), np.asarray(mesh.faces, np.int32)),
                                **params)
    except Exception as exc:  # noqa: BLE001 - CoACD's RuntimeErrors on meshes it cannot process
        raise ModelError(f"{source}: convex decomposition (CoACD) failed: {exc}") from None
    finally:
        done.set()
    pieces = [np.asarray(v, dtype=float) for v, _f in parts if len(v) >= 4]
    if not pieces:
        raise ModelError(f"{source}: convex decomposition (CoACD) gave no piece")
    print(f"decomposed {Path(source).name}: {len(pieces)} convex pieces in {time.monotonic() - start:.1f} s",
          file=sys.stderr, flush=True)
    return pieces


# ------------------------------------------------------------------------------------------- mesh:// URIs

MESH_URI_KEYS = ("mass", "density", "scale", "collision", "friction", "restitution", "stiffness", "dissipation",
                 "visual", "color", *(k for k in _DECOMPOSITION_TYPES))
MATERIAL_KEYS = ("friction", "restitution", "stiffness", "dissipation")


def parse_mesh_uri(uri: str, resolve) -> tuple[str, dict]:
    """``mesh://<file>?mass=kg`` (or ``density=kg/m^3``) with optional ``scale`` (one number or three, comma
    separated), ``collision`` (auto | hull | decompose), material keys (friction, restitution, stiffness,
    dissipation), CoACD parameters (threshold, max_convex_hull, ...), ``visual`` (another mesh file drawn by
    cameras and the viewer, found as ``<file>`` is) and ``color`` (r,g,b or r,g,b,a in 0..1, the visual's colour
    instead of the file's) -> (default name: the file's stem, scene
    object mapping without name and pose). ``<file>``: an absolute path (``mesh:///abs/mug.obj``), a path relative
    to the working directory or a file of the object set (``mesh://mug.obj``), or ``package://pkg/...``
    (``mesh://package://pkg/mug.obj``); ``resolve(file)`` -> the existing file or None. ConfigError naming the
    problem; ModelError when the file is not found."""
    rest = uri.strip()[len("mesh://"):]
    file, _, query = rest.partition("?")
    file = unquote(file)
    if not file:
        raise ConfigError(f"{uri}: no mesh file (e.g. mesh://mug.obj?mass=0.3 or "
                          f"mesh:///abs/path/part.stl?density=1200)")
    try:
        values = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise ConfigError(f"{uri}: malformed query: {exc}") from None
    unknown = sorted(set(values) - set(MESH_URI_KEYS))
    if unknown:
        raise ConfigError(f"{uri}: unknown key(s) {unknown}; valid: {sorted(MESH_URI_KEYS)}")
    v = {k: x[-1] for k, x in values.items()}
    path = resolve(file)
    if path is None:
        raise ModelError(f"{uri}: mesh file {file!r} not found (an absolute path, a path relative to the working "
                         f"directory, a file of the object set meshes/ or package://)")
    if ("mass" in v) == ("density" in v):
        raise ConfigError(f"{uri}: give exactly one of 'mass' (kg) and 'density' (kg/m^3)")

    def number(key):
        try:
            x = float(v[key])
        except ValueError:
            raise ConfigError(f"{uri}: {key} must be a number, got {v[key]!r}") from None
        if not np.isfinite(x):
            raise ConfigError(f"{uri}: {key} must be finite")
        return x
    obj = {"mesh": path}
    key = "mass" if "mass" in v else "density"
    obj[key] = number(key)
    if obj[key] <= 0:
        raise ConfigError(f"{uri}: {key} must be > 0, got {v[key]!r}")
    if "scale" in v:
        try:
            scale = [float(x) for x in v["scale"].split(",")]
        except ValueError:
            raise ConfigError(f"{uri}: scale is one number or three, comma separated, got {v['scale']!r}") from None
        obj["scale"] = list(parse_scale(scale[0] if len(scale) == 1 else scale, f"{uri}: scale"))
    if "collision" in v:
        obj["collision"] = parse_collision(v["collision"], f"{uri}: collision")
    decomposition = {k: v[k] for k in _DECOMPOSITION_TYPES if k in v}
    if decomposition:
        obj["decomposition"] = parse_decomposition(decomposition, f"{uri}: decomposition")
    material = {k: number(k) for k in MATERIAL_KEYS if k in v}
    if material:
        obj["material"] = material
    if "visual" in v or "color" in v:
        visual = path
        if "visual" in v:
            visual = resolve(unquote(v["visual"]))
            if visual is None:
                raise ModelError(f"{uri}: visual mesh file {v['visual']!r} not found (looked as for the mesh file)")
        entry = {"mesh": str(visual)}
        if "color" in v:
            try:
                entry["color"] = [float(x) for x in v["color"].split(",")]
            except ValueError:
                raise ConfigError(f"{uri}: color is r,g,b or r,g,b,a in 0..1, got {v['color']!r}") from None
        obj["visual"] = entry           # checked with the scene's objects (parse_visual_entry)
    return Path(path).stem, obj
