"""Attribute a spike to causes: decompose its excess step time by stage, back it with evidence.

1. Steps inside the spike vs baseline steps (outside every spike, `guard_windows` on each side):
   rca.stepcost splits the mean excess per step into penalty / memory / communication / load /
   unexplained, after taking each step's GC overlap out of the stages it landed in.
2. Coverage: the step excess explains the latency rise only in part for TTFT/E2E (queueing):
   coverage = step slowdown / latency rise (P99 of steps for ITL P99; mean step for TTFT/E2E,
   which accumulate many steps). The uncovered part is queueing, blamed on what made the queue
   grow: inflated outputs (penalty: repetition loops), preemptions (memory), arrivals (load);
   else the step causes in proportion.
3. Shares sum to 1 over causes (never above 1 after rounding). Confidence of a cause = half how
   far its main signal rose above baseline noise (z/5, capped) + half its Pearson r with the
   latency series; unexplained gets 1 − the best confidence among causes with share > 0.1.

Pure: inputs are not mutated; numpy only, no DB access (rca.analyze reads the warehouse).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rca.config import CAUSES, AttributeConfig
from rca.detect import Spike
from rca.evidence import Evidence, EvidenceBuilder, output_series, pause_stats, straggler
from rca.process_evidence import ProcessSignals, process_evidence
from rca.stepcost import StepCostModel, decompose_step_excess, mean_or_zero


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


@dataclass
class RunSignals:
    """Everything attribution reads about one run (rows of warehouse queries)."""

    window_s: float
    windows: list[dict]  # query `windows`
    step_windows: list[dict]  # query `step_stages`
    steps: dict[str, np.ndarray]  # rca.stepcost.step_arrays(query `step_timeline`)
    gc_pauses: list[dict]  # query `gc_pauses`
    request_outputs: list[dict] = field(default_factory=list)  # query `request_outputs`
    nvml_windows: list[dict] = field(default_factory=list)  # query `nvml_windows`
    metric_windows: list[dict] = field(default_factory=list)  # query `metric_windows`
    client_windows: list[dict] = field(default_factory=list)  # query `client_windows`
    history_windows: list[dict] = field(default_factory=list)  # query `history_windows`
    process: ProcessSignals = field(
        default_factory=ProcessSignals
    )  # the collectors' per-process rows


def window_series(rows: list[dict], key: str, n: int | None = None) -> np.ndarray:
    """One column of window rows as float64 [n_windows] (None or absent → NaN)."""
    if not rows and n is not None:
        return np.full(n, np.nan)
    return np.array(
        [np.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64
    )


def _nvml_series(rows: list[dict], key: str, n: int) -> np.ndarray:
    """Mean over GPUs per window of an nvml_windows column [n_windows]."""
    sums, counts = np.zeros(n), np.zeros(n)
    for r in rows:
        if r.get(key) is not None and 0 <= r["window"] < n:
            sums[r["window"]] += float(r[key])
            counts[r["window"]] += 1
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _by_window(rows: list[dict], key: str, n: int) -> np.ndarray:
    """A column of rows keyed by 'window' as [n_windows] (windows without a row → NaN)."""
    out = np.full(n, np.nan)
    for r in rows:
        if r.get(key) is not None and 0 <= r["window"] < n:
            out[r["window"]] = float(r[key])
    return out


def _p99(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.quantile(x, 0.99)) if len(x) else 0.0


def window_masks(
    n: int, spike: Spike, spikes: list[Spike], guard: int
) -> tuple[np.ndarray, np.ndarray]:
    """(in spike, baseline) boolean masks [n_windows]: baseline = outside every spike ± guard windows."""
    idx = np.arange(n)
    in_spike = (idx >= spike.first_window) & (idx <= spike.last_window)
    base = np.ones(n, dtype=bool)
    for s in spikes:
        base &= ~((idx >= s.first_window - guard) & (idx <= s.last_window + guard))
    return in_spike, base


def time_masks(
    t: np.ndarray, spike: Spike, spikes: list[Spike], window_s: float, guard: int
) -> tuple[np.ndarray, np.ndarray]:
    """The same masks over step times t [n_steps] (seconds from load start)."""
    in_spike = (t >= spike.start_s) & (t < spike.end_s)
    base = np.isfinite(t)
    for s in spikes:
        base &= ~((t >= s.start_s - guard * window_s) & (t < s.end_s + guard * window_s))
    return in_spike, base


def _shares(components: dict, coverage: float, queue_cause: str | None) -> dict[str, float]:
    """Cause shares: step components scaled by coverage, the queueing rest to `queue_cause`
    (None: to the step components in proportion, or unexplained when there are none)."""
    total = sum(components.values())
    shares = {c: (coverage * v / total if total > 1e-9 else 0.0) for c, v in components.items()}
    queue = 1.0 - coverage if total > 1e-9 else 1.0
    if queue_cause is not None:
        shares[queue_cause] += queue
    elif total > 1e-9:
        for c, v in components.items():
            shares[c] += queue * v / total
    else:
        shares["unexplained"] += queue
    return shares


def attribute_spike(
    spike: Spike, spikes: list[Spike], signals: RunSignals, config: AttributeConfig | None = None
) -> Attribution:
    """Attribution of one spike (see module docstring); `spikes` = all spikes, kept out of baselines."""
    config = config or AttributeConfig()
    w = signals.window_s
    n = len(signals.windows)
    win_spike, win_base = window_masks(n, spike, spikes, config.guard_windows)
    steps = signals.steps
    st_spike, st_base = time_masks(steps["t_s"], spike, spikes, w, config.guard_windows)

    quiet = st_base & (np.nan_to_num(steps["gc_ms"]) == 0)
    if quiet.sum() < config.min_model_steps or np.nanstd(steps["decode_tokens"][quiet]) < 0.5:
        quiet = np.nan_to_num(steps["gc_ms"]) == 0  # batch never varied off-spike: use the run
    model = StepCostModel.fit(steps, quiet)
    dec = decompose_step_excess(steps, st_spike, st_base, model, config)

    # How much of the latency rise the step slowdown accounts for.
    latency = window_series(signals.windows, f"{spike.metric}_ms")
    lat_spike = mean_or_zero(latency[win_spike])
    rel_lat = (lat_spike - spike.baseline_ms) / spike.baseline_ms if spike.baseline_ms > 0 else 0.0
    stat = _p99 if spike.metric == "itl_p99" else mean_or_zero
    base_step, spike_step = stat(steps["dur_ms"][st_base]), stat(steps["dur_ms"][st_spike])
    rel_step = (spike_step - base_step) / base_step if base_step > 0 else 0.0
    coverage = float(np.clip(rel_step / rel_lat, 0.0, 1.0)) if rel_lat > 0 else 1.0
    if sum(dec.components_ms.values()) <= 1e-9:
        coverage = 0.0

    # What made the queue grow.
    def rose(series: np.ndarray, factor: float, slack: float = 0.0) -> bool:
        return mean_or_zero(series[win_spike]) > factor * mean_or_zero(series[win_base]) + slack

    out_len = window_series(signals.windows, "output_tokens_mean")
    arrivals = window_series(signals.windows, "arrivals")
    outputs = output_series(signals.request_outputs, n)
    out_rise = rose(out_len, config.output_inflation)
    arrival_rise = rose(arrivals, 1 + config.load_rise, 0.5)
    queue_cause = (
        "penalty"
        if out_rise
        else "memory"
        if dec.preemption_rise
        else "load"
        if arrival_rise or (dec.waiting_rise and sum(dec.components_ms.values()) <= 1e-9)
        else None
    )
    shares = _shares(dec.components_ms, coverage, queue_cause)

    # Evidence and confidence.
    sw = signals.step_windows
    ev = EvidenceBuilder(latency, win_spike, win_base)
    gc_ms, pen = (
        window_series(sw, "gc_ms", n),
        window_series(sw, "penalty_ms", n) + np.nan_to_num(window_series(sw, "sample_ms", n)),
    )
    comm, batch = window_series(sw, "comm_max_ms", n), window_series(sw, "batch_size", n)
    waiting, preempt = window_series(sw, "waiting", n), window_series(sw, "preemptions", n)
    history = _by_window(signals.history_windows, "history_tokens", n)
    history[history <= 0] = np.nan  # no request in flight: no ratio
    spike_pauses = pause_stats(signals.gc_pauses, win_spike, w)
    base_pauses = pause_stats(signals.gc_pauses, win_base, w)
    gen_txt = f"gen-{spike_pauses.generation} " if spike_pauses.generation is not None else ""
    rank, rank_share = straggler(steps, st_spike)
    evidence = {
        "memory": [
            ev.series("gc_overlap_ms_per_step", gc_ms, "ms", "GC pause time inside engine steps"),
            Evidence(
                "gc_pauses_per_min",
                spike_pauses.per_min,
                base_pauses.per_min,
                "1/min",
                f"{spike_pauses.count} pauses in the spike",
                None,
            ),
            Evidence(
                "gc_mean_pause_ms",
                spike_pauses.mean_ms,
                base_pauses.mean_ms,
                "ms",
                f"mean {gen_txt}pause (the generation with the most pause time)",
                None,
            ),
            ev.series(
                "preemptions_per_window",
                preempt,
                "count",
                "sequences preempted (KV blocks ran out)",
            ),
            ev.series(
                "kv_usage", window_series(sw, "kv_usage", n), "fraction", "KV blocks used / total"
            ),
            ev.series(
                "page_faults_per_step",
                window_series(sw, "page_faults", n),
                "count",
                "page faults of the stepping thread per step (allocation churn maps fresh pages)",
            ),
            ev.series(
                "nvml_mem_fraction",
                _nvml_series(signals.nvml_windows, "mem_fraction", n),
                "fraction",
                "GPU memory used / total (NVML)",
            ),
        ],
        "penalty": [
            ev.series(
                "penalty_sample_ms_per_step", pen, "ms", "penalty + sampling stage time per step"
            ),
            ev.series(
                "penalty_ms_per_1k_history",
                window_series(sw, "penalty_ms", n) / (history / 1000.0),
                "ms",
                "penalty time per 1,000 tokens of history held (rises on a slow path)",
            ),
            ev.series(
                "history_tokens",
                history,
                "tokens",
                "tokens of history held by running requests (estimated)",
            ),
            ev.series(
                "output_tokens_per_request",
                out_len,
                "tokens",
                "mean output length of finished requests",
            ),
            ev.series(
                "hit_max_tokens",
                outputs["hit_max_tokens"],
                "fraction",
                "outputs that ran to max_tokens",
            ),
            ev.series(
                "repeated_3gram_rate",
                outputs["repeated_3gram_rate"],
                "fraction",
                "repeated 3-grams in outputs (repetition loops)",
            ),
        ],
        "communication": [
            ev.series(
                "comm_wait_ms_per_step",
                comm,
                "ms",
                "longest collective (all-reduce) wait across ranks per step",
            ),
            Evidence(
                "straggler_rank",
                None if rank is None else float(rank),
                None,
                "rank",
                f"waited least in {rank_share:.0%} of the spike's steps (arrives last)"
                if rank is not None
                else "single rank",
                None,
            ),
        ],
        "load": [
            ev.series("arrivals_per_s", arrivals, "1/s", "requests sent per second", 1.0 / w),
            ev.series("batch_size", batch, "seqs", "running sequences per step"),
            ev.series("waiting", waiting, "seqs", "sequences waiting for admission"),
            Evidence(
                "forward_ms_from_batch",
                dec.load_forward_ms,
                0.0,
                "ms",
                f"forward growth the cost model predicts from the batch ({model.per_decode:.3f} ms/seq)",
                None,
            ),
        ],
        "unexplained": [
            Evidence(
                "forward_residual_ms",
                dec.forward_residual_ms,
                0.0,
                "ms",
                "forward growth not explained by batch size or GC",
                None,
            ),
            ev.series(
                "other_ms_per_step",
                window_series(sw, "other_ms", n),
                "ms",
                "step time outside every stage timer",
            ),
            ev.series(
                "nvml_sm_clock",
                _nvml_series(signals.nvml_windows, "sm_clock", n),
                "MHz",
                "GPU SM clock (a drop means throttling)",
            ),
            ev.series(
                "client_lag_p99_ms",
                _by_window(signals.client_windows, "lag_p99_ms", n),
                "ms",
                "load generator event-loop lag (a starved client delays chunks itself)",
            ),
        ],
    }
    evidence = {c: [e for e in rows if e is not None] for c, rows in evidence.items()}
    # beside the step traces: what the collectors saw from outside, per process and code region
    for cause, rows in process_evidence(signals.process, latency, win_spike, win_base, w).items():
        evidence[cause].extend(rows)
    main_signal = {
        "memory": gc_ms + np.nan_to_num(preempt),
        "penalty": out_len if out_rise else pen,
        "communication": comm,
        "load": np.nan_to_num(batch) + np.nan_to_num(waiting) + np.nan_to_num(arrivals),
    }
    conf = {c: ev.strength(s) for c, s in main_signal.items()}
    conf["unexplained"] = 1.0 - max((conf[c] for c in conf if shares[c] > 0.1), default=0.0)

    causes = [
        CauseShare(
            c,
            round(shares[c], 4),
            round(float(np.clip(conf[c], 0.0, 1.0)), 4),
            dec.components_ms[c],
            evidence[c],
        )
        for c in CAUSES
        if shares[c] > 1e-4
    ]
    causes.sort(key=lambda cs: -cs.share)
    overshoot = sum(cs.share for cs in causes) - 1.0  # rounding must never push the sum over 1
    if overshoot > 0 and causes:
        causes[0].share = round(causes[0].share - overshoot, 4)
    top = causes[0].cause if causes else "unexplained"
    if top == "memory" and spike_pauses.mean_ms and spike_pauses.mean_ms >= 1.0:
        summary = f"GC {gen_txt}pauses, {spike_pauses.mean_ms:.0f} ms on average"
    elif top == "memory" and dec.preemption_rise:
        summary = "KV cache exhausted: sequences preempted and recomputed"
    elif top == "memory" and dec.allocation_churn:
        pf = mean_or_zero(steps["page_faults"][st_spike])
        summary = (
            f"allocation churn: {pf:,.0f} page faults per step"
            if pf
            else "allocator retries per step rose"
        )
    elif top == "penalty":
        summary = (
            "outputs grew toward max_tokens (repetition loops)"
            if out_rise
            else f"penalty + sampling time per step up {dec.components_ms['penalty']:.1f} ms"
        )
    elif top == "communication":
        summary = f"collective wait per step up {dec.components_ms['communication']:.1f} ms" + (
            f", rank {rank} arrives last" if rank is not None and rank_share >= 0.6 else ""
        )
    elif top == "load":
        summary = "more requests: batch and queue grew"
    elif dec.uniform_slowdown is not None:
        summary = (
            f"every engine stage slowed alike ({dec.uniform_slowdown:.1f}x) with no batch growth: "
            "CPU contention from other processes or throttling"
        )
    else:
        summary = "no engine signal accounts for it"
    return Attribution(
        spike.spike_id,
        causes,
        top,
        coverage,
        mean_or_zero(steps["dur_ms"][st_spike]) - mean_or_zero(steps["dur_ms"][st_base]),
        dec.components_ms,
        summary,
        host_contention=dec.uniform_slowdown is not None,
    )
