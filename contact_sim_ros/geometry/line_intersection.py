"""Where lines cross the surfaces of convex collision shapes (per-point depths of contact patches).

A contact patch from ``coal.computeContactPatch`` gives points on one plane (the patch plane, normal n) and a
single penetration depth for the whole patch. For a tilted box on a plane the corners are at different heights,
so each patch point p gets its own depth from the line x(s) = p + s n: the line enters a convex shape at s_in
and leaves it at s_out (metres along the unit direction). With A on the -n side and B on the +n side, the
signed distance at p is phi = s_in(B) - s_out(A) (negative in penetration) and the witness points are
p + s_out(A) n on A and p + s_in(B) n on B.

``LineCaster`` is built once per collision model and answers for M lines at once, each against its own
geometry: lines are grouped by shape type (box, sphere, cylinder, capsule, ellipsoid, halfspace) and each group
is one vectorised numpy evaluation; convex hulls (face planes from Qhull) are grouped per geometry. A line that
misses its shape gets s_in = +inf, s_out = -inf; lines that graze the surface within ``tolerance`` (m) count as
hits, because patch points lie exactly on edges and corners. Shapes without a caster (cone, plane, meshes that
were not converted to convex) give NaN: the caller falls back to the patch's own depth.
"""

from __future__ import annotations

import coal
import numpy as np
from scipy.spatial import ConvexHull

# Lines closer than this to the surface (m) count as touching it: patch points sit on edges and corners.
DEFAULT_TOLERANCE = 1e-7
_PARALLEL = 1e-12

NONE, BOX, SPHERE, CYLINDER, CAPSULE, ELLIPSOID, HALFSPACE, CONVEX = range(8)


def _row_dot(a, b):
    return np.einsum("ij,ij->i", a, b)


def _miss_to_inf(s_in, s_out, miss):
    if miss.any():
        s_in[miss] = np.inf
        s_out[miss] = -np.inf
    return s_in, s_out


def box_intervals(p, u, half, tol):
    """Box |x_k| <= half_k (M, 3) m: slab method, lines p + s u (M, 3), u not necessarily unit."""
    small = np.abs(u) < _PARALLEL
    inv = 1.0 / np.where(small, 1.0, u)
    t1 = (-half - p) * inv
    t2 = (half - p) * inv
    lo = np.minimum(t1, t2)
    hi = np.maximum(t1, t2)
    parallel = small.any()
    if parallel:                                   # no constraint along that axis, if inside the slab
        lo[small] = -np.inf
        hi[small] = np.inf
    s_in, s_out = lo.max(axis=1), hi.min(axis=1)
    miss = s_in > s_out + tol
    if parallel:
        miss |= (small & (np.abs(p) > half + tol)).any(axis=1)
    return _miss_to_inf(s_in, s_out, miss)


def planes_intervals(p, u, normals, offsets, tol):
    """Convex polytope {x : N x <= d}, normals (F, 3) outward unit, offsets (F,) m; lines p + s u (M, 3)."""
    nu = u @ normals.T                                   # (M, F)
    gap = offsets - p @ normals.T                        # (M, F), >= 0 inside
    entering = nu < -_PARALLEL
    leaving = nu > _PARALLEL
    nu_safe = np.where(entering | leaving, nu, 1.0)
    s = gap / nu_safe
    s_in = np.where(entering, s, -np.inf).max(axis=1)
    s_out = np.where(leaving, s, np.inf).min(axis=1)
    miss = (s_in > s_out + tol) | np.any(~(entering | leaving) & (gap < -tol), axis=1)
    return _miss_to_inf(s_in, s_out, miss)


def halfspace_intervals(p, u, normal, offset, tol):
    """Halfspace n.x <= d with n (M, 3) unit, d (M,) m."""
    rate = _row_dot(normal, u)
    gap = offset - _row_dot(normal, p)
    par = np.abs(rate) <= _PARALLEL
    s = gap / np.where(par, 1.0, rate)
    s_in = np.where(rate < -_PARALLEL, s, -np.inf)
    s_out = np.where(rate > _PARALLEL, s, np.inf)
    return _miss_to_inf(s_in, s_out, par & (gap < -tol))


def _quadric(a, b, c, tol):
    """Roots of a s^2 + 2 b s + c = 0 (a > 0, all (M,)) as (lo, hi); (+inf, -inf) where none (grazing counts)."""
    disc = b * b - a * c
    miss = disc < -tol * a
    root = np.sqrt(np.maximum(disc, 0.0))
    return _miss_to_inf((-b - root) / a, (-b + root) / a, miss)


def sphere_intervals(p, u, radius, tol):
    """Sphere of radius (M,) m centred at the origin."""
    return _quadric(_row_dot(u, u), _row_dot(p, u), _row_dot(p, p) - radius ** 2, tol * radius)


def ellipsoid_intervals(p, u, radii, tol):
    """Ellipsoid with semi-axes radii (M, 3) m."""
    ps, us = p / radii, u / radii
    return _quadric(_row_dot(us, us), _row_dot(ps, us), _row_dot(ps, ps) - 1.0, tol / radii.min(axis=1))


def cylinder_intervals(p, u, radius, half_length, tol):
    """Solid cylinder of radius (M,) m along the local z axis, |z| <= half_length (M,) m."""
    px, py, pz = p[:, 0], p[:, 1], p[:, 2]
    ux, uy, uz = u[:, 0], u[:, 1], u[:, 2]
    a = ux * ux + uy * uy
    c = px * px + py * py - radius ** 2
    axial = a < _PARALLEL
    s_in, s_out = _quadric(np.where(axial, 1.0, a), px * ux + py * uy, c, tol * radius)
    if axial.any():                                       # line along the axis: inside the disc or not
        inside = c <= 2.0 * radius * tol
        s_in[axial] = np.where(inside, -np.inf, np.inf)[axial]
        s_out[axial] = np.where(inside, np.inf, -np.inf)[axial]
    flat = np.abs(uz) < _PARALLEL                        # the caps |z| <= half_length as a slab
    inv = 1.0 / np.where(flat, 1.0, uz)
    t1 = (-half_length - pz) * inv
    t2 = (half_length - pz) * inv
    lo = np.minimum(t1, t2)
    hi = np.maximum(t1, t2)
    parallel = flat.any()
    if parallel:                                          # parallel to the caps: inside the slab or not
        lo[flat] = -np.inf
        hi[flat] = np.inf
    s_in = np.maximum(s_in, lo)
    s_out = np.minimum(s_out, hi)
    miss = s_in > s_out + tol
    if parallel:
        miss |= flat & (np.abs(pz) > half_length + tol)
    return _miss_to_inf(s_in, s_out, miss)


def capsule_intervals(p, u, radius, half_length, tol):
    """Capsule: cylinder (radius, |z| <= half_length) plus spheres at z = +-half_length. The pieces' union is
    convex, so the line's interval is the hull of the pieces' intervals (missed pieces drop out)."""
    ins, outs = zip(cylinder_intervals(p, u, radius, half_length, tol),
                    *(sphere_intervals(p - np.c_[0 * half_length, 0 * half_length, s * half_length], u, radius, tol)
                      for s in (1.0, -1.0)))
    return np.min(ins, axis=0), np.max(outs, axis=0)


def convex_planes(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Face planes of the convex hull of ``points`` (K, 3) m: outward unit normals (F, 3), offsets (F,) m."""
    hull = ConvexHull(np.asarray(points, dtype=float))
    eq = hull.equations                     # n . x + c <= 0 inside, n outward unit
    key = np.round(eq, 9)                   # merge coplanar triangles (Qhull reports one row per triangle)
    _, keep = np.unique(key, axis=0, return_index=True)
    keep.sort()
    return eq[keep, :3].copy(), -eq[keep, 3]


def shape_type(geometry) -> int:
    if isinstance(geometry, coal.Box):
        return BOX
    if isinstance(geometry, coal.Sphere):
        return SPHERE
    if isinstance(geometry, coal.Capsule):
        return CAPSULE
    if isinstance(geometry, coal.Cylinder):
        return CYLINDER
    if isinstance(geometry, coal.Ellipsoid):
        return ELLIPSOID
    if isinstance(geometry, coal.Halfspace):
        return HALFSPACE
    if isinstance(geometry, coal.ConvexBase) and geometry.num_points >= 4:
        return CONVEX
    return NONE


class LineCaster:
    """Line/surface intersections for the geometries of one collision model (see the module docstring)."""

    def __init__(self, geometries, tolerance: float = DEFAULT_TOLERANCE):
        g = len(geometries)
        self.tolerance = tolerance
        self.type = np.zeros(g, dtype=int)
        self.half = np.ones((g, 3))           # box half extents, ellipsoid radii (m)
        self.radius = np.ones(g)              # sphere, cylinder, capsule radius (m)
        self.half_length = np.ones(g)         # cylinder, capsule half length (m)
        self.plane_normal = np.zeros((g, 3))  # halfspace n (unit) ...
        self.plane_offset = np.zeros(g)       # ... and d: n.x <= d (m)
        self.planes = {}                      # convex: geometry -> (normals (F, 3), offsets (F,))
        for i, geom in enumerate(geometries):
            t = shape_type(geom)
            if t == BOX:
                self.half[i] = geom.halfSide
            elif t == ELLIPSOID:
                self.half[i] = geom.radii
            elif t in (SPHERE, CYLINDER, CAPSULE):
                self.radius[i] = geom.radius
                if t != SPHERE:
                    self.half_length[i] = geom.halfLength
            elif t == HALFSPACE:
                n = np.asarray(geom.n, dtype=float)
                self.plane_normal[i] = n / np.linalg.norm(n)
                self.plane_offset[i] = float(geom.d) / np.linalg.norm(n)
            elif t == CONVEX:
                try:
                    self.planes[i] = convex_planes(np.asarray(geom.points(), dtype=float))
                except Exception:   # degenerate (flat) hull: use the patch depth
                    t = NONE
            self.type[i] = t
        # the convex hulls' faces in one array (for the compiled kernel): faces of geometry g are rows
        # face_start[g]:face_start[g + 1] of face_normal (F, 3) and face_offset (F,)
        counts = [len(self.planes[i][1]) if i in self.planes else 0 for i in range(g)]
        self.face_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.face_normal = np.zeros((max(self.face_start[-1], 1), 3))
        self.face_offset = np.zeros(max(self.face_start[-1], 1))
        for i, (normals, offsets) in self.planes.items():
            self.face_normal[self.face_start[i]:self.face_start[i + 1]] = normals
            self.face_offset[self.face_start[i]:self.face_start[i + 1]] = offsets

    def intervals(self, geometry: np.ndarray, p: np.ndarray, u: np.ndarray):
        """(s_in, s_out) (M,) of lines p + s u (M, 3 each, in the frames of ``geometry`` (M,) int).
        NaN for geometries without a caster."""
        s_in = np.full(len(p), np.nan)
        s_out = np.full(len(p), np.nan)
        types = self.type[geometry]
        tol = self.tolerance
        present = set(types.tolist())
        for t in present:
            if t == NONE:
                continue
            if len(present) == 1:
                sel = slice(None)
                gs, ps, us = geometry, p, u
            else:
                sel = types == t
                gs, ps, us = geometry[sel], p[sel], u[sel]
            if t == BOX:
                r = box_intervals(ps, us, self.half[gs], tol)
            elif t == SPHERE:
                r = sphere_intervals(ps, us, self.radius[gs], tol)
            elif t == CYLINDER:
                r = cylinder_intervals(ps, us, self.radius[gs], self.half_length[gs], tol)
            elif t == CAPSULE:
                r = capsule_intervals(ps, us, self.radius[gs], self.half_length[gs], tol)
            elif t == ELLIPSOID:
                r = ellipsoid_intervals(ps, us, self.half[gs], tol)
            elif t == HALFSPACE:
                r = halfspace_intervals(ps, us, self.plane_normal[gs], self.plane_offset[gs], tol)
            else:  # CONVEX: one group per geometry (each has its own planes)
                r = (np.empty(len(ps)), np.empty(len(ps)))
                for g in set(gs.tolist()):
                    sub = gs == g
                    r[0][sub], r[1][sub] = planes_intervals(ps[sub], us[sub], *self.planes[g], tol)
            s_in[sel], s_out[sel] = r
        return s_in, s_out
