"""Fault injection: scheduled engine faults (the ground truth of a scenario) and their registry."""

# Importing the kind modules registers them.
from engine.faults import alloc_churn, comm_faults, gc_storm, kv_pressure, penalty_slow_path  # noqa: F401
from engine.faults.fault_clock import FaultClock
from engine.faults.registry import ENGINE_KINDS, FAULT_CAUSES, FaultKind, register
from engine.faults.spec import FaultSpec, parse_fault_specs

__all__ = [
    "ENGINE_KINDS",
    "FAULT_CAUSES",
    "FaultClock",
    "FaultKind",
    "FaultSpec",
    "parse_fault_specs",
    "register",
]
