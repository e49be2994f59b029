"""The compiled happy-path test of the divergence bounds (``divergence.py``; also called inside
``step_kernels.finish_step``). Only the jit decorator, numpy and math here (the kernel modules' layer)."""

from __future__ import annotations

import math

from ..jit import njit

# bits of ``bounds_exceeded``'s result
SPEED_OR_DISTANCE = 1      # the scaled free-body velocities or positions sum (squared) to more than 1
ENERGY = 2                 # v^T M v is not finite


@njit(cache=True)
def bounds_exceeded(q, v, mass_matrix, q_index, q_scale, v_index, v_scale, tree_ptr):
    """The happy-path test of ``DivergenceCheck.check`` in one compiled pass (also called inside the simulator's
    ``sim/step_kernels.finish_step``): SPEED_OR_DISTANCE if sum_i (v[v_index_i] v_scale_i)^2 > 1 or
    sum_i (q[q_index_i] q_scale_i)^2 > 1 (then some bound MAY be exceeded: ``_first_violation`` looks at the bodies
    one by one), ENERGY if v^T M v is not finite (``mass_matrix`` (0, 0): not checked); 0 within the bounds.
    v^T M v is summed over the diagonal blocks of the kinematic trees only, the dofs tree_ptr[t]:tree_ptr[t + 1]
    (M is zero between trees: the same sum without its zero terms; 40 free bodies: 1.4k instead of 58k products)."""
    code = 0
    acc = 0.0
    for i in range(v_index.shape[0]):
        w = v[v_index[i]] * v_scale[i]
        acc += w * w
    pos = 0.0
    for i in range(q_index.shape[0]):
        p = q[q_index[i]] * q_scale[i]
        pos += p * p
    if acc > 1.0 or pos > 1.0:
        code |= SPEED_OR_DISTANCE
    nv = mass_matrix.shape[0]
    if nv:
        energy = 0.0
        for t in range(tree_ptr.shape[0] - 1):
            t0, t1 = tree_ptr[t], tree_ptr[t + 1]
            for a in range(t0, t1):
                row = 0.0
                for b in range(t0, t1):
                    row += mass_matrix[a, b] * v[b]
                energy += v[a] * row
        if not math.isfinite(energy):
            code |= ENERGY
    return code
