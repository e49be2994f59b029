"""An address table: the fixed arrays of a fused compiled call passed as ONE (K, 4) int64 array, a row
(address, dims...) per array, and viewed inside the call with ``numba.carray`` (no per-array unboxing: numba
unboxes each array argument for ~0.05-0.08 us). Used by the fused steps (sim/free_body_step.py, sim/tree_step.py)
and the contact query's compiled pass (geometry/contact_pass_kernels.py). Whoever builds a table holds a reference
to every array in it for as long as the table is used: the addresses are only valid while the arrays live."""

from __future__ import annotations

from .jit import carray, float_pointer, inline_helper, int_pointer


def table_row(a, owner: str) -> tuple:
    """(address, dims...) of a C-contiguous numpy array of at most 3 dimensions: its row of an address table.
    ``owner``: the module building the table (named in the error)."""
    if not a.flags.c_contiguous or a.ndim > 3:
        raise ValueError(f"{owner}: an array of the table must be C-contiguous with <= 3 dimensions, got "
                         f"{a.dtype} {a.shape}")
    return (a.ctypes.data, *a.shape, *(0,) * (3 - a.ndim))


@inline_helper
def float_view1(t, k):
    """Row k of table t as a float64 array of 1 dimension."""
    return carray(float_pointer(t[k, 0]), (t[k, 1],))


@inline_helper
def float_view2(t, k):
    """Row k of table t as a float64 array of 2 dimensions."""
    return carray(float_pointer(t[k, 0]), (t[k, 1], t[k, 2]))


@inline_helper
def float_view3(t, k):
    """Row k of table t as a float64 array of 3 dimensions."""
    return carray(float_pointer(t[k, 0]), (t[k, 1], t[k, 2], t[k, 3]))


@inline_helper
def int_view1(t, k):
    """Row k of table t as an int64 array of 1 dimension."""
    return carray(int_pointer(t[k, 0]), (t[k, 1],))


@inline_helper
def int_view2(t, k):
    """Row k of table t as an int64 array of 2 dimensions."""
    return carray(int_pointer(t[k, 0]), (t[k, 1], t[k, 2]))
