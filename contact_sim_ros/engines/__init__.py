"""Contact engines: the interface (base.py), the registry, and one module per engine."""

from .base import Actuation, ContactEngine, SolverStats, SolverStatus, StepInputs, StepResult
from .registry import engine_class, engine_names, make_engine, register_engine

__all__ = ["Actuation", "ContactEngine", "SolverStats", "SolverStatus", "StepInputs", "StepResult",
           "engine_class", "engine_names", "make_engine", "register_engine"]
