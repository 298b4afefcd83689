"""Attribute a spike to causes: decompose its excess, back each cause with evidence.

1. Steps inside the spike vs baseline steps (outside every spike, `guard_windows` on each side):
   rca.stepcost splits the mean excess per step into penalty / memory / communication / load /
   unexplained, after taking each step's GC overlap out of the stages it landed in.
2. Coverage: the step excess explains the latency rise only in part for TTFT/E2E (queueing):
   coverage = step slowdown / latency rise (P99 of steps for ITL P99; mean step for TTFT/E2E,
   which accumulate many steps). The queueing rest is blamed on what made the queue grow:
   outputs that loop (penalty: a repeated-3-gram rise, not mere length), preemptions (memory),
   arrivals or longer outputs without loops (load). A batch that grew while the work asked did
   not is a backlog: its step cost goes to what held the requests (rca.cause_shares, step 3).
3. Outside the engine (rca.outside_causes): client − server time per window (client, network)
   and an engine process's CPU wait (host).
4. rca.cause_shares turns these into shares of the excess, leaving uncovered what no signal
   covers (the 'unexplained' share); the verdict is 'unexplained' when the named causes cover
   less than `min_explained_share`. Confidence of a cause = half how far its main signal rose
   above baseline noise (z/5, capped) + half its Pearson r with the latency series; unexplained
   gets 1 − the best confidence among causes with share > 0.1.
5. An incident of several series is attributed on each of them (rca.incident_series); the one
   whose excess the signals cover best gives the verdict, the primary when none is covered.

Pure: inputs are not mutated; numpy only, no DB access (rca.analyze reads the warehouse).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import pyarrow as pa

from rca.cause_evidence import EngineFacts, EngineSeries, engine_evidence, main_signals
from rca.cause_shares import ShareInputs, cause_shares, verdict
from rca.config import CAUSES, AttributeConfig
from rca.consequences import WorkAsked, Workload, sojourn_masks, work_asked
from rca.detect import Spike
from rca.evidence import (
    Evidence,
    EvidenceBuilder,
    output_series,
    pause_stats,
    straggler,
    supports,
)
from rca.incident_series import best_covered, series_views
from rca.outside_causes import OutsideExcess, OutsideInputs, outside_excess
from rca.process_evidence import ProcessSignals, process_evidence
from rca.stepcost import Decomposition, StepCostModel, decompose_step_excess, mean_or_zero
from rca.window_columns import by_window, nvml_series, window_series


@dataclass
class CauseShare:
    cause: str
    share: float
    confidence: float
    excess_ms: float  # excess step time per step this cause explains (0 for queueing-only)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class Attribution:
    spike_id: int
    causes: list[CauseShare]  # largest share first; causes with share 0 left out
    top_cause: str
    coverage: float  # fraction of the latency rise the step slowdown accounts for
    step_excess_ms: float  # mean step duration, spike − baseline
    components_ms: dict  # cause → excess ms per step (before normalising)
    summary: str  # e.g. "GC gen-2 pauses, 187 ms on average"
    method: str = "stages"  # 'stages' (step traces) | 'metric_rank' (rca.metric_rank)
    host_contention: bool = False  # every engine stage slowed alike, no batch growth (rca.stepcost)
    uncovered: float = 0.0  # share of the latency excess no measured signal covers
    metric: str = ""  # the series of the incident the shares are of (rca.incident_series)


@dataclass
class RunSignals:
    """Everything attribution reads about one run (rows of warehouse queries)."""

    window_s: float
    windows: list[dict]  # query `windows`
    step_windows: list[dict]  # query `step_stages`
    steps: dict[str, np.ndarray]  # rca.stepcost.step_arrays(query `step_timeline`)
    gc_pauses: list[dict]  # query `gc_pauses`
    # query `request_outputs`: dict rows, or its Arrow table (rca.evidence.with_loop_rates)
    request_outputs: list[dict] | pa.Table = field(default_factory=list)
    nvml_windows: list[dict] = field(default_factory=list)  # query `nvml_windows`
    metric_windows: list[dict] = field(default_factory=list)  # query `metric_windows`
    client_windows: list[dict] = field(default_factory=list)  # query `client_windows`
    history_windows: list[dict] = field(default_factory=list)  # query `history_windows`
    transit_windows: list[dict] = field(default_factory=list)  # query `transit_windows`
    # where the server-side times of transit_windows come from: 'socket' (the engine server's
    # own socket stamps) or 'reported' (the times an engine reported in its stream, which start
    # after its front end read the request: macro transit_pairs, rca.outside_causes)
    transit_source: str = "socket"
    process: ProcessSignals = field(
        default_factory=ProcessSignals
    )  # the collectors' per-process rows
    # series built from the rows above, once per run: every spike (and every series of an
    # incident) reads the same ones (rows are never changed after load)
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # run.json's engine block (None: a target spikelens only drives, or not known) and the run's
    # status (ok | invalid: the load generator saturated | failed): rca.consequences, rca.validity
    engine: dict | None = None
    run_status: str = "ok"


def _p99(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.quantile(x, 0.99)) if len(x) else 0.0


def baseline_exclusions(
    n: int, spike: Spike, spikes: list[Spike], guard: int, min_windows: int
) -> list[tuple[int, int]]:
    """Window spans [first, last] left out of `spike`'s baseline: every spike ± `guard` windows.

    Where that leaves fewer than `min_windows` calm windows (a short run with two spikes), the
    other spikes are left out without their guards, then not at all (this spike, the spans of its
    incident, keeps its guard): a thin baseline beats none, against which every signal 'rises'
    from zero. The caller decides whether what is left is enough (`AttributeConfig`).
    """
    own = [spike, *(s for s in spikes if s.spike_id == spike.spike_id)]
    others = [s for s in spikes if s.spike_id != spike.spike_id]
    own_spans = [(s.first_window - guard, s.last_window + guard) for s in own]
    tries = (
        own_spans + [(s.first_window - guard, s.last_window + guard) for s in others],
        own_spans + [(s.first_window, s.last_window) for s in others],
        own_spans,
    )
    return next((spans for spans in tries if _outside(n, spans).sum() >= min_windows), own_spans)


def _outside(n: int, spans: list[tuple[int, int]]) -> np.ndarray:
    """bool [n_windows]: the windows in none of the [first, last] spans."""
    idx = np.arange(n)
    calm = np.ones(n, dtype=bool)
    for first, last in spans:
        calm &= ~((idx >= first) & (idx <= last))
    return calm


def window_masks(
    n: int, spike: Spike, spikes: list[Spike], guard: int, min_windows: int
) -> tuple[np.ndarray, np.ndarray]:
    """(in spike, baseline) boolean masks [n_windows]; baseline as `baseline_exclusions` says."""
    return _in_spike(n, spike), _outside(
        n, baseline_exclusions(n, spike, spikes, guard, min_windows)
    )


def _in_spike(n: int, spike: Spike) -> np.ndarray:
    idx = np.arange(n)
    return (idx >= spike.first_window) & (idx <= spike.last_window)


def time_masks(
    t: np.ndarray, spike: Spike, spans: list[tuple[int, int]], window_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """The same masks over step times t [n_steps] (seconds from load start); `spans` are
    `baseline_exclusions`' window spans."""
    in_spike = (t >= spike.start_s) & (t < spike.end_s)
    base = np.isfinite(t)
    for first, last in spans:
        base &= ~((t >= first * window_s) & (t < (last + 1) * window_s))
    return in_spike, base


@dataclass(frozen=True)
class SpikeFrame:
    """One spike's masks over windows and steps, and its latency series."""

    spike: Spike
    n: int  # windows in the run
    win_spike: np.ndarray
    win_base: np.ndarray
    st_spike: np.ndarray
    st_base: np.ndarray
    latency: np.ndarray  # the spike metric per window, ms

    @classmethod
    def of(
        cls, spike: Spike, spikes: list[Spike], signals: RunSignals, config: AttributeConfig
    ) -> SpikeFrame:
        n = len(signals.windows)
        guard, least = config.guard_windows, config.min_baseline_windows
        spans = baseline_exclusions(n, spike, spikes, guard, least)  # once, for both masks
        win_spike, win_base = _in_spike(n, spike), _outside(n, spans)
        st_spike, st_base = time_masks(signals.steps["t_s"], spike, spans, signals.window_s)
        latency = window_series(signals.windows, f"{spike.metric}_ms")
        return cls(spike, n, win_spike, win_base, st_spike, st_base, latency)

    def rose(self, series: np.ndarray, factor: float, slack: float = 0.0) -> bool:
        return (
            mean_or_zero(series[self.win_spike])
            > factor * mean_or_zero(series[self.win_base]) + slack
        )

    @property
    def latency_excess_ms(self) -> float:
        return mean_or_zero(self.latency[self.win_spike]) - self.spike.baseline_ms


def _decompose(
    frame: SpikeFrame, steps: dict[str, np.ndarray], config: AttributeConfig
) -> tuple[StepCostModel, Decomposition]:
    """The cost model fitted on quiet baseline steps, and the spike's step excess by cause."""
    quiet = frame.st_base & (np.nan_to_num(steps["gc_ms"]) == 0)
    if quiet.sum() < config.min_model_steps or np.nanstd(steps["decode_tokens"][quiet]) < 0.5:
        quiet = np.nan_to_num(steps["gc_ms"]) == 0  # batch never varied off-spike: use the run
    model = StepCostModel.fit(steps, quiet)
    return model, decompose_step_excess(steps, frame.st_spike, frame.st_base, model, config)


def _step_coverage(
    frame: SpikeFrame, steps: dict[str, np.ndarray], dec: Decomposition
) -> tuple[float, float, float, float]:
    """(coverage, relative step rise, baseline step ms, spike step ms): how much of the latency
    rise the step slowdown accounts for (P99 of steps for ITL P99, mean step for TTFT/E2E)."""
    spike = frame.spike
    rel_lat = frame.latency_excess_ms / spike.baseline_ms if spike.baseline_ms > 0 else 0.0
    stat = _p99 if spike.metric == "itl_p99" else mean_or_zero
    base_step = stat(steps["dur_ms"][frame.st_base])
    spike_step = stat(steps["dur_ms"][frame.st_spike])
    rel_step = (spike_step - base_step) / base_step if base_step > 0 else 0.0
    coverage = float(np.clip(rel_step / rel_lat, 0.0, 1.0)) if rel_lat > 0 else 1.0
    if sum(dec.components_ms.values()) <= 1e-9:
        coverage = 0.0
    mean_base = mean_or_zero(steps["dur_ms"][frame.st_base])
    return coverage, rel_step, mean_base, mean_or_zero(steps["dur_ms"][frame.st_spike])


def _engine_series(frame: SpikeFrame, signals: RunSignals) -> EngineSeries:
    """The run's EngineSeries over its `frame.n` windows, built once per run; a copy callers may
    change."""
    key = ("engine_series", frame.n)
    if key not in signals.memo:
        signals.memo[key] = _build_engine_series(signals, frame.n)
    built = signals.memo[key]
    return EngineSeries(**{f.name: getattr(built, f.name).copy() for f in fields(built)})


def _build_engine_series(signals: RunSignals, n: int) -> EngineSeries:
    sw = signals.step_windows
    history = by_window(signals.history_windows, "history_tokens", n)
    history[history <= 0] = np.nan  # no request in flight: no ratio
    outputs = output_series(signals.request_outputs, n)
    return EngineSeries(
        gc_ms=window_series(sw, "gc_ms", n),
        penalty_sample_ms=window_series(sw, "penalty_ms", n)
        + np.nan_to_num(window_series(sw, "sample_ms", n)),
        penalty_ms=window_series(sw, "penalty_ms", n),
        comm_ms=window_series(sw, "comm_max_ms", n),
        batch=window_series(sw, "batch_size", n),
        waiting=window_series(sw, "waiting", n),
        preemptions=window_series(sw, "preemptions", n),
        kv_usage=window_series(sw, "kv_usage", n),
        page_faults=window_series(sw, "page_faults", n),
        other_ms=window_series(sw, "other_ms", n),
        history_tokens=history,
        output_tokens=window_series(signals.windows, "output_tokens_mean"),
        arrivals=window_series(signals.windows, "arrivals"),
        prompt_tokens=window_series(signals.windows, "prompt_tokens_mean"),
        hit_max_tokens=outputs["hit_max_tokens"],
        repeated_3gram_rate=outputs["repeated_3gram_rate"],
        nvml_mem_fraction=nvml_series(signals.nvml_windows, "mem_fraction", n),
        nvml_sm_clock=nvml_series(signals.nvml_windows, "sm_clock", n),
    )


def _loops(frame: SpikeFrame, s: EngineSeries, config: AttributeConfig) -> bool:
    """Did the outputs loop? Their repeated-3-gram rate rose by `loop_rate_rise` (needs token ids)."""
    rate = s.repeated_3gram_rate
    spike, base = rate[frame.win_spike], rate[frame.win_base]
    if not np.isfinite(spike).any() or not np.isfinite(base).any():
        return False
    return mean_or_zero(spike) - mean_or_zero(base) >= config.loop_rate_rise


def _work_asked(
    frame: SpikeFrame, s: EngineSeries, signals: RunSignals, config: AttributeConfig
) -> WorkAsked:
    """The work the load generator asked in the spike against its baseline windows: what it sent
    and got back (`s`), its schedule (query `windows`) and its users in flight (`client_windows`),
    over the windows whose work was in the system in the spike (rca.consequences.sojourn_masks)."""
    masks = frame.win_spike, frame.win_base
    return work_asked(
        Workload(
            s.arrivals,
            s.prompt_tokens,
            s.output_tokens,
            window_series(signals.windows, "scheduled", frame.n),
            by_window(signals.client_windows, "in_flight", frame.n),
        ),
        masks,
        sojourn_masks(masks, frame.spike.peak_ms, signals.window_s, config.min_baseline_windows),
        config.load_rise,
        config.output_inflation,
    )


def _demand_grew(frame: SpikeFrame, s: EngineSeries, asked: WorkAsked, loops: bool) -> bool | None:
    """Did the client ask more work (more requests, longer prompts, longer outputs that did not
    loop)? None when it counted no request sent in the baseline windows (nothing to compare)."""
    if not (np.nan_to_num(s.arrivals[frame.win_base]) > 0).any():
        return None
    return asked.more_requests or asked.prompts_grew or (asked.outputs_grew and not loops)


def _queue_cause(dec: Decomposition, asked: WorkAsked, loops: bool) -> tuple[str | None, str]:
    """What made the queue grow, and in words: outputs that loop (penalty), preemptions
    (memory), more requests or longer requests without loops (load: more work asked,
    rca.consequences.work_asked), else nothing measured (None)."""
    if asked.outputs_grew and loops:
        return "penalty", "outputs looped (repeated 3-grams rose) and grew toward max_tokens"
    if dec.preemption_rise:
        return "memory", "KV cache exhausted: sequences preempted and recomputed"
    if asked.more_requests:
        return "load", "more requests: batch and queue grew"
    if asked.outputs_grew:
        return "load", "longer outputs without loops: more work per request"
    if asked.prompts_grew:
        return "load", "longer prompts: more work per request"
    if dec.waiting_rise and sum(dec.components_ms.values()) <= 1e-9:
        return "load", "more requests: batch and queue grew"
    return None, ""


def _confidence(
    ev: EvidenceBuilder,
    s: EngineSeries,
    outside: OutsideExcess,
    shares: dict[str, float],
    loops: bool,
) -> dict[str, float]:
    """cause → 0..1 from its main signal's rise and r (rca.evidence.strength)."""
    signals = {**main_signals(s, loops), **outside.signals}
    conf = {c: ev.strength(signals[c]) if c in signals else 0.0 for c in CAUSES}
    conf["unexplained"] = 1.0 - max(
        (conf[c] for c in CAUSES if c != "unexplained" and shares[c] > 0.1), default=0.0
    )
    return {c: round(float(np.clip(v, 0.0, 1.0)), 4) for c, v in conf.items()}


def _cause_list(
    shares: dict[str, float],
    conf: dict[str, float],
    components: dict[str, float],
    evidence: dict[str, list[Evidence]],
) -> list[CauseShare]:
    """CauseShares with share > 0, largest first, rounded so they never sum above 1."""
    causes = [
        CauseShare(c, round(shares[c], 4), conf[c], components.get(c, 0.0), evidence.get(c, []))
        for c in CAUSES
        if shares[c] > 1e-4
    ]
    causes.sort(key=lambda cs: -cs.share)
    overshoot = sum(cs.share for cs in causes) - 1.0
    if overshoot > 0 and causes:
        causes[0].share = round(causes[0].share - overshoot, 4)
    return causes


def attribute_spike(
    spike: Spike, spikes: list[Spike], signals: RunSignals, config: AttributeConfig | None = None
) -> Attribution:
    """Attribution of one spike (see module docstring); `spikes` = all spikes, kept out of baselines.

    Each series of the incident is attributed over its own span; the best covered is reported.
    """
    config = config or AttributeConfig()
    views = series_views(spike, signals.window_s)
    found = [_attribute_series(v, [*spikes, v], signals, config) for v in views]
    best = best_covered(found)
    chosen = found[best]
    if best > 0:
        chosen.summary += (
            f" (on {views[best].metric}, the incident's best-covered series;"
            f" its primary {spike.metric} is covered {1.0 - found[0].uncovered:.0%})"
        )
    return chosen


def _attribute_series(
    spike: Spike, spikes: list[Spike], signals: RunSignals, config: AttributeConfig
) -> Attribution:
    """Attribution of one series of an incident: `spike` spans that series' windows."""
    frame = SpikeFrame.of(spike, spikes, signals, config)
    calm = int(frame.win_base.sum())
    if calm < config.min_baseline_windows:
        return _no_baseline(spike, calm)
    steps = signals.steps
    model, dec = _decompose(frame, steps, config)
    coverage, rel_step, base_step, spike_step = _step_coverage(frame, steps, dec)
    series = _engine_series(frame, signals)
    ev = EvidenceBuilder(frame.latency, frame.win_spike, frame.win_base)
    outside = outside_excess(
        OutsideInputs(
            spike.metric,
            frame.latency_excess_ms,
            signals.transit_windows,
            signals.client_windows,
            signals.process,
            frame.n,
        ),
        ev,
        config,
    )
    asked = _work_asked(frame, series, signals, config)
    loops = _loops(frame, series, config)
    queue_cause, queue_reason = _queue_cause(dec, asked, loops)
    shares = cause_shares(
        ShareInputs(
            dec.components_ms,
            coverage,
            rel_step >= config.min_step_rise,
            queue_cause,
            base_step,
            spike_step,
            outside,
            queues=spike.metric != "itl_p99",
            demand_grew=_demand_grew(frame, series, asked, loops),
            load_factor=asked.factor,
        ),
        config,
    )
    evidence = _evidence(frame, signals, series, dec, model, outside)
    causes = _cause_list(
        shares, _confidence(ev, series, outside, shares, loops), dec.components_ms, evidence
    )
    top = verdict(shares, config)
    return Attribution(
        spike.spike_id,
        causes,
        top,
        coverage,
        spike_step - base_step,
        dec.components_ms,
        _summary(top, frame, signals, dec, outside, shares, (queue_cause, queue_reason)),
        host_contention=dec.uniform_slowdown is not None,
        uncovered=round(shares["unexplained"], 4),
        metric=spike.metric,
    )


def _no_baseline(spike: Spike, calm: int) -> Attribution:
    """'unexplained', said why: the run has too few windows outside the spike to compare with."""
    return Attribution(
        spike.spike_id,
        [CauseShare("unexplained", 1.0, 1.0, 0.0)],
        "unexplained",
        0.0,
        0.0,
        {},
        f"no calm baseline: {calm} window(s) of the run lie outside its spikes, too few to say"
        " what rose; a longer run (or a later start of the fault) can",
        uncovered=1.0,
        metric=spike.metric,
    )


def _evidence(
    frame: SpikeFrame,
    signals: RunSignals,
    series: EngineSeries,
    dec: Decomposition,
    model: StepCostModel,
    outside: OutsideExcess,
) -> dict[str, list[Evidence]]:
    """cause → Evidence: the engine's step windows, outside the engine, the collectors' rows."""
    ev = EvidenceBuilder(frame.latency, frame.win_spike, frame.win_base)
    w = signals.window_s
    facts = EngineFacts(
        dec,
        model,
        pause_stats(signals.gc_pauses, frame.win_spike, w),
        pause_stats(signals.gc_pauses, frame.win_base, w),
        w,
    )
    evidence = engine_evidence(ev, series, facts, signals.steps, frame.st_spike)
    for cause, rows in outside.evidence.items():
        evidence.setdefault(cause, []).extend(rows)
    found = process_evidence(signals.process, frame.latency, frame.win_spike, frame.win_base, w)
    for cause, rows in found.items():
        evidence.setdefault(cause, []).extend(rows)
    return {cause: [e for e in rows if supports(e)] for cause, rows in evidence.items()}


def _host_summary(outside: OutsideExcess) -> str:
    """Which loss of CPU the host share stands for: a process's run-queue wait, the steal, both."""
    said = []
    if outside.host_pid is not None:
        said.append(
            f"engine process (pid {outside.host_pid}) waited for a CPU: contention from outside it"
        )
    if outside.steal_fraction > 0:
        said.append(
            "the hypervisor stole the engine's CPUs: every stage "
            f"{1 / (1 - outside.steal_fraction):.2f}× slower"
        )
    return "; ".join(said) or "the engine lost CPU time outside its processes"


def _memory_summary(frame: SpikeFrame, signals: RunSignals, dec: Decomposition) -> str:
    pauses = pause_stats(signals.gc_pauses, frame.win_spike, signals.window_s)
    if pauses.mean_ms and pauses.mean_ms >= 1.0:
        gen = f"gen-{pauses.generation} " if pauses.generation is not None else ""
        return f"GC {gen}pauses, {pauses.mean_ms:.0f} ms on average"
    if dec.preemption_rise:
        return "KV cache exhausted: sequences preempted and recomputed"
    if dec.allocation_churn:
        pf = mean_or_zero(signals.steps["page_faults"][frame.st_spike])
        return (
            f"allocation churn: {pf:,.0f} page faults per step"
            if pf
            else "allocator retries per step rose"
        )
    return f"memory time per step up {dec.components_ms['memory']:.1f} ms"


def _summary(
    top: str,
    frame: SpikeFrame,
    signals: RunSignals,
    dec: Decomposition,
    outside: OutsideExcess,
    shares: dict[str, float],
    queue: tuple[str | None, str],
) -> str:
    """The top cause in words, e.g. "GC gen-2 pauses, 187 ms on average"."""
    if queue[0] == top and top in ("penalty", "load"):
        return queue[1]
    if top == "memory":
        return _memory_summary(frame, signals, dec)
    if top == "penalty":
        return f"penalty + sampling time per step up {dec.components_ms['penalty']:.1f} ms"
    if top == "communication":
        rank, rank_share = straggler(signals.steps, frame.st_spike)
        late = f", rank {rank} arrives last" if rank is not None and rank_share >= 0.6 else ""
        return f"collective wait per step up {dec.components_ms['communication']:.1f} ms{late}"
    if top == "load":
        return "more requests: batch and queue grew"
    if top == "client":
        return (
            f"the load generator read late: client − server time up {outside.transit_rise_ms:.1f} ms"
            if outside.transit_rise_ms > 0
            else f"the load generator read late: its lag p99 up {outside.client_lag_rise_ms:.0f} ms"
        )
    if top == "network":
        return f"transit between client and engine up {outside.transit_rise_ms:.1f} ms; engine times flat"
    if top == "host":
        return _host_summary(outside)
    covered = 1.0 - shares["unexplained"]
    if dec.uniform_slowdown is not None:
        return (
            f"every engine stage slowed alike ({dec.uniform_slowdown:.1f}x) with no batch growth; "
            f"measured signals cover {covered:.0%} of the excess"
        )
    return f"measured signals cover {covered:.0%} of the excess; no cause accounts for the rest"
