"""Generic numerical solvers (no physics): Lemke's method for linear complementarity problems (``lemke``) and
mixed-integer QPs with binaries and their back-ends DAQP / SCIP / Gurobi (``miqp``)."""

from .lemke import LCPResult, LCPStatus, LemkeSolver, lemke

__all__ = ["LCPResult", "LCPStatus", "LemkeSolver", "lemke"]
