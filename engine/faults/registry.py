"""The engine-applied fault kinds and their injectors (the catalogue of every kind, its cause,
its applier per runtime and its params, is `spikelens_common.fault_catalogue`).

An injector is a class built from its params dataclass, with three hooks called by the
``FaultClock`` from the engine's step loop: ``start(engine)`` when the window opens,
``apply(engine)`` at the start of every step inside the window (before the step's timers start:
only cheap state changes belong there), ``stop(engine)`` when it closes. An injector whose cost
belongs to the forward pass also has ``forward(engine)``, called inside the forward timer. Each kind's
module docstring says where its cost lands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spikelens_common.fault_catalogue import CATALOGUE, Applier, build_params


@dataclass(frozen=True)
class EngineFault:
    """An engine-applied kind: its params dataclass (from the catalogue) and its injector."""

    name: str
    params_cls: type  # dataclass of magnitudes with defaults
    injector_cls: type  # built as injector_cls(params)

    @property
    def cause(self) -> str:
        return CATALOGUE[self.name].cause

    def make_params(self, values: Mapping[str, Any]):
        """Params dataclass from a mapping; unknown keys raise naming the key and the kind."""
        return build_params(self.name, Applier.ENGINE, values)


ENGINE_KINDS: dict[str, EngineFault] = {}


def register(name: str):
    """Class decorator: the injector class of the engine-applied kind ``name``; its params
    dataclass is the one the catalogue names for the engine."""
    if name not in CATALOGUE:
        raise ValueError(f"unknown fault kind {name!r}")
    params_cls = CATALOGUE[name].params_cls(Applier.ENGINE)

    def deco(injector_cls):
        ENGINE_KINDS[name] = EngineFault(name, params_cls, injector_cls)
        return injector_cls

    return deco
