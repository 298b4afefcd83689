"""What `spikelens confirm` changes to remove a cause, and the stretch of a run it replays (pure).

Two arms replay the same stretch of a recorded run: the spike with a baseline before it. The
recorded arm sends the recorded requests as they were; the removed arm sends them with the
verdict's cause taken away. An open loop's requests go out at their recorded times; a closed
loop's as its recorded users' closed loops (each request when that user's last one ended:
loadgen.chains), since the same arrivals sent on a clock to an engine at its capacity make a
queue that grows or not by a few per cent of engine speed. Both arms keep the run's engine, settings and faults (the
environment is part of the experiment), with each fault's window shifted by the slice start so
it lands where it landed in the recorded run.

One intervention per cause, where a knob exists (`intervention_for`):
- memory (GC): automatic GC off in every process of the engine's tree, through the GC hook
  (`intervention: {gc_off: true}`); explicit gc.collect() calls still run;
- memory (KV): 4× the KV cache (engine.kv_blocks, or kv_cache_memory_bytes when set; vLLM's
  num_gpu_blocks_override and kv_cache_space_gib, when the run gave a size);
- penalty: every request's frequency/presence penalty 0 and repetition penalty 1; for a loop
  (the spike's outputs repeated more), also max_tokens capped at the baseline stretch's median
  output. Only for loops: a cap shortens every output, which also removes load and KV pressure
  (measured: a KV-pressure spike swapped to penalty was "confirmed" through the cap);
- load: the arrivals above the baseline rate dropped from the arrival of the earliest request
  still in flight when the spike began to the spike's end (the requests present during the spike
  are its load: in a queue they arrived up to one queue-and-service time before it); for a
  closed loop, the users who started from then on beyond the count running then (cap_users);
- host: the engine's processes started at a raised priority (`intervention: {nice: -10}`,
  flows/priority.py), where this process has the right to raise it;
- client, network: no engine knob; on spikelens' engine, measured instead (`measured`: the
  recorded run's client-side and server-side times compared, rca.confirm.measure_outside);
- communication, unexplained: no knob here, said so (`available=False`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from flows.priority import RAISED_NICE
from loadgen.spec import LoadSpec

KV_FACTOR = 4
# the stretch replayed: max(MIN_LEAD_S, LEAD_FACTOR × spike length) before the spike, TAIL_S after
MIN_LEAD_S = 20.0
LEAD_FACTOR = 2.0
TAIL_S = 5.0
# the baseline stretch's rate is read before the spike's load began arriving when that leaves at
# least this much (a rate over a second or two of a handful of users is mostly chance)
MIN_BASELINE_S = 3.0
# penalties that mean "off" (docs/design.md, engine semantics)
NEUTRAL_PENALTIES = {"frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0}


@dataclass(frozen=True)
class Stretch:
    """The slice of the recorded run an arm replays, and where the spike lands in the arm.

    Trace times count from the recorded run's first request (loadgen.replay); arm times from
    the arm's own start of measured load (after `warmup_s`)."""

    trace_from_s: float
    trace_to_s: float
    warmup_s: float
    spike_start_s: float  # in the arm's measured time
    spike_end_s: float

    @property
    def duration_s(self) -> float:
        return self.trace_to_s - self.trace_from_s - self.warmup_s

    @property
    def shift_s(self) -> float:
        """Recorded measured time minus arm measured time (what a fault's start_s loses)."""
        return self.trace_from_s + self.warmup_s - self.t0_offset_s

    t0_offset_s: float = 0.0  # the recorded load start, in trace time


def plan_stretch(
    spike_start_s: float,
    spike_end_s: float,
    t0_offset_s: float,
    warmup_s: float,
    trace_end_s: float,
) -> Stretch:
    """The stretch for a spike at [spike_start_s, spike_end_s) of the recorded measured time.

    `t0_offset_s`: the recorded load start in trace time (≈ the recorded warm-up); `warmup_s`:
    the arm's warm-up, taken from the slice's own first seconds; `trace_end_s`: the last
    request's trace time. The lead is cut where the run began earlier than it asks."""
    length = spike_end_s - spike_start_s
    lead = max(MIN_LEAD_S, LEAD_FACTOR * length)
    start_trace = spike_start_s + t0_offset_s
    trace_from = max(0.0, start_trace - lead - warmup_s)
    trace_to = min(spike_end_s + t0_offset_s + TAIL_S, trace_end_s + 1.0)
    arm_start = start_trace - trace_from - warmup_s
    return Stretch(
        trace_from_s=trace_from,
        trace_to_s=trace_to,
        warmup_s=warmup_s,
        spike_start_s=arm_start,
        spike_end_s=arm_start + length,
        t0_offset_s=t0_offset_s,
    )


def shift_faults(faults: list[dict[str, Any]], stretch: Stretch) -> list[dict[str, Any]]:
    """The scenario's faults on the arm's time line: each window moved by the slice start and
    cut to [0, duration_s); a fault wholly outside the stretch is left out."""
    shifted = []
    for f in faults:
        start = float(f.get("start_s", 0.0)) - stretch.shift_s
        end = start + float(f.get("duration_s", 0.0))
        start, end = round(max(0.0, start), 3), min(round(stretch.duration_s, 3) - 0.001, end)
        length = math.floor((end - start) * 1000) / 1000  # never past the arm's end
        if length <= 0:
            continue
        shifted.append({**f, "start_s": start, "duration_s": length})
    return shifted


@dataclass(frozen=True)
class TraceEntry:
    """One request of the replayed slice (a JSONL trace row of loadgen.replay)."""

    t_s: float  # seconds after the slice start
    prompt_tokens: int
    max_tokens: int | None
    sampling: dict[str, Any] = field(default_factory=dict)
    user: str | None = None  # closed loop: the recorded user who sent it
    until_s: float | None = None  # closed loop: when that user stopped (slice time); None: never

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t_s": round(self.t_s, 6), "prompt_tokens": self.prompt_tokens}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.sampling:
            out["sampling"] = self.sampling
        if self.user is not None:
            out["user"] = self.user
        if self.until_s is not None:
            out["until_s"] = round(self.until_s, 6)
        return out


@dataclass(frozen=True)
class BaselineFacts:
    """What the recorded run's baseline stretch says (for the penalty and load interventions)."""

    median_output_tokens: float | None
    arrivals_per_s: float | None
    # how long before the spike's start the earliest request still in flight then arrived (0:
    # none straddled it); the load intervention thins the arrivals from there
    lead_s: float = 0.0


@dataclass(frozen=True)
class Intervention:
    """How one cause is removed on one engine; `available` False: no knob (`reason` says why)."""

    cause: str
    name: str
    does: str  # what it changes, in words
    leaves: str = ""  # what it does not remove
    available: bool = True
    reason: str = ""
    caps_output: bool = False  # penalties_off for a loop: max_tokens capped too

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_NO_KNOB = {
    "communication": "no knob: the collective's extra wait cannot be told apart from the "
    "collective itself without removing the fault",
    "client": "no engine knob, and no server-side time to measure it by on this engine "
    "(spikelens does not read vLLM's per-request server times)",
    "network": "no engine knob, and no server-side time to measure it by on this engine "
    "(spikelens does not read vLLM's per-request server times)",
    "unexplained": "nothing named to remove",
}


def intervention_for(
    cause: str,
    runtime_kind: str,
    gc_paused: bool = True,
    engine: dict | None = None,
    priority_denied: str | None = None,
    loops: bool = False,
    closed_loop: bool = False,
) -> Intervention:
    """The intervention for `cause` on `runtime_kind` ('engine' = spikelens', 'vllm', 'target').
    `gc_paused`: the memory evidence is GC pauses (else KV pressure); `engine`: the recorded
    engine block (a vLLM whose cache size was derived has no recorded size to multiply);
    `priority_denied`: why this process may not raise a priority (flows.priority.why_not);
    `loops`: the spike's outputs looped (penalty: cap max_tokens too); `closed_loop`: the
    recorded load was users waiting for their answers (load: cap the users, not arrivals)."""
    if runtime_kind == "target":
        return Intervention(
            cause, "none", "", available=False, reason="a target: spikelens did not start it"
        )
    if cause == "memory" and gc_paused:
        return Intervention(
            cause,
            "gc_off",
            "automatic garbage collection frozen and disabled in every process of the engine's "
            "tree from interpreter start (GC hook: gc.freeze(); gc.disable())",
            "explicit gc.collect() calls still run (the engine's own; a GC storm's garbage stays "
            "uncollected, as a leak)",
        )
    if cause == "memory":
        sized = engine is None or any(
            engine.get(k) is not None for k in ("num_gpu_blocks_override", "kv_cache_space_gib")
        )
        if runtime_kind == "vllm" and not sized:
            return Intervention(
                cause,
                "kv_x4",
                "",
                available=False,
                reason="vLLM derived its KV cache size: no recorded size to multiply",
            )
        return Intervention(
            cause,
            "kv_x4",
            f"{KV_FACTOR}× the engine's KV cache (spikelens' kv_blocks or kv_cache_memory_bytes; "
            "vLLM's num_gpu_blocks_override and kv_cache_space_gib)",
        )
    if cause == "penalty":
        neutral = "every request's frequency and presence penalties 0 and repetition penalty 1"
        if not loops:
            return Intervention(cause, "penalties_off", neutral, "a repetition loop's length")
        return Intervention(
            cause,
            "penalties_off",
            f"{neutral}; max_tokens capped at the baseline stretch's median output (the outputs "
            "looped)",
            caps_output=True,
        )
    if cause == "load" and closed_loop:
        return Intervention(
            cause,
            "users_capped",
            "users who started after the spike's load began arriving dropped while as many "
            "users were running as then, to the spike's end (a closed loop's load is its users)",
        )
    if cause == "load":
        return Intervention(
            cause,
            "arrivals_capped",
            "arrivals above the baseline stretch's rate dropped from the earliest arrival still "
            "in flight at the spike's start to its end",
        )
    if cause == "host":
        return _priority_raised(priority_denied)
    if cause in ("client", "network") and runtime_kind == "engine":
        return Intervention(
            cause,
            "measured",
            "nothing re-run: the recorded run's client-side p99 and the server's own (its socket "
            "stamps) over the same requests, each against its baseline; the share of the "
            "client's excess the server did not see happened outside the engine",
            "client and network apart: both are outside the engine, and this does not say which",
        )
    reason = _NO_KNOB.get(cause, f"unknown cause {cause!r}")
    return Intervention(cause, "none", "", available=False, reason=reason)


def _priority_raised(denied: str | None) -> Intervention:
    if denied is not None:
        return Intervention("host", "priority_raised", "", available=False, reason=denied)
    return Intervention(
        "host",
        "priority_raised",
        f"every process of the engine's tree started at nice {RAISED_NICE}, ahead of anything "
        "at the default priority for the CPU",
        "contention at a priority above the engine's, or for something other than CPU time "
        "(memory bandwidth, caches)",
    )


def apply_to_engine(engine: dict[str, Any], intervention: Intervention) -> dict[str, Any]:
    """The scenario's `engine:` block under `intervention` (only kv_x4 changes it)."""
    if intervention.name != "kv_x4":
        return dict(engine)
    out = dict(engine)
    if out.get("kind") == "vllm":
        # the cache's size in blocks and the CPU build's space for it, each as recorded; a
        # derived size (neither given) grows with max_num_seqs × max_model_len instead
        for key in ("num_gpu_blocks_override", "kv_cache_space_gib"):
            if out.get(key) is not None:
                out[key] = out[key] * KV_FACTOR
        return out
    if isinstance(out.get("kv_cache_memory_bytes"), int):
        out["kv_cache_memory_bytes"] = out["kv_cache_memory_bytes"] * KV_FACTOR
        return out
    out["kv_blocks"] = int(out.get("kv_blocks", 512)) * KV_FACTOR
    return out


def apply_to_trace(
    entries: list[TraceEntry],
    intervention: Intervention,
    facts: BaselineFacts,
    spike_trace_s: tuple[float, float],
) -> list[TraceEntry]:
    """The slice's requests under `intervention` (penalties_off and arrivals_capped change
    them); `spike_trace_s`: the spike's window in the slice's time."""
    if intervention.name == "penalties_off":
        cap = facts.median_output_tokens if intervention.caps_output else None
        return zero_penalties(entries, cap)
    window = (spike_trace_s[0] - max(0.0, facts.lead_s), spike_trace_s[1])
    if intervention.name == "users_capped":
        return cap_users(entries, window)
    if intervention.name == "arrivals_capped" and facts.arrivals_per_s:
        return cap_arrivals(entries, window, facts.arrivals_per_s)
    return list(entries)


def zero_penalties(entries: list[TraceEntry], max_tokens_cap: float | None) -> list[TraceEntry]:
    """Penalties neutral, max_tokens at most the cap (rounded, at least 1; None: unchanged)."""
    cap = None if max_tokens_cap is None else max(1, round(max_tokens_cap))
    out = []
    for e in entries:
        sampling = {**e.sampling, **{k: v for k, v in NEUTRAL_PENALTIES.items()}}
        limit = e.max_tokens
        if cap is not None:
            limit = cap if limit is None else min(limit, cap)
        out.append(dataclasses.replace(e, sampling=sampling, max_tokens=limit))
    return out


def cap_arrivals(
    entries: list[TraceEntry], window: tuple[float, float], rate_per_s: float
) -> list[TraceEntry]:
    """Keep at most `rate_per_s` × window length of the arrivals inside `window`, evenly spread
    over them (deterministic); arrivals outside the window stay."""
    inside = [i for i, e in enumerate(entries) if window[0] <= e.t_s < window[1]]
    budget = max(0, math.floor(rate_per_s * (window[1] - window[0]) + 1e-9))
    if len(inside) <= budget:
        return list(entries)
    keep = {inside[math.floor(j * len(inside) / budget)] for j in range(budget)}
    dropped = set(inside) - keep
    return [e for i, e in enumerate(entries) if i not in dropped]


def cap_users(entries: list[TraceEntry], window: tuple[float, float]) -> list[TraceEntry]:
    """A closed loop's load capped: the users alive as `window` opens are kept, and a user who
    starts inside it is dropped (all its requests) while that many others are alive then.
    Users are alive from their first request to their stop (`until_s`; None: to the end)."""
    first: dict[str, float] = {}
    until: dict[str, float] = {}
    for e in entries:
        if e.user is None:
            continue
        first[e.user] = min(e.t_s, first.get(e.user, math.inf))
        until[e.user] = math.inf if e.until_s is None else e.until_s

    def alive(user: str, t: float) -> bool:
        return first[user] <= t < until[user]

    base = {u for u in first if alive(u, window[0])}
    if not base:
        return list(entries)
    joined = sorted((u for u in first if window[0] < first[u] < window[1]), key=first.__getitem__)
    kept = set(base)
    for user in joined:
        if sum(alive(k, first[user]) for k in kept) < len(base):
            kept.add(user)
    dropped = set(joined) - kept
    return [e for e in entries if e.user not in dropped]


def arm_scenario(
    recorded: dict[str, Any],
    stretch: Stretch,
    trace_path: str,
    intervention: Intervention | None,
) -> dict[str, Any]:
    """The scenario mapping of one arm: the recorded scenario replaying `trace_path` over the
    stretch, faults shifted; `intervention` None: the recorded arm."""
    raw = dict(recorded)
    raw.pop("intervention", None)
    arm = "recorded" if intervention is None else f"{intervention.name}"
    raw["name"] = f"confirm ({arm}) of {recorded.get('name', 'run')}"
    raw["warmup_s"] = stretch.warmup_s
    raw["duration_s"] = round(stretch.duration_s, 3)
    raw["load"] = replay_load(recorded.get("load") or {}, trace_path)
    raw["faults"] = shift_faults(list(recorded.get("faults") or []), stretch)
    raw.pop("slo", None)
    if intervention is not None and "engine" in raw:
        raw["engine"] = apply_to_engine(raw["engine"] or {}, intervention)
        if intervention.name == "gc_off":
            raw["intervention"] = {"gc_off": True}
        if intervention.name == "priority_raised":
            raw["intervention"] = {"nice": RAISED_NICE}
    return raw


def recorded_closed_loop(scenario: dict[str, Any]) -> bool:
    """The recorded run's users waited for their answers (a users shape, not arrivals): its
    arms replay closed (replay_load) and its load intervention drops users (cap_users)."""
    return not LoadSpec.from_dict(scenario.get("load") or {}).open_loop


def replay_load(recorded_load: dict[str, Any], trace_path: str) -> dict[str, Any]:
    """An arm's `load:` block: the trace replayed open loop where the recorded load was open,
    else as the recorded users' closed loops with their think time (loadgen.chains)."""
    spec = LoadSpec.from_dict(recorded_load)
    if spec.open_loop:
        return {"shape": "replay", "trace": trace_path}
    return {
        "shape": "replay",
        "trace": trace_path,
        "replay_loop": "closed",
        "think_time_s": spec.think_time_s,
    }
