"""Every fault kind in one table: its cause, who applies it on which runtime, with which params.

What: `CATALOGUE[kind]` is a `FaultKind`: the cause it stands for (docs/design.md's classes),
a line on what it does, and `appliers`, a mapping runtime → `Application` (the applier and its
params dataclass, whose defaults are the kind's defaults there). A runtime a kind has no entry
for cannot get that fault: the scenario is rejected. Runtimes (`Runtime`): `ours` (spikelens'
engine), `vllm` (a vLLM server the flow starts), `target` (a server spikelens only drives).
Appliers (`Applier`): `engine` (spikelens' engine's fault clock, engine/faults), `loadgen`
(traffic and its own process, loadgen/traffic_faults.py), `proxy` (injectors/delay_proxy.py),
`hogs` (injectors/cpu_contention.py), `gc_hook` (a churn thread the GC hook starts inside the
engine's processes, injectors/process_faults.py).
Why one table: which component applies which kind on which runtime was decided in seven files;
the flows now route a scenario's fault list once from here (flows/fault_routing.py), and each
applier receives only its own faults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from spikelens_common.config_keys import strict_keys
from spikelens_common.fault_params import (
    AllocChurnParams,
    BurstParams,
    CpuContentionParams,
    DelayParams,
    GcStormParams,
    HeavyTrafficParams,
    KvPressureParams,
    LongPromptParams,
    ProcessGcStormParams,
    RepetitionParams,
    SlowForwardParams,
    SlowLinkParams,
    SlowPathParams,
    StallParams,
    StragglerParams,
)


class Runtime(StrEnum):
    OURS = "ours"
    VLLM = "vllm"
    TARGET = "target"


class Applier(StrEnum):
    ENGINE = "engine"
    LOADGEN = "loadgen"
    PROXY = "proxy"
    HOGS = "hogs"
    GC_HOOK = "gc_hook"


@dataclass(frozen=True)
class Application:
    """Who applies a kind on one runtime, and the params dataclass it takes."""

    applier: Applier
    params_cls: type


@dataclass(frozen=True)
class FaultKind:
    name: str
    cause: str
    what: str
    appliers: Mapping[Runtime, Application]

    def application(self, runtime: Runtime) -> Application | None:
        """Who applies this kind on `runtime` (None: it cannot run there)."""
        return self.appliers.get(runtime)

    def params_cls(self, applier: Applier) -> type:
        """The params dataclass `applier` takes for this kind."""
        for app in self.appliers.values():
            if app.applier == applier:
                return app.params_cls
        raise KeyError(f"{self.name} is not applied by {applier}")


def _everywhere(applier: Applier, params_cls: type) -> dict[Runtime, Application]:
    return {runtime: Application(applier, params_cls) for runtime in Runtime}


def _started(applier: Applier, params_cls: type) -> dict[Runtime, Application]:
    """Any engine spikelens starts (ours or vLLM), not a target."""
    return {r: Application(applier, params_cls) for r in (Runtime.OURS, Runtime.VLLM)}


def _ours(params_cls: type) -> dict[Runtime, Application]:
    return {Runtime.OURS: Application(Applier.ENGINE, params_cls)}


_CATALOGUE = (
    FaultKind(
        "penalty.slow_path",
        "penalty",
        "penalty counts recomputed from the whole history each step (a slow path)",
        _ours(SlowPathParams),
    ),
    FaultKind(
        "penalty.repetition",
        "penalty",
        "requests sampled so that outputs loop until max_tokens",
        _everywhere(Applier.LOADGEN, RepetitionParams),
    ),
    FaultKind(
        "penalty.heavy_traffic",
        "penalty",
        "a share of the requests carry frequency/presence/repetition penalties",
        _everywhere(Applier.LOADGEN, HeavyTrafficParams),
    ),
    FaultKind(
        "memory.gc_storm",
        "memory",
        "cyclic garbage churned in the serving process, so GC pauses land inside steps",
        {
            Runtime.OURS: Application(Applier.ENGINE, GcStormParams),
            Runtime.VLLM: Application(Applier.GC_HOOK, ProcessGcStormParams),
        },
    ),
    FaultKind(
        "memory.kv_pressure",
        "memory",
        "KV blocks run short: sequences are preempted and recomputed",
        {
            Runtime.OURS: Application(Applier.ENGINE, KvPressureParams),
            Runtime.VLLM: Application(Applier.LOADGEN, LongPromptParams),
        },
    ),
    FaultKind(
        "memory.alloc_churn",
        "memory",
        "large tensors allocated and freed every step",
        _ours(AllocChurnParams),
    ),
    FaultKind(
        "comm.straggler",
        "communication",
        "one rank waits before each all-reduce",
        _ours(StragglerParams),
    ),
    FaultKind(
        "comm.slow_link",
        "communication",
        "every collective carries extra payload",
        _ours(SlowLinkParams),
    ),
    FaultKind(
        "load.burst",
        "load",
        "the arrival rate multiplies for the window (a control, not an engine fault)",
        _everywhere(Applier.LOADGEN, BurstParams),
    ),
    FaultKind(
        "host.cpu_contention",
        "host",
        "busy-loop processes pinned to the engine's CPUs",
        _started(Applier.HOGS, CpuContentionParams),
    ),
    FaultKind(
        "client.stall",
        "client",
        "each Locust process blocks its interpreter for pause_ms every every_ms",
        _everywhere(Applier.LOADGEN, StallParams),
    ),
    FaultKind(
        "unexplained.slow_forward",
        "unexplained",
        "the model's forward runs `factor` times slower, with nothing any collector reads to say why",
        _ours(SlowForwardParams),
    ),
    FaultKind(
        "network.delay",
        "network",
        "a TCP proxy between loadgen and the engine delays every chunk",
        _everywhere(Applier.PROXY, DelayParams),
    ),
)
CATALOGUE: dict[str, FaultKind] = {k.name: k for k in _CATALOGUE}
FAULT_CAUSES: dict[str, str] = {k.name: k.cause for k in _CATALOGUE}


def kinds_applied_by(applier: Applier, runtime: Runtime | None = None) -> list[str]:
    """The kinds `applier` applies (on `runtime`, or on any runtime when None), sorted."""
    return sorted(
        {
            kind.name
            for kind in _CATALOGUE
            for r, app in kind.appliers.items()
            if app.applier == applier and (runtime is None or r == runtime)
        }
    )


def kinds_on(runtime: Runtime) -> list[str]:
    """The kinds that can run on `runtime`, sorted."""
    return sorted(k.name for k in _CATALOGUE if runtime in k.appliers)


def build_params(kind: str, applier: Applier, values: Mapping[str, Any] | None) -> Any:
    """The params dataclass `applier` takes for `kind`, from a scenario mapping (None: all
    defaults). An unknown key raises ValueError naming it (`<kind>.params: unknown key 'x'
    (valid keys: ...)`); the dataclass checks its own ranges."""
    cls = CATALOGUE[kind].params_cls(applier)
    valid = [f.name for f in dataclasses.fields(cls)]
    strict_keys(
        values or {}, valid, f"{kind}.params", error=ValueError, sort_unknown=True, valid=valid
    )
    return cls(**dict(values or {}))
