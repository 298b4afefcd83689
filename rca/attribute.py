"""Attribute a spike to causes by decomposing the excess step time, backed by evidence.

For one spike, steps inside it are compared with baseline steps (outside every spike, with guard
windows on each side). The mean per-step excess of each stage is split into causes:

  memory         GC pause time overlapping steps (+ forward time of recomputed prefill and the
                 schedule time when sequences were preempted)
  penalty        penalty_ms + sample_ms, less what the batch growth predicts
  communication  comm_ms
  load           forward (and penalty/sampling) growth that a cost model fitted on quiet steps
                 predicts from the batch growth; schedule time when the queue grew
  unexplained    the rest (forward growth the batch does not explain, time outside every stage)

A GC pause lands inside whichever stage is running, so each step's GC overlap is first taken out
of the stages that ran long in that step (largest excess first) before stages are attributed.

The step excess explains the latency excess only in part for TTFT/E2E (queueing): `coverage` =
step slowdown / latency rise (P99 of steps for ITL P99, mean step for TTFT/E2E, which accumulate
many steps). The uncovered part is queueing, blamed on what made the queue grow: inflated outputs
(penalty), preemptions (memory), arrivals (load); else the step causes in proportion.

Shares sum to 1 over causes (≤ 1 after rounding). Confidence of a cause = half how far its main
signal rose above baseline noise (z/5, capped at 1) + half its Pearson r with the latency series.
Pure: inputs are not mutated; numpy only, no DB access.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rca.config import CAUSES, AttributeConfig
from rca.detect import Spike

STAGES = ("schedule_ms", "forward_ms", "penalty_ms", "sample_ms", "comm_ms", "other_ms")
STEP_COLUMNS = ("t_s", "dur_ms", *STAGES, "gc_ms", "batch_size", "prefill_tokens", "decode_tokens",
                "waiting", "kv_usage", "preempted")


@dataclass
class Evidence:
    signal: str
    value: float | None       # during the spike
    baseline: float | None
    unit: str
    note: str
    pearson_r: float | None   # of the signal's window series with the spike's latency series


@dataclass
class CauseShare:
    cause: str
    share: float
    confidence: float
    excess_ms: float          # excess step time per step this cause explains (0 for queueing-only)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class Attribution:
    spike_id: int
    causes: list[CauseShare]  # largest share first; causes with share 0 left out
    top_cause: str
    coverage: float           # fraction of the latency rise the step slowdown accounts for
    step_excess_ms: float     # mean step duration, spike − baseline
    components_ms: dict       # cause → excess ms per step (before normalising)
    summary: str              # e.g. "GC gen-2 pauses, 187 ms on average"


def step_arrays(rows: list[dict]) -> dict[str, np.ndarray]:
    """Columns of warehouse query `step_timeline` as float64 arrays (None → NaN)."""
    return {c: np.array([np.nan if r.get(c) is None else float(r[c]) for r in rows], dtype=np.float64)
            for c in STEP_COLUMNS}


def window_series(rows: list[dict], key: str) -> np.ndarray:
    """One column of window rows as float64 [n_windows] (None → NaN)."""
    return np.array([np.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64)


def _mean(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else 0.0


def _p99(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(np.quantile(x, 0.99)) if len(x) else 0.0


def pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson r over positions where both are finite; None with < 3 points or a constant series."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return None
    x, y = a[ok], b[ok]
    if np.std(x) == 0 or np.std(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _lstsq_nonneg(y: np.ndarray, regressors: dict[str, np.ndarray]) -> tuple[float, dict[str, float]]:
    """Least squares y ≈ c + Σ b_i·x_i; a regressor without variance gets 0; slopes clipped at 0."""
    cols, names = [np.ones_like(y)], []
    for name, x in regressors.items():
        x = np.nan_to_num(x)
        if len(x) > 2 and np.std(x) > 1e-9:
            cols.append(x)
            names.append(name)
    ok = np.isfinite(y)
    if ok.sum() < len(cols) + 1:
        return _mean(y), {}
    coef, *_ = np.linalg.lstsq(np.stack(cols, axis=1)[ok], y[ok], rcond=None)
    return float(coef[0]), {n: max(0.0, float(c)) for n, c in zip(names, coef[1:])}


@dataclass(frozen=True)
class StepCostModel:
    """What a step costs when nothing is wrong, from the batch alone (ms):
    forward ≈ intercept + per_decode·decode_tokens + per_prefill·prefill_tokens;
    penalty + sample ≈ c + penalty_per_seq·batch_size (the penalty/sampling kernels touch every row).
    """
    intercept: float
    per_decode: float
    per_prefill: float
    penalty_per_seq: float = 0.0

    @staticmethod
    def fit(steps: dict[str, np.ndarray], mask: np.ndarray) -> "StepCostModel":
        """Least squares on the masked steps (pick steps without GC: pauses would inflate the fit);
        a column without variance gets coefficient 0; coefficients are clipped at 0 (more tokens
        never make a step cheaper)."""
        intercept, fwd = _lstsq_nonneg(steps["forward_ms"][mask], {
            "decode_tokens": steps["decode_tokens"][mask], "prefill_tokens": steps["prefill_tokens"][mask]})
        _, pen = _lstsq_nonneg(np.nan_to_num(steps["penalty_ms"][mask]) + np.nan_to_num(steps["sample_ms"][mask]),
                               {"batch_size": steps["batch_size"][mask]})
        return StepCostModel(intercept, fwd.get("decode_tokens", 0.0), fwd.get("prefill_tokens", 0.0),
                             pen.get("batch_size", 0.0))


def remove_gc_from_stages(steps: dict[str, np.ndarray], in_base: np.ndarray) -> dict[str, np.ndarray]:
    """Stage times per step with each step's GC overlap taken out of the stages it landed in.

    A pause is one stretch of time, so it sits in the stage(s) that ran long: per step, each stage's
    excess over its baseline mean is computed and the step's gc_ms is taken from the largest excess
    first, then the next (never more than a stage's excess, never below its baseline). GC time not
    placed that way stays where it is. Returns new arrays [n_steps] per stage; inputs untouched.
    """
    stage = np.stack([np.nan_to_num(steps[s]) for s in STAGES], axis=1)          # [n, S]
    base_mean = np.array([_mean(steps[s][in_base]) for s in STAGES])             # [S]
    excess = np.clip(stage - base_mean[None, :], 0.0, None)                      # [n, S]
    order = np.argsort(-excess, axis=1)
    sorted_excess = np.take_along_axis(excess, order, axis=1)
    before = np.cumsum(sorted_excess, axis=1) - sorted_excess                    # excess filled earlier
    gc = np.nan_to_num(steps["gc_ms"])[:, None]
    taken_sorted = np.clip(gc - before, 0.0, sorted_excess)
    taken = np.empty_like(taken_sorted)
    np.put_along_axis(taken, order, taken_sorted, axis=1)
    return {s: stage[:, i] - taken[:, i] for i, s in enumerate(STAGES)}


@dataclass
class Decomposition:
    components_ms: dict            # cause → ms per step
    stage_excess_ms: dict          # stage → raw excess ms per step (GC included)
    gc_excess_ms: float
    preemption_rise: bool
    waiting_rise: bool
    load_forward_ms: float         # forward growth the cost model predicts from batch growth
    forward_residual_ms: float


def decompose_step_excess(steps: dict[str, np.ndarray], in_spike: np.ndarray, in_base: np.ndarray,
                          model: StepCostModel, config: AttributeConfig) -> Decomposition:
    """Split the mean per-step excess (spike steps vs baseline steps) into causes, in ms per step."""
    def delta(col: str) -> float:
        return _mean(steps[col][in_spike]) - _mean(steps[col][in_base])

    stage = {s: delta(s) for s in STAGES}
    gc_excess = max(0.0, delta("gc_ms"))
    without_gc = remove_gc_from_stages(steps, in_base)
    adjusted = {s: _mean(without_gc[s][in_spike]) - _mean(without_gc[s][in_base]) for s in STAGES}

    preempt_spike, preempt_base = _mean(steps["preempted"][in_spike]), _mean(steps["preempted"][in_base])
    preemption_rise = preempt_spike > 0 and preempt_spike > preempt_base * (1 + config.load_rise) + 1e-3
    wait_spike, wait_base = _mean(steps["waiting"][in_spike]), _mean(steps["waiting"][in_base])
    waiting_rise = wait_spike > wait_base * (1 + config.load_rise) + 0.5

    from_decode = max(0.0, model.per_decode * delta("decode_tokens"))
    from_prefill = max(0.0, model.per_prefill * delta("prefill_tokens"))
    load_fwd = from_decode + (0.0 if preemption_rise else from_prefill)
    mem_fwd = from_prefill if preemption_rise else 0.0
    fwd = max(0.0, adjusted["forward_ms"])
    if load_fwd + mem_fwd > fwd:      # the model predicts more than happened: cap at what happened
        scale = fwd / (load_fwd + mem_fwd)
        load_fwd, mem_fwd = load_fwd * scale, mem_fwd * scale
    residual = fwd - load_fwd - mem_fwd

    # Penalty/sampling time grows with the batch too: that part is load, the rest penalty.
    pen = max(0.0, adjusted["penalty_ms"]) + max(0.0, adjusted["sample_ms"])
    pen_load = min(pen, max(0.0, model.penalty_per_seq * delta("batch_size")))

    sched = max(0.0, adjusted["schedule_ms"])
    comps = {c: 0.0 for c in CAUSES}
    comps["memory"] = gc_excess + mem_fwd + (sched if preemption_rise else 0.0)
    comps["load"] = load_fwd + pen_load + (sched if waiting_rise and not preemption_rise else 0.0)
    comps["penalty"] = pen - pen_load
    comps["communication"] = max(0.0, adjusted["comm_ms"])
    comps["unexplained"] = (residual + max(0.0, adjusted["other_ms"])
                            + (sched if not (preemption_rise or waiting_rise) else 0.0))
    return Decomposition(comps, stage, gc_excess, preemption_rise, waiting_rise, load_fwd, residual)


@dataclass
class RunSignals:
    """Everything attribution reads about one run (rows of warehouse queries)."""
    window_s: float
    windows: list[dict]             # query `windows`
    step_windows: list[dict]        # query `step_stages`
    steps: dict[str, np.ndarray]    # step_arrays(query `step_timeline`)
    gc_pauses: list[dict]           # query `gc_pauses`


def _window_masks(n: int, spike: Spike, spikes: list[Spike], guard: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(n)
    in_spike = (idx >= spike.first_window) & (idx <= spike.last_window)
    base = np.ones(n, dtype=bool)
    for s in spikes:
        base &= ~((idx >= s.first_window - guard) & (idx <= s.last_window + guard))
    return in_spike, base


def _time_masks(t: np.ndarray, spike: Spike, spikes: list[Spike], window_s: float, guard: int
                ) -> tuple[np.ndarray, np.ndarray]:
    in_spike = (t >= spike.start_s) & (t < spike.end_s)
    base = np.isfinite(t)
    for s in spikes:
        base &= ~((t >= s.start_s - guard * window_s) & (t < s.end_s + guard * window_s))
    return in_spike, base


def _strength(signal: np.ndarray, in_spike: np.ndarray, in_base: np.ndarray, r: float | None) -> float:
    """0..1: half the signal's rise in baseline standard deviations (z/5, capped), half max(r, 0)."""
    spike_v, base = signal[in_spike], signal[in_base]
    spike_v, base = spike_v[np.isfinite(spike_v)], base[np.isfinite(base)]
    if len(spike_v) == 0 or len(base) == 0:
        return 0.0
    noise = max(float(np.std(base)), 1e-6 * max(1.0, abs(float(np.mean(base)))))
    z = (float(np.mean(spike_v)) - float(np.mean(base))) / noise
    return 0.5 * float(np.clip(z / 5.0, 0.0, 1.0)) + 0.5 * max(0.0, r or 0.0)


def _pauses_stats(pauses: list[dict], lo: float, hi: float) -> tuple[int, float, int | None]:
    """(count, mean ms of the dominant generation, dominant generation by total pause time) of the
    pauses starting in [lo, hi)."""
    inside = [p for p in pauses if lo <= p["t_s"] < hi]
    if not inside:
        return 0, 0.0, None
    by_gen: dict = {}
    for p in inside:
        by_gen[p.get("generation")] = by_gen.get(p.get("generation"), 0.0) + p["duration_ms"]
    gen = max(by_gen, key=by_gen.get)
    return len(inside), float(np.mean([p["duration_ms"] for p in inside if p.get("generation") == gen])), gen


def _baseline_pause_stats(pauses: list[dict], spikes: list[Spike], window_s: float, guard: int,
                          duration_s: float) -> tuple[float, float]:
    """(pauses per minute, mean ms) outside every spike (with guards)."""
    def outside(t: float) -> bool:
        return all(not (s.start_s - guard * window_s <= t < s.end_s + guard * window_s) for s in spikes)
    base = [p for p in pauses if outside(p["t_s"])]
    excluded = sum(min(duration_s, s.end_s + guard * window_s) - max(0.0, s.start_s - guard * window_s)
                   for s in spikes)
    minutes = max(duration_s - excluded, window_s) / 60.0
    return len(base) / minutes, (float(np.mean([p["duration_ms"] for p in base])) if base else 0.0)


def attribute_spike(spike: Spike, spikes: list[Spike], signals: RunSignals,
                    config: AttributeConfig | None = None) -> Attribution:
    """Attribution of one spike (see module docstring); `spikes` = all spikes, kept out of baselines."""
    config = config or AttributeConfig()
    w = signals.window_s
    n = len(signals.windows)
    win_spike, win_base = _window_masks(n, spike, spikes, config.guard_windows)
    steps = signals.steps
    st_spike, st_base = _time_masks(steps["t_s"], spike, spikes, w, config.guard_windows)

    quiet = st_base & (np.nan_to_num(steps["gc_ms"]) == 0)
    if quiet.sum() < config.min_model_steps or np.nanstd(steps["decode_tokens"][quiet]) < 0.5:
        quiet = np.nan_to_num(steps["gc_ms"]) == 0      # batch never varied off-spike: use the run
    model = StepCostModel.fit(steps, quiet)
    dec = decompose_step_excess(steps, st_spike, st_base, model, config)

    # Latency series of the primary metric, and how much of its rise the steps account for.
    latency = window_series(signals.windows, f"{spike.metric}_ms")
    lat_spike, lat_base = _mean(latency[win_spike]), spike.baseline_ms
    rel_lat = (lat_spike - lat_base) / lat_base if lat_base > 0 else 0.0
    if spike.metric == "itl_p99":
        base_step, spike_step = _p99(steps["dur_ms"][st_base]), _p99(steps["dur_ms"][st_spike])
    else:
        base_step, spike_step = _mean(steps["dur_ms"][st_base]), _mean(steps["dur_ms"][st_spike])
    rel_step = (spike_step - base_step) / base_step if base_step > 0 else 0.0
    coverage = float(np.clip(rel_step / rel_lat, 0.0, 1.0)) if rel_lat > 0 else 1.0
    step_total = sum(dec.components_ms.values())
    if step_total <= 1e-9:
        coverage = 0.0

    # Queueing: the part of the latency rise the step slowdown does not cover.
    sw = signals.step_windows
    out_len = window_series(signals.windows, "output_tokens_mean")
    arrivals = window_series(signals.windows, "arrivals")
    out_rise = _mean(out_len[win_spike]) > config.output_inflation * max(_mean(out_len[win_base]), 1e-9)
    arrival_rise = _mean(arrivals[win_spike]) > (1 + config.load_rise) * _mean(arrivals[win_base]) + 0.5
    shares = {c: 0.0 for c in CAUSES}
    if step_total > 1e-9:
        for c, v in dec.components_ms.items():
            shares[c] += coverage * v / step_total
    queue = 1.0 - coverage
    if queue > 0:
        if out_rise:
            shares["penalty"] += queue
        elif dec.preemption_rise:
            shares["memory"] += queue
        elif arrival_rise or (dec.waiting_rise and step_total <= 1e-9):
            shares["load"] += queue
        elif step_total > 1e-9:
            for c, v in dec.components_ms.items():
                shares[c] += queue * v / step_total
        else:
            shares["unexplained"] += queue

    # Evidence per cause: window series for r, spike vs baseline values.
    def ws(key: str) -> np.ndarray:
        return window_series(sw, key) if sw else np.full(n, np.nan)

    def ev(signal: str, series: np.ndarray, unit: str, note: str, scale: float = 1.0) -> Evidence:
        v_s, v_b = series[win_spike], series[win_base]
        return Evidence(signal, _mean(v_s) * scale if np.isfinite(v_s).any() else None,
                        _mean(v_b) * scale if np.isfinite(v_b).any() else None, unit, note,
                        pearson(series, latency))

    gc_ms = ws("gc_ms")
    pen = ws("penalty_ms") + np.nan_to_num(ws("sample_ms"))
    comm = ws("comm_ms")
    batch = ws("batch_size")
    waiting = ws("waiting")
    preempt = ws("preemptions")
    duration_s = n * w
    count, mean_pause, gen = _pauses_stats(signals.gc_pauses, spike.start_s, spike.end_s)
    base_rate, base_mean_pause = _baseline_pause_stats(signals.gc_pauses, spikes, w, config.guard_windows,
                                                       duration_s)
    spike_minutes = (spike.end_s - spike.start_s) / 60.0
    gen_txt = f"gen-{gen} " if gen is not None else ""
    evidence = {
        "memory": [
            ev("gc_overlap_ms_per_step", gc_ms, "ms", "GC pause time inside engine steps"),
            Evidence("gc_pauses_per_min", count / spike_minutes if spike_minutes > 0 else None, base_rate,
                     "1/min", f"{count} pauses in the spike", None),
            Evidence("gc_mean_pause_ms", mean_pause if count else None, base_mean_pause or None, "ms",
                     f"mean of the {gen_txt}pauses (the largest total)".replace("the  ", "the "), None),
            ev("preemptions_per_window", preempt, "count", "sequences preempted (KV blocks ran out)"),
            ev("kv_usage", ws("kv_usage"), "fraction", "KV blocks used / total"),
        ],
        "penalty": [
            ev("penalty_sample_ms_per_step", pen, "ms", "penalty + sampling stage time per step"),
            ev("output_tokens_per_request", out_len, "tokens", "mean output length of finished requests"),
        ],
        "communication": [ev("comm_ms_per_step", comm, "ms", "collective (all-reduce) time per step")],
        "load": [
            ev("arrivals_per_s", arrivals, "1/s", "requests sent per second", 1.0 / w),
            ev("batch_size", batch, "seqs", "running sequences per step"),
            ev("waiting", waiting, "seqs", "sequences waiting for admission"),
            Evidence("forward_ms_from_batch", dec.load_forward_ms, 0.0, "ms",
                     f"forward growth predicted by the cost model ({model.per_decode:.3f} ms/seq)", None),
        ],
        "unexplained": [
            Evidence("forward_residual_ms", dec.forward_residual_ms, 0.0, "ms",
                     "forward growth not explained by batch size or GC", None),
            ev("other_ms_per_step", ws("other_ms"), "ms", "step time outside every stage timer"),
        ],
    }
    main_signal = {"memory": gc_ms + np.nan_to_num(preempt), "penalty": pen, "communication": comm,
                   "load": np.nan_to_num(batch) + np.nan_to_num(waiting) + np.nan_to_num(arrivals)}
    if out_rise:
        main_signal["penalty"] = out_len
    conf = {c: _strength(s, win_spike, win_base, pearson(s, latency)) for c, s in main_signal.items()}
    explained_conf = max((conf[c] for c in conf if shares[c] > 0.1), default=0.0)
    conf["unexplained"] = 1.0 - explained_conf

    causes = [CauseShare(c, round(shares[c], 4), round(float(np.clip(conf[c], 0.0, 1.0)), 4),
                         dec.components_ms[c], evidence[c])
              for c in CAUSES if shares[c] > 1e-4]
    causes.sort(key=lambda cs: -cs.share)
    # Rounding must never push the sum over 1.
    overshoot = sum(cs.share for cs in causes) - 1.0
    if overshoot > 0 and causes:
        causes[0].share = round(causes[0].share - overshoot, 4)
    top = causes[0].cause if causes else "unexplained"
    if top == "memory" and count and mean_pause >= 1.0:
        summary = f"GC {gen_txt}pauses, {mean_pause:.0f} ms on average"
    elif top == "memory" and dec.preemption_rise:
        summary = "KV cache exhausted: sequences preempted and recomputed"
    elif top == "penalty":
        summary = ("outputs grew to max length (repetition)" if out_rise
                   else f"penalty + sampling time per step up {dec.components_ms['penalty']:.1f} ms")
    elif top == "communication":
        summary = f"collective wait per step up {dec.components_ms['communication']:.1f} ms"
    elif top == "load":
        summary = "more requests: batch and queue grew"
    else:
        summary = "no engine signal accounts for it"
    return Attribution(spike.spike_id, causes, top, coverage, _mean(steps["dur_ms"][st_spike])
                       - _mean(steps["dur_ms"][st_base]), dec.components_ms, summary)
