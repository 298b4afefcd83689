"""Route a scenario's fault list to its appliers, once, by the catalogue and the runtime.

What: `route_faults(faults, runtime)` looks every fault up in
`spikelens_common.fault_catalogue` for the scenario's runtime (`OurEngine` → ours, `VllmEngine`
→ vllm, `Target` → target) and returns `FaultRoutes`: per applier (engine, loadgen, proxy, hogs,
gc_hook) the faults it applies, as scenario dicts in the scenario's order. A kind the runtime
cannot get raises `FaultRouteError` with its index. `check_params(routes)` has each applier
validate its faults' params (the same parser it uses at run time), so a scenario fails at load
time, naming `faults[i]`.
Why here: the flows are the only place that knows what runs beside what; each applier (the
engine's fault clock, loadgen, the injectors) receives only its own faults and does not filter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from flows.runtime import OurEngine, Runtime, Target, VllmEngine
from spikelens_common.fault_catalogue import CATALOGUE, Applier, build_params, kinds_on
from spikelens_common.fault_catalogue import Runtime as RuntimeKey
from spikelens_common.fault_spec import FaultSpec

_RUNTIME_WORDS = {
    RuntimeKey.OURS: "spikelens' own engine",
    RuntimeKey.VLLM: "a vLLM engine spikelens starts",
    RuntimeKey.TARGET: "a `target:` (a server spikelens only drives, not started here)",
}


class FaultRouteError(ValueError):
    """A fault whose kind no applier can apply on the scenario's runtime."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index
        self.field = f"faults[{index}].kind"


@dataclass(frozen=True)
class Routed:
    """One fault on its way to its applier: where it sits in the scenario, and as a dict."""

    index: int
    fault: dict


@dataclass(frozen=True)
class FaultRoutes:
    """The faults of one run, per applier, in the scenario's order."""

    by_applier: dict[Applier, tuple[Routed, ...]] = field(default_factory=dict)

    def of(self, applier: Applier) -> list[dict]:
        """The faults `applier` applies (scenario dicts: kind, start_s, duration_s, params)."""
        return [r.fault for r in self.by_applier.get(applier, ())]


def runtime_key(runtime: Runtime) -> RuntimeKey:
    """The catalogue's name of a scenario's runtime."""
    match runtime:
        case OurEngine():
            return RuntimeKey.OURS
        case VllmEngine():
            return RuntimeKey.VLLM
        case Target():
            return RuntimeKey.TARGET
    raise TypeError(f"not a runtime: {runtime!r}")


def route_faults(faults: Sequence[FaultSpec], runtime: Runtime) -> FaultRoutes:
    """Each fault to the applier the catalogue names for `runtime`; FaultRouteError for a kind
    that cannot run there."""
    key = runtime_key(runtime)
    routed: dict[Applier, list[Routed]] = {}
    for i, spec in enumerate(faults):
        kind = CATALOGUE[spec.kind]
        application = kind.application(key)
        if application is None:
            works = " or ".join(_RUNTIME_WORDS[r] for r in kind.appliers)
            raise FaultRouteError(
                i,
                f"faults[{i}].kind: {spec.kind!r} cannot be applied to {_RUNTIME_WORDS[key]}: "
                f"it works with {works}; here these kinds apply: {', '.join(kinds_on(key))}",
            )
        routed.setdefault(application.applier, []).append(Routed(i, dataclasses.asdict(spec)))
    return FaultRoutes({applier: tuple(items) for applier, items in routed.items()})


def check_params(routes: FaultRoutes) -> None:
    """Every fault's params, checked by its applier's own parser (errors name `faults[i]` or
    the kind's params field)."""
    # the engine's kinds through the catalogue: importing their injectors imports torch (~3 s
    # before every run's first line, and again in the supervised child)
    from injectors import cpu_contention, delay_proxy, process_faults
    from loadgen.traffic_faults import traffic_fault

    for applier, items in routes.by_applier.items():
        for r in items:
            kind, params = r.fault["kind"], r.fault["params"]
            match applier:
                case Applier.ENGINE:
                    build_params(kind, Applier.ENGINE, params)
                case Applier.LOADGEN:
                    traffic_fault(r.fault, f"faults[{r.index}]")
                case Applier.PROXY:
                    delay_proxy.make_params(params)
                case Applier.HOGS:
                    cpu_contention.make_params(params)
                case Applier.GC_HOOK:
                    process_faults.make_params(kind, params)
