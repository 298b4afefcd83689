"""Faults that loadgen applies to the traffic itself: `load.burst`, `penalty.repetition`,
`penalty.heavy_traffic`, and `memory.kv_pressure` where spikelens' own engine does not serve;
and to its own process: `client.stall` (loadgen.client_stall).

What: `traffic_faults(faults)` validates the params of loadgen's faults (the flows route only
loadgen's kinds here: spikelens_common.fault_catalogue says which, per runtime; another kind is
an error); the helpers say, for a time on the run's time line, how many users / what rate
factor and which request overrides apply; `write_faults` records the windows in
`faults.loadgen.parquet` (spikelens_common.ground_truth). The params dataclasses are in
spikelens_common.fault_params.

- load.burst (cause load): the arrival rate multiplies by `factor` for the window — closed loop:
  users × factor; open loop: rate × factor. Not an engine fault: the control case.
- penalty.repetition (cause penalty): requests sent inside the window use sampling settings under
  which outputs loop until max_tokens (greedy, a negative frequency penalty that rewards repeating
  what was already said) and allow the workload's longest output (`output_tokens.max` unless
  params.max_tokens); they honour EOS (no `ignore_eos`), so a model that ends its passages on its
  own returns short outputs without the loop and long ones only because it loops.
- penalty.heavy_traffic (cause penalty): a share (`share`) of the requests sent inside the window
  carry frequency, presence and repetition penalties (any engine: the engine's penalty code runs
  for them); which requests is decided by a hash of the request id, so the rng's draws and the
  rest of the request stay as without the fault.
- memory.kv_pressure (cause memory) against an engine spikelens does not run itself (vLLM): a
  share of the requests sent inside the window ask for long prompts (`prompt_tokens`), so an
  engine with a small KV cache (vLLM's num_gpu_blocks_override) runs out of blocks, preempts and
  queues. Spikelens' own engine applies this kind itself (its KV budget shrinks): the flows
  route it to the engine there.

Times are seconds from the start of measured load; pure functions, no Locust import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.errors import SpecError
from loadgen.spec import SAMPLING_RANGES, _check_number
from spikelens_common.config_keys import strict_keys
from spikelens_common.fault_catalogue import CATALOGUE, Applier, kinds_applied_by
from spikelens_common.fault_params import (
    BurstParams,
    HeavyTrafficParams,
    LongPromptParams,
    RepetitionParams,
    StallParams,
)
from spikelens_common.ground_truth import Scheduled, scheduled_windows, write_windows

# every kind loadgen applies on some runtime (memory.kv_pressure only where our engine does not)
KINDS = tuple(kinds_applied_by(Applier.LOADGEN))

__all__ = [
    "KINDS",
    "BurstParams",
    "HeavyTrafficParams",
    "LongPromptParams",
    "RepetitionParams",
    "StallParams",
    "TrafficFault",
    "traffic_fault",
    "traffic_faults",
    "write_faults",
]


def _params_cls(kind: str) -> type:
    return CATALOGUE[kind].params_cls(Applier.LOADGEN)


@dataclass(frozen=True)
class TrafficFault:
    kind: str
    start_s: float
    duration_s: float
    # BurstParams | RepetitionParams | HeavyTrafficParams | LongPromptParams
    params: Any = field(default=None)

    @property
    def cause(self) -> str:
        return CATALOGUE[self.kind].cause

    def active(self, t_s: float) -> bool:
        return self.start_s <= t_s < self.start_s + self.duration_s

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "start_s": self.start_s,
            "duration_s": self.duration_s,
            "params": dataclasses.asdict(self.params),
        }


def traffic_faults(faults: list[dict] | None, where: str = "faults") -> list[TrafficFault]:
    """Loadgen's faults, each checked by `traffic_fault` (labels `<where>[i]`)."""
    return [traffic_fault(fault, f"{where}[{i}]") for i, fault in enumerate(faults or [])]


def traffic_fault(fault: dict, label: str) -> TrafficFault:
    """One of loadgen's faults, params validated: unknown keys and out-of-range values raise
    SpecError naming `<label>.<field>`; so does a kind loadgen does not apply (the flows route
    only loadgen's kinds here)."""
    kind = fault.get("kind")
    if kind not in KINDS:
        raise SpecError(
            f"{label}.kind: loadgen does not apply {kind!r}; it applies: {', '.join(KINDS)}"
        )
    params_cls = _params_cls(kind)
    params = dict(fault.get("params") or {})
    strict_keys(
        params,
        (f.name for f in dataclasses.fields(params_cls)),
        f"{label}.params",
        error=SpecError,
        message="{where}: unknown key '{key}' for " + kind + " (valid keys: {valid})",
    )
    _check_number(f"{label}.start_s", fault.get("start_s"), 0, 86_400)
    _check_number(f"{label}.duration_s", fault.get("duration_s"), 0, 86_400, low_inclusive=False)
    try:
        parsed = params_cls(**params)
    except ValueError as e:  # the params check themselves (client.stall)
        raise SpecError(f"{label}.{str(e).removeprefix(kind + '.')}") from None
    _check_ranges(kind, label, parsed)
    return TrafficFault(kind, float(fault["start_s"]), float(fault["duration_s"]), parsed)


def _check_ranges(kind: str, label: str, parsed: Any) -> None:
    """The ranges a params dataclass does not check itself (the workload's sampling ranges)."""
    if kind == "client.stall":
        return
    if kind == "load.burst":
        _check_number(f"{label}.params.factor", parsed.factor, 0, 1000, low_inclusive=False)
        return
    if kind == "memory.kv_pressure":
        _check_long_prompt(label, parsed)
        return
    if kind == "penalty.heavy_traffic":
        _check_number(f"{label}.params.share", parsed.share, 0, 1, low_inclusive=False)
    for name in parsed.sampling_overrides():
        low, high, lo_inc, hi_inc, integer = SAMPLING_RANGES[name]
        _check_number(
            f"{label}.params.{name}",
            getattr(parsed, name),
            low,
            high,
            low_inclusive=lo_inc,
            high_inclusive=hi_inc,
            integer=integer,
        )
    if getattr(parsed, "max_tokens", None) is not None:
        _check_number(f"{label}.params.max_tokens", parsed.max_tokens, 1, 1_000_000, integer=True)


def _check_long_prompt(label: str, parsed: LongPromptParams) -> None:
    _check_number(f"{label}.params.prompt_tokens", parsed.prompt_tokens, 1, 1_000_000, integer=True)
    _check_number(f"{label}.params.share", parsed.share, 0, 1, low_inclusive=False)
    if parsed.max_tokens is not None:
        _check_number(f"{label}.params.max_tokens", parsed.max_tokens, 1, 1_000_000, integer=True)


def from_dicts(dicts: list[dict]) -> list[TrafficFault]:
    """Rebuild faults from `TrafficFault.to_dict()` output (the Locust side of the config)."""
    return [
        TrafficFault(
            d["kind"], d["start_s"], d["duration_s"], _params_cls(d["kind"])(**d["params"])
        )
        for d in dicts
    ]


def burst_factor(faults: list[TrafficFault], t_s: float) -> float:
    """Product of the factors of the bursts active at t_s (1.0 when none)."""
    factor = 1.0
    for fault in faults:
        if fault.kind == "load.burst" and fault.active(t_s):
            factor *= fault.params.factor
    return factor


def burst_edges(faults: list[TrafficFault]) -> list[float]:
    """Times (s after load start) where a burst begins or ends."""
    return sorted(
        {t for f in faults if f.kind == "load.burst" for t in (f.start_s, f.start_s + f.duration_s)}
    )


def repetition_at(faults: list[TrafficFault], t_s: float) -> RepetitionParams | None:
    """The penalty.repetition params active at t_s, if any (the first one listed wins)."""
    for fault in faults:
        if fault.kind == "penalty.repetition" and fault.active(t_s):
            return fault.params
    return None


def sampling_fault_at(
    faults: list[TrafficFault], t_s: float, request_id: str
) -> TrafficFault | None:
    """The fault that rewrites request `request_id` sent at t_s, if any: the first
    penalty.repetition active then, else a penalty.heavy_traffic or memory.kv_pressure active
    then whose share takes this request (a stable hash of the id, uniform in [0, 1), below
    `share`)."""
    for fault in faults:
        if fault.kind == "penalty.repetition" and fault.active(t_s):
            return fault
    for fault in faults:
        shared = fault.kind in ("penalty.heavy_traffic", "memory.kv_pressure")
        if shared and fault.active(t_s) and _unit_hash(request_id) < fault.params.share:
            return fault
    return None


def _unit_hash(text: str) -> float:
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2**64


def write_faults(
    faults: list[TrafficFault], load_started_ns: int, duration_s: float, path: str | Path
) -> int:
    """Write the windows of the faults that fell inside the run (clipped to its end) to `path`
    (faults.loadgen.parquet); returns the number of rows. The windows are the scheduled ones: the
    Locust controller switches users at these times (gevent timers, ~ms) and a request's sampling
    is chosen by its intended send time."""
    scheduled = [Scheduled(f.kind, f.cause, f.start_s, f.duration_s, f.params) for f in faults]
    return write_windows(scheduled_windows(scheduled, load_started_ns, duration_s), path)
