"""The engine-side evidence of one spike, per cause, from the step windows and run signals.

What: the rows of rca.evidence (spike vs baseline value, Pearson r with the latency) that back
each engine cause, and each cause's main signal (its rise and r give the cause's confidence).
The signals per cause are listed in rca.evidence's docstring; the causes outside the engine get
theirs from rca.outside_causes, the collectors' per-process rows from rca.process_evidence.
Pure: numpy series over the run's windows in, Evidence out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rca.evidence import CONTEXT, FALL, Evidence, EvidenceBuilder, PauseStats, straggler
from rca.stepcost import Decomposition, StepCostModel


@dataclass
class EngineSeries:
    """The window series [n_windows] the engine causes are judged on (NaN where not measured)."""

    gc_ms: np.ndarray
    penalty_sample_ms: np.ndarray
    penalty_ms: np.ndarray
    comm_ms: np.ndarray
    batch: np.ndarray
    waiting: np.ndarray
    preemptions: np.ndarray
    kv_usage: np.ndarray
    page_faults: np.ndarray
    other_ms: np.ndarray
    history_tokens: np.ndarray
    output_tokens: np.ndarray
    arrivals: np.ndarray
    prompt_tokens: np.ndarray  # mean prompt length of the requests sent per window
    hit_max_tokens: np.ndarray
    repeated_3gram_rate: np.ndarray
    nvml_mem_fraction: np.ndarray
    nvml_sm_clock: np.ndarray


def _memory(ev: EvidenceBuilder, s: EngineSeries, spike: PauseStats, base: PauseStats) -> list:
    gen_txt = f"gen-{spike.generation} " if spike.generation is not None else ""
    return [
        ev.series("gc_overlap_ms_per_step", s.gc_ms, "ms", "GC pause time inside engine steps"),
        Evidence(
            "gc_pauses_per_min",
            spike.per_min,
            base.per_min,
            "1/min",
            f"{spike.count} pauses in the spike",
            None,
        ),
        Evidence(
            "gc_mean_pause_ms",
            spike.mean_ms,
            base.mean_ms,
            "ms",
            f"mean {gen_txt}pause (the generation with the most pause time)",
            None,
        ),
        ev.series(
            "preemptions_per_window",
            s.preemptions,
            "count",
            "sequences preempted (KV blocks ran out)",
        ),
        ev.series("kv_usage", s.kv_usage, "fraction", "KV blocks used / total"),
        ev.series(
            "page_faults_per_step",
            s.page_faults,
            "count",
            "page faults of the stepping thread per step (allocation churn maps fresh pages)",
        ),
        ev.series(
            "nvml_mem_fraction", s.nvml_mem_fraction, "fraction", "GPU memory used / total (NVML)"
        ),
    ]


def _penalty(ev: EvidenceBuilder, s: EngineSeries) -> list:
    return [
        ev.series(
            "penalty_sample_ms_per_step",
            s.penalty_sample_ms,
            "ms",
            "penalty + sampling stage time per step",
        ),
        ev.series(
            "penalty_ms_per_1k_history",
            s.penalty_ms / (s.history_tokens / 1000.0),
            "ms",
            "penalty time per 1,000 tokens of history held (rises on a slow path)",
        ),
        ev.series(
            "history_tokens",
            s.history_tokens,
            "tokens",
            "tokens of history held by running requests (estimated)",
        ),
        ev.series(
            "output_tokens_per_request",
            s.output_tokens,
            "tokens",
            "mean output length of finished requests",
        ),
        ev.series("hit_max_tokens", s.hit_max_tokens, "fraction", "outputs that ran to max_tokens"),
        ev.series(
            "repeated_3gram_rate",
            s.repeated_3gram_rate,
            "fraction",
            "repeated 3-grams in outputs (repetition loops)",
        ),
    ]


def _communication(ev: EvidenceBuilder, s: EngineSeries, rank: int | None, share: float) -> list:
    return [
        ev.series(
            "comm_wait_ms_per_step",
            s.comm_ms,
            "ms",
            "longest collective (all-reduce) wait across ranks per step",
        ),
        Evidence(
            "straggler_rank",
            None if rank is None else float(rank),
            None,
            "rank",
            f"waited least in {share:.0%} of the spike's steps (arrives last)"
            if rank is not None
            else "single rank",
            None,
            CONTEXT,
        ),
    ]


def _load(
    ev: EvidenceBuilder, s: EngineSeries, dec: Decomposition, model: StepCostModel, window_s: float
) -> list:
    return [
        ev.series("arrivals_per_s", s.arrivals, "1/s", "requests sent per second", 1.0 / window_s),
        ev.series("batch_size", s.batch, "seqs", "running sequences per step"),
        ev.series("waiting", s.waiting, "seqs", "sequences waiting for admission"),
        Evidence(
            "forward_ms_from_batch",
            dec.load_forward_ms,
            0.0,
            "ms",
            f"forward growth the cost model predicts from the batch ({model.per_decode:.3f} ms/seq)",
            None,
        ),
    ]


def _unexplained(ev: EvidenceBuilder, s: EngineSeries, dec: Decomposition) -> list:
    return [
        Evidence(
            "forward_residual_ms",
            dec.forward_residual_ms,
            0.0,
            "ms",
            "forward growth not explained by batch size or GC",
            None,
        ),
        ev.series("other_ms_per_step", s.other_ms, "ms", "step time outside every stage timer"),
        ev.series(
            "nvml_sm_clock",
            s.nvml_sm_clock,
            "MHz",
            "GPU SM clock (a drop means throttling)",
            direction=FALL,
        ),
    ]


@dataclass(frozen=True)
class EngineFacts:
    """What the evidence rows need beside the series."""

    dec: Decomposition
    model: StepCostModel
    spike_pauses: PauseStats
    base_pauses: PauseStats
    window_s: float


def engine_evidence(
    ev: EvidenceBuilder, s: EngineSeries, facts: EngineFacts, steps: dict, st_spike: np.ndarray
) -> dict[str, list[Evidence]]:
    """cause → Evidence rows of the engine causes (signals the run never reported left out)."""
    rank, rank_share = straggler(steps, st_spike)
    rows = {
        "memory": _memory(ev, s, facts.spike_pauses, facts.base_pauses),
        "penalty": _penalty(ev, s),
        "communication": _communication(ev, s, rank, rank_share),
        "load": _load(ev, s, facts.dec, facts.model, facts.window_s),
        "unexplained": _unexplained(ev, s, facts.dec),
    }
    return {c: [e for e in r if e is not None] for c, r in rows.items()}


def main_signals(s: EngineSeries, loops: bool) -> dict[str, np.ndarray]:
    """The series whose rise and r with the latency make each engine cause's confidence."""
    return {
        "memory": s.gc_ms + np.nan_to_num(s.preemptions),
        "penalty": s.repeated_3gram_rate if loops else s.penalty_sample_ms,
        "communication": s.comm_ms,
        "load": np.nan_to_num(s.batch) + np.nan_to_num(s.waiting) + np.nan_to_num(s.arrivals),
    }
