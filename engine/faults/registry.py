"""Registry of fault kinds: the cause each stands for and, for engine-applied kinds, its injector.

An injector is a class built from its params dataclass, with three hooks called by the
``FaultClock`` from the engine's step loop: ``start(engine)`` when the window opens,
``apply(engine)`` at the start of every step inside the window (before the step's timers start:
only cheap state changes belong there), ``stop(engine)`` when it closes. An injector whose cost
belongs to the forward pass also has ``forward(engine)``, called inside the forward timer. Each kind's
module docstring says where its cost lands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config_keys import ALL_UNKNOWN, strict_keys

# Every kind of docs/design.md and its cause; loadgen applies the ones not in ENGINE_KINDS.
FAULT_CAUSES: dict[str, str] = {
    "penalty.slow_path": "penalty",
    "penalty.repetition": "penalty",
    "penalty.heavy_traffic": "penalty",
    "memory.gc_storm": "memory",
    "memory.kv_pressure": "memory",
    "memory.alloc_churn": "memory",
    "comm.straggler": "communication",
    "comm.slow_link": "communication",
    "load.burst": "load",
    # applied from the flow side by collectors.cpu_contention (any engine spikelens starts)
    "host.cpu_contention": "host",
    # applied by loadgen to its own processes (loadgen.client_stall)
    "client.stall": "client",
    # applied from the flow side by a delaying TCP proxy between loadgen and the engine
    "network.delay": "network",
}


@dataclass(frozen=True)
class FaultKind:
    name: str
    params_cls: type  # dataclass of magnitudes with defaults
    injector_cls: type  # built as injector_cls(params)

    @property
    def cause(self) -> str:
        return FAULT_CAUSES[self.name]

    def make_params(self, values: Mapping[str, Any]):
        """Params dataclass from a mapping; unknown keys raise naming the key and the kind."""
        strict_keys(
            values,
            (f.name for f in dataclasses.fields(self.params_cls)),
            f"{self.name}.params",
            message=ALL_UNKNOWN,
            error=ValueError,
            sort_unknown=True,
        )
        return self.params_cls(**dict(values))


ENGINE_KINDS: dict[str, FaultKind] = {}


def register(name: str, params_cls: type):
    """Class decorator: register an injector class for the engine fault kind ``name``."""
    if name not in FAULT_CAUSES:
        raise ValueError(f"unknown fault kind {name!r}")

    def deco(injector_cls):
        ENGINE_KINDS[name] = FaultKind(name, params_cls, injector_cls)
        return injector_cls

    return deco
