"""What the excess step time of a spike is made of, stage by stage, in ms per step.

Spike steps are compared with baseline steps. GC pauses land inside whichever stage is running,
so each step's GC overlap is first taken out of the stages that ran long in that step. A cost model
fitted on quiet steps says how much of the forward and penalty/sampling growth the batch growth
alone predicts (load); the rest of each stage goes to its cause:

  memory         GC overlap (+ forward time of recomputed prefill and the schedule time when
                 sequences were preempted; + the otherwise unexplained time when page faults or
                 CUDA allocator retries per step rose sharply: allocation churn)
  penalty        penalty_ms + sample_ms, less what the batch growth predicts
  communication  comm_ms (the longest wait across ranks when there are several)
  load           batch-predicted forward and penalty growth; schedule time when the queue grew
  unexplained    forward growth the batch does not explain, time outside every stage timer; and
                 everything when all stages slowed alike without batch growth (host contention)

Pure functions over numpy arrays [n_steps] (columns of warehouse query `step_timeline`); inputs
are never mutated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rca.arrow_columns import float_column
from rca.config import CAUSES, AttributeConfig

STAGES = ("schedule_ms", "forward_ms", "penalty_ms", "sample_ms", "comm_ms", "other_ms")
STEP_COLUMNS = (
    "t_s",
    "dur_ms",
    *STAGES,
    "gc_ms",
    "batch_size",
    "prefill_tokens",
    "decode_tokens",
    "waiting",
    "kv_usage",
    "preempted",
    "n_ranks",
    "comm_max_ms",
    "straggler_rank",
    "page_faults",
    "alloc_retries_delta",
)


def _column_arrays(rows: pa.Table | list[dict]) -> dict[str, np.ndarray]:
    """STEP_COLUMNS as float64 arrays (None or absent → NaN): from an Arrow table column by
    column (no Python object per value), from dict rows value by value (tests build those)."""
    if isinstance(rows, pa.Table):
        n = rows.num_rows
        return {
            c: float_column(rows[c]) if c in rows.column_names else np.full(n, np.nan)
            for c in STEP_COLUMNS
        }
    return {
        c: np.array([np.nan if r.get(c) is None else float(r[c]) for r in rows], dtype=np.float64)
        for c in STEP_COLUMNS
    }


def step_arrays(rows: pa.Table | list[dict]) -> dict[str, np.ndarray]:
    """Columns of warehouse query `step_timeline` (`query_table`'s Arrow table, or dict rows) as
    float64 arrays (None or absent → NaN).

    With several ranks, comm_ms becomes the step's longest collective wait across ranks (a late
    rank shows up as the others' wait, whichever rank is late) and other_ms is recomputed so the
    stages still add up to the step duration where they can. The engine's forward_ms includes
    its own all-reduces (they run inside the forward), so the row's own comm_ms is taken out of
    forward_ms first: otherwise a straggler's wait would count twice, once as forward growth.
    """
    cols = _column_arrays(rows)
    multi = np.nan_to_num(cols["n_ranks"]) > 1
    if multi.any():
        own_comm = np.nan_to_num(cols["comm_ms"])
        cols["forward_ms"] = np.where(
            multi, np.clip(cols["forward_ms"] - own_comm, 0.0, None), cols["forward_ms"]
        )
        comm = np.where(
            multi,
            np.fmax(np.nan_to_num(cols["comm_max_ms"]), np.nan_to_num(cols["comm_ms"])),
            cols["comm_ms"],
        )
        others = sum(np.nan_to_num(cols[s]) for s in STAGES if s not in ("comm_ms", "other_ms"))
        cols["other_ms"] = np.where(
            multi, np.clip(cols["dur_ms"] - others - comm, 0.0, None), cols["other_ms"]
        )
        cols["comm_ms"] = comm
    return cols


def mean_or_zero(x: np.ndarray) -> float:
    """Mean over the finite values; 0 when there are none (an absent signal did not rise)."""
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else 0.0


def _lstsq_nonneg(
    y: np.ndarray, regressors: dict[str, np.ndarray]
) -> tuple[float, dict[str, float]]:
    """Least squares y ≈ c + Σ b_i·x_i; a regressor without variance gets 0; slopes clipped at 0."""
    cols, names = [np.ones_like(y)], []
    for name, raw in regressors.items():
        x = np.nan_to_num(raw)
        if len(x) > 2 and np.std(x) > 1e-9:
            cols.append(x)
            names.append(name)
    ok = np.isfinite(y)
    if ok.sum() < len(cols) + 1:
        return mean_or_zero(y), {}
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
    def fit(steps: dict[str, np.ndarray], mask: np.ndarray) -> StepCostModel:
        """Least squares on the masked steps (pick steps without GC: pauses would inflate the fit);
        a column without variance gets coefficient 0; coefficients are clipped at 0 (more tokens
        never make a step cheaper)."""
        intercept, fwd = _lstsq_nonneg(
            steps["forward_ms"][mask],
            {
                "decode_tokens": steps["decode_tokens"][mask],
                "prefill_tokens": steps["prefill_tokens"][mask],
            },
        )
        _, pen = _lstsq_nonneg(
            np.nan_to_num(steps["penalty_ms"][mask]) + np.nan_to_num(steps["sample_ms"][mask]),
            {"batch_size": steps["batch_size"][mask]},
        )
        return StepCostModel(
            intercept,
            fwd.get("decode_tokens", 0.0),
            fwd.get("prefill_tokens", 0.0),
            pen.get("batch_size", 0.0),
        )


def remove_gc_from_stages(
    steps: dict[str, np.ndarray], in_base: np.ndarray
) -> dict[str, np.ndarray]:
    """Stage times per step with each step's GC overlap taken out of the stages it landed in.

    A pause is one stretch of time, so it sits in the stage(s) that ran long: per step, each stage's
    excess over its baseline mean is computed and the step's gc_ms is taken from the largest excess
    first, then the next (never more than a stage's excess, never below its baseline). GC time not
    placed that way stays where it is. Returns new arrays [n_steps] per stage; inputs untouched.
    """
    stage = np.stack([np.nan_to_num(steps[s]) for s in STAGES], axis=1)  # [n, S]
    base_mean = np.array([mean_or_zero(steps[s][in_base]) for s in STAGES])  # [S]
    gc_all = np.nan_to_num(steps["gc_ms"])  # [n]
    rows = np.flatnonzero(gc_all > 0)  # [k] only steps a pause overlapped give anything up
    excess = np.clip(stage[rows] - base_mean[None, :], 0.0, None)  # [k, S]
    order = np.argsort(-excess, axis=1)  # [k, S]
    sorted_excess = np.take_along_axis(excess, order, axis=1)  # [k, S]
    before = np.cumsum(sorted_excess, axis=1) - sorted_excess  # [k, S] excess filled earlier
    gc = gc_all[rows][:, None]  # [k, 1]
    taken_sorted = np.clip(gc - before, 0.0, sorted_excess)  # [k, S]
    taken = np.zeros_like(stage)  # [n, S]
    taken_rows = np.empty_like(taken_sorted)  # [k, S]
    np.put_along_axis(taken_rows, order, taken_sorted, axis=1)
    taken[rows] = taken_rows
    return {s: stage[:, i] - taken[:, i] for i, s in enumerate(STAGES)}


@dataclass
class Decomposition:
    components_ms: dict  # cause → ms per step
    stage_excess_ms: dict  # stage → raw excess ms per step (GC included)
    gc_excess_ms: float
    preemption_rise: bool
    waiting_rise: bool
    load_forward_ms: float  # forward growth the cost model predicts from batch growth
    forward_residual_ms: float
    uniform_slowdown: float | None = (
        None  # the common ratio when every stage slowed alike, else None
    )
    allocation_churn: bool = False  # page faults / allocator retries per step rose sharply


def allocation_churn(
    steps: dict[str, np.ndarray], in_spike: np.ndarray, in_base: np.ndarray
) -> bool:
    """Did page faults per step (fresh pages mapped and touched) or CUDA allocator retries rise
    sharply? Then step time that no stage model explains is the allocator's: memory."""
    faults_spike, faults_base = (
        mean_or_zero(steps["page_faults"][in_spike]),
        mean_or_zero(steps["page_faults"][in_base]),
    )
    retries_spike, retries_base = (
        mean_or_zero(steps["alloc_retries_delta"][in_spike]),
        mean_or_zero(steps["alloc_retries_delta"][in_base]),
    )
    return faults_spike > 5.0 * faults_base + 500.0 or retries_spike > retries_base + 0.1


# A stage takes part in the uniform-slowdown test when it is at least this share of a baseline step.
_UNIFORM_MIN_SHARE = 0.03
# Stage ratios (spike / baseline, GC taken out) within this factor of each other count as alike …
_UNIFORM_SPREAD = 1.35
# … and the slowdown must be at least this ratio.
_UNIFORM_MIN_RATIO = 1.15


def uniform_slowdown(
    without_gc: dict[str, np.ndarray],
    steps: dict[str, np.ndarray],
    in_spike: np.ndarray,
    in_base: np.ndarray,
    config: AttributeConfig,
) -> float | None:
    """The common slowdown ratio when every substantial stage slowed by about the same factor and
    the batch did not grow — the signature of CPU contention from other processes (or throttling),
    not of any engine cause, each of which slows one stage. None otherwise."""
    base_step = mean_or_zero(steps["dur_ms"][in_base])
    if base_step <= 0:
        return None
    batch_base = mean_or_zero(steps["batch_size"][in_base])
    if mean_or_zero(steps["batch_size"][in_spike]) > (1 + config.load_rise) * batch_base + 0.5:
        return None
    ratios = []
    for s in STAGES:
        if s in ("comm_ms", "other_ms"):
            continue  # waits and glue do not scale with CPU speed
        base = mean_or_zero(without_gc[s][in_base])
        if base >= _UNIFORM_MIN_SHARE * base_step:
            ratios.append(mean_or_zero(without_gc[s][in_spike]) / base)
    if (
        len(ratios) < 2
        or min(ratios) < _UNIFORM_MIN_RATIO
        or max(ratios) / min(ratios) > _UNIFORM_SPREAD
    ):
        return None
    return float(np.median(ratios))


def decompose_step_excess(
    steps: dict[str, np.ndarray],
    in_spike: np.ndarray,
    in_base: np.ndarray,
    model: StepCostModel,
    config: AttributeConfig,
) -> Decomposition:
    """Split the mean per-step excess (spike steps vs baseline steps) into causes, in ms per step."""

    def delta(col: str) -> float:
        return mean_or_zero(steps[col][in_spike]) - mean_or_zero(steps[col][in_base])

    stage = {s: delta(s) for s in STAGES}
    gc_excess = max(0.0, delta("gc_ms"))
    without_gc = remove_gc_from_stages(steps, in_base)
    adjusted = {
        s: mean_or_zero(without_gc[s][in_spike]) - mean_or_zero(without_gc[s][in_base])
        for s in STAGES
    }

    preempt_spike, preempt_base = (
        mean_or_zero(steps["preempted"][in_spike]),
        mean_or_zero(steps["preempted"][in_base]),
    )
    preemption_rise = (
        preempt_spike > 0 and preempt_spike > preempt_base * (1 + config.load_rise) + 1e-3
    )
    wait_spike, wait_base = (
        mean_or_zero(steps["waiting"][in_spike]),
        mean_or_zero(steps["waiting"][in_base]),
    )
    waiting_rise = wait_spike > wait_base * (1 + config.load_rise) + 0.5

    from_decode = max(0.0, model.per_decode * delta("decode_tokens"))
    from_prefill = max(0.0, model.per_prefill * delta("prefill_tokens"))
    load_fwd = from_decode + (0.0 if preemption_rise else from_prefill)
    mem_fwd = from_prefill if preemption_rise else 0.0
    fwd = max(0.0, adjusted["forward_ms"])
    if load_fwd + mem_fwd > fwd:  # the model predicts more than happened: cap at what happened
        scale = fwd / (load_fwd + mem_fwd)
        load_fwd, mem_fwd = load_fwd * scale, mem_fwd * scale
    residual = fwd - load_fwd - mem_fwd

    # Penalty/sampling time grows with the batch too: that part is load, the rest penalty.
    pen = max(0.0, adjusted["penalty_ms"]) + max(0.0, adjusted["sample_ms"])
    pen_load = min(pen, max(0.0, model.penalty_per_seq * delta("batch_size")))

    sched = max(0.0, adjusted["schedule_ms"])
    churn = allocation_churn(steps, in_spike, in_base)
    uniform = None if churn else uniform_slowdown(without_gc, steps, in_spike, in_base, config)
    if uniform is not None:  # everything slowed alike: no stage is the cause
        residual, pen, pen_load = residual + (pen - pen_load), 0.0, 0.0
    comps = {c: 0.0 for c in CAUSES}
    comps["memory"] = gc_excess + mem_fwd + (sched if preemption_rise else 0.0)
    comps["load"] = load_fwd + pen_load + (sched if waiting_rise and not preemption_rise else 0.0)
    comps["penalty"] = pen - pen_load
    comps["communication"] = max(0.0, adjusted["comm_ms"])
    comps["unexplained"] = (
        residual
        + max(0.0, adjusted["other_ms"])
        + (sched if not (preemption_rise or waiting_rise) else 0.0)
    )
    if churn:  # the allocator's page faults / retries: memory
        comps["memory"] += comps["unexplained"]
        comps["unexplained"] = 0.0
    return Decomposition(
        comps, stage, gc_excess, preemption_rise, waiting_rise, load_fwd, residual, uniform, churn
    )
