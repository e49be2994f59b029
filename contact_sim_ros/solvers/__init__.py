"""Generic numerical solvers (no physics): Lemke's method for linear complementarity problems."""

from .lemke import LCPResult, LCPStatus, LemkeSolver, lemke

__all__ = ["LCPResult", "LCPStatus", "LemkeSolver", "lemke"]
