"""The compiled pass of the deep-interpenetration bound (sim/penetration.py): the contact deepest beyond its
bound, over the N contacts of a step."""

from __future__ import annotations

import math

from ..jit import njit


@njit(cache=True, inline="always")
def deepest_excess(signed_distance, geometry_a, geometry_b, thickness, fraction, allowance):
    """The contact whose penetration -signed_distance[i] exceeds its bound, ``fraction`` times the smaller thickness
    of its geometries plus ``allowance[i]`` (m; an empty array: none), by the largest ratio, or -1 when none does.
    ``signed_distance`` (N,) m, ``geometry_a``, ``geometry_b`` (N,) int indices into ``thickness`` (m per
    geometry)."""
    extra = allowance.shape[0] > 0
    worst = -1
    worst_ratio = 1.0
    for i in range(signed_distance.shape[0]):
        depth = -signed_distance[i]
        if depth <= 0.0:
            continue
        thin = min(thickness[geometry_a[i]], thickness[geometry_b[i]])
        bound = fraction * thin
        if extra:
            bound += allowance[i]
        if depth > bound:
            ratio = depth / bound if bound > 0.0 else math.inf
            if worst < 0 or ratio > worst_ratio:
                worst, worst_ratio = i, ratio
    return worst
