"""Fault injection: scheduled engine faults (the ground truth of a scenario) and their registry."""

from engine.faults.registry import ENGINE_KINDS, FAULT_CAUSES, FaultKind, register
from engine.faults.scheduler import FaultScheduler
from engine.faults.spec import FaultSpec, parse_fault_specs

# Importing the kind modules registers them.
from engine.faults import gc_storm  # noqa: E402,F401  (registers memory.gc_storm)

__all__ = ["ENGINE_KINDS", "FAULT_CAUSES", "FaultKind", "FaultScheduler", "FaultSpec", "parse_fault_specs", "register"]
