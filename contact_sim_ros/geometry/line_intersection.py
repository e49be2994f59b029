"""Where a line crosses the surface of a convex collision shape (used for per-point contact depths).

A contact patch from ``coal.computeContactPatch`` gives points on one plane (the patch plane, normal n) and a
single penetration depth for the whole patch. For a tilted box on a plane the corners are at different heights,
so each patch point p gets its own depth from the line x(s) = p + s u (u = n, unit, in the shape's local
frame): the line enters a convex shape at s_in and leaves it at s_out (metres along u). With A on the -n side
and B on the +n side, the signed distance at p is phi = s_in(B) - s_out(A) (negative in penetration) and the
witness points are p + s_out(A) n on A and p + s_in(B) n on B.

Every caster is vectorised over M lines: ``interval(p, u) -> (s_in, s_out)`` with p (M, 3) and u (3,) in the
shape frame; a line that misses the shape gets s_in = +inf, s_out = -inf. Lines that graze the surface
within ``tolerance`` (m) count as hits, because patch points lie exactly on edges and corners.
"""

from __future__ import annotations

import numpy as np

try:
    import coal
except ImportError:  # pragma: no cover - coal is a hard dependency of the package
    coal = None

# Lines closer than this to the surface (m) count as touching it: patch points sit on edges and corners.
DEFAULT_TOLERANCE = 1e-7
_PARALLEL = 1e-12


class PlanesCaster:
    """Convex polytope {x : N x <= d} (box, convex hull, halfspace): the slab method over its face planes.

    normals (F, 3) outward unit normals, offsets (F,) m.
    """

    def __init__(self, normals: np.ndarray, offsets: np.ndarray, tolerance: float = DEFAULT_TOLERANCE):
        self.normals = np.ascontiguousarray(normals, dtype=float)
        self.offsets = np.ascontiguousarray(offsets, dtype=float)
        self.tolerance = tolerance

    def interval(self, p: np.ndarray, u: np.ndarray):
        nu = self.normals @ u                                   # (F,) rate of approach of each plane
        gap = self.offsets[None, :] - p @ self.normals.T        # (M, F) d - n.p (>= 0 inside)
        entering = nu < -_PARALLEL
        leaving = nu > _PARALLEL
        parallel = ~(entering | leaving)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = gap / nu                                        # crossing parameter of every plane
        s_in = np.max(np.where(entering, s, -np.inf), axis=1) if entering.any() else np.full(len(p), -np.inf)
        s_out = np.min(np.where(leaving, s, np.inf), axis=1) if leaving.any() else np.full(len(p), np.inf)
        miss = s_in > s_out + self.tolerance
        if parallel.any():
            miss |= np.any(parallel[None, :] & (gap < -self.tolerance), axis=1)
        s_in = np.where(miss, np.inf, s_in)
        s_out = np.where(miss, -np.inf, s_out)
        return s_in, s_out


def _quadric_roots(a, b, c, tolerance):
    """Roots of a s^2 + 2 b s + c = 0 (a > 0) as (s_lo, s_hi); (+inf, -inf) where none (grazing counts)."""
    disc = b * b - a * c
    hit = disc >= -tolerance * np.maximum(a, 1e-300)
    root = np.sqrt(np.maximum(disc, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(hit, (-b - root) / a, np.inf)
        hi = np.where(hit, (-b + root) / a, -np.inf)
    return lo, hi


class SphereCaster:
    """Sphere of radius r (m) centred at the origin."""

    def __init__(self, radius: float, center=(0.0, 0.0, 0.0), tolerance: float = DEFAULT_TOLERANCE):
        self.radius = float(radius)
        self.center = np.asarray(center, dtype=float)
        self.tolerance = tolerance

    def interval(self, p, u):
        pc = p - self.center
        a = float(u @ u)
        b = pc @ u
        c = np.einsum("ij,ij->i", pc, pc) - self.radius ** 2
        return _quadric_roots(a, b, c, self.tolerance * self.radius)


class EllipsoidCaster:
    """Ellipsoid with semi-axes (rx, ry, rz) (m) along the local axes."""

    def __init__(self, radii, tolerance: float = DEFAULT_TOLERANCE):
        self.inv_radii = 1.0 / np.asarray(radii, dtype=float)
        self.tolerance = tolerance

    def interval(self, p, u):
        ps, us = p * self.inv_radii, u * self.inv_radii
        a = float(us @ us)
        b = ps @ us
        c = np.einsum("ij,ij->i", ps, ps) - 1.0
        return _quadric_roots(a, b, c, self.tolerance)


class CylinderCaster:
    """Solid cylinder of radius r (m) along the local z axis, |z| <= half_length (m)."""

    def __init__(self, radius: float, half_length: float, tolerance: float = DEFAULT_TOLERANCE):
        self.radius = float(radius)
        self.half_length = float(half_length)
        self.tolerance = tolerance

    def radial_interval(self, p, u):
        a = float(u[0] ** 2 + u[1] ** 2)
        c = p[:, 0] ** 2 + p[:, 1] ** 2 - self.radius ** 2
        if a < _PARALLEL:                        # line along the axis: inside the disc or not
            inside = c <= 2.0 * self.radius * self.tolerance
            return np.where(inside, -np.inf, np.inf), np.where(inside, np.inf, -np.inf)
        b = p[:, 0] * u[0] + p[:, 1] * u[1]
        return _quadric_roots(a, b, c, self.tolerance * self.radius)

    def interval(self, p, u):
        s_in, s_out = self.radial_interval(p, u)
        h = self.half_length
        if abs(u[2]) > _PARALLEL:
            s1 = (-h - p[:, 2]) / u[2]
            s2 = (h - p[:, 2]) / u[2]
            s_in = np.maximum(s_in, np.minimum(s1, s2))
            s_out = np.minimum(s_out, np.maximum(s1, s2))
        else:
            outside = np.abs(p[:, 2]) > h + self.tolerance
            s_in = np.where(outside, np.inf, s_in)
            s_out = np.where(outside, -np.inf, s_out)
        miss = s_in > s_out + self.tolerance
        return np.where(miss, np.inf, s_in), np.where(miss, -np.inf, s_out)


class CapsuleCaster:
    """Capsule: the union of a cylinder (radius r, |z| <= half_length) and spheres at z = +-half_length."""

    def __init__(self, radius: float, half_length: float, tolerance: float = DEFAULT_TOLERANCE):
        self.parts = (CylinderCaster(radius, half_length, tolerance),
                      SphereCaster(radius, (0.0, 0.0, half_length), tolerance),
                      SphereCaster(radius, (0.0, 0.0, -half_length), tolerance))

    def interval(self, p, u):
        # A union of overlapping convex pieces that is itself convex: the line's interval is the hull of the
        # pieces' intervals (missed pieces contribute +inf / -inf and drop out of min / max).
        ins, outs = zip(*(part.interval(p, u) for part in self.parts))
        return np.min(ins, axis=0), np.max(outs, axis=0)


def box_planes(half_side) -> tuple[np.ndarray, np.ndarray]:
    """Face planes (outward normals (6, 3), offsets (6,) m) of a box with half extents ``half_side``."""
    h = np.asarray(half_side, dtype=float)
    normals = np.vstack([np.eye(3), -np.eye(3)])
    return normals, np.concatenate([h, h])


def convex_planes(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Face planes of the convex hull of ``points`` (K, 3) m: outward unit normals (F, 3), offsets (F,) m."""
    from scipy.spatial import ConvexHull
    hull = ConvexHull(np.asarray(points, dtype=float))
    eq = hull.equations                     # n . x + c <= 0 inside, n outward unit
    normals, offsets = eq[:, :3], -eq[:, 3]
    # merge coplanar triangles (Qhull reports one row per triangle)
    key = np.round(np.hstack([normals, offsets[:, None]]), 9)
    _, keep = np.unique(key, axis=0, return_index=True)
    keep.sort()
    return normals[keep], offsets[keep]


def make_caster(geometry, tolerance: float = DEFAULT_TOLERANCE):
    """Line caster for a coal geometry, or None where the depth of the patch itself is used (cone, plane,
    meshes that were not converted to convex)."""
    if coal is None:  # pragma: no cover
        return None
    if isinstance(geometry, coal.Box):
        return PlanesCaster(*box_planes(geometry.halfSide), tolerance)
    if isinstance(geometry, coal.Sphere):
        return SphereCaster(geometry.radius, tolerance=tolerance)
    if isinstance(geometry, coal.Capsule):
        return CapsuleCaster(geometry.radius, geometry.halfLength, tolerance)
    if isinstance(geometry, coal.Cylinder):
        return CylinderCaster(geometry.radius, geometry.halfLength, tolerance)
    if isinstance(geometry, coal.Ellipsoid):
        return EllipsoidCaster(geometry.radii, tolerance)
    if isinstance(geometry, coal.Halfspace):
        n = np.asarray(geometry.n, dtype=float)
        return PlanesCaster(n[None, :] / np.linalg.norm(n), np.array([float(geometry.d)]), tolerance)
    if isinstance(geometry, coal.ConvexBase):
        pts = np.asarray(geometry.points(), dtype=float) if callable(geometry.points) else np.asarray(geometry.points)
        if len(pts) >= 4:
            try:
                return PlanesCaster(*convex_planes(pts), tolerance)
            except Exception:       # degenerate (flat) hull: fall back to the patch depth
                return None
    return None
