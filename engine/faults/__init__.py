"""The engine side of fault injection: the fault clock of the step loop and the injectors of the
kinds spikelens' engine applies (the catalogue of every kind is spikelens_common.fault_catalogue)."""

# Importing the kind modules registers them.
from engine.faults import (  # noqa: F401
    alloc_churn,
    comm_faults,
    gc_storm,
    kv_pressure,
    penalty_slow_path,
    slow_forward,
)
from engine.faults.fault_clock import FaultClock
from engine.faults.registry import ENGINE_KINDS, EngineFault, register

__all__ = ["ENGINE_KINDS", "EngineFault", "FaultClock", "register"]
