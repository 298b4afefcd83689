"""The evidence behind an attribution: each signal's value during the spike vs its baseline, its
Pearson r with the latency series across the run's windows, and how strongly it points at a cause.

Signals per cause (docs/design.md's table):
  memory         GC overlap per step, GC pauses per minute and mean pause (dominant generation),
                 preemptions, KV occupancy, NVML memory use (where a GPU reported it)
  penalty        penalty + sampling ms per step, penalty ms per 1k tokens of history held (and the
                 history itself), output length per request, share of outputs that ran to
                 max_tokens, repeated 3-gram rate of outputs (needs engine output token ids)
  communication  collective wait per step (longest across ranks), the straggler rank
  load           arrivals per second, batch size, waiting sequences, batch-predicted forward growth
  client         load generator lag and read delay, merged first tokens (rca.outside_causes)
  network        client − server p99 and the server's own p99 (rca.outside_causes)
  host           an engine process's run-queue wait, involuntary switches, own CPU time
  unexplained    forward residual, time outside stage timers, GPU SM clock (throttling)

Pure: window series are numpy arrays [n_windows]; masks select spike / baseline windows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from rca.stepcost import mean_or_zero
from rca.sweep import repeated_ngram_rate


@dataclass
class Evidence:
    signal: str
    value: float | None  # during the spike
    baseline: float | None
    unit: str
    note: str
    pearson_r: float | None  # of the signal's window series with the spike's latency series


def pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson r over positions where both are finite; None with < 3 points or a constant series."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return None
    x, y = a[ok], b[ok]
    # constant up to float rounding (means of equal values): no correlation to speak of
    if np.std(x) <= 1e-9 * (abs(np.mean(x)) + 1) or np.std(y) <= 1e-9 * (abs(np.mean(y)) + 1):
        return None
    return float(np.corrcoef(x, y)[0, 1])


def strength(
    signal: np.ndarray, in_spike: np.ndarray, in_base: np.ndarray, r: float | None
) -> float:
    """0..1: half the signal's rise in baseline standard deviations (z/5, capped), half max(r, 0)."""
    spike_v, base = signal[in_spike], signal[in_base]
    spike_v, base = spike_v[np.isfinite(spike_v)], base[np.isfinite(base)]
    if len(spike_v) == 0 or len(base) == 0:
        return 0.0
    # floor the noise at 5 % of the level: a signal flat to rounding must not get an infinite z
    noise = max(float(np.std(base)), 0.05 * abs(float(np.mean(base))), 1e-3)
    z = (float(np.mean(spike_v)) - float(np.mean(base))) / noise
    return 0.5 * float(np.clip(z / 5.0, 0.0, 1.0)) + 0.5 * max(0.0, r or 0.0)


@dataclass
class PauseStats:
    count: int
    per_min: float | None
    mean_ms: float | None  # of the dominant generation's pauses
    generation: int | None  # the generation with the largest total pause time


def pause_stats(pauses: list[dict], windows_mask: np.ndarray, window_s: float) -> PauseStats:
    """GC pauses whose start falls in the masked windows."""
    idx = [int(p["t_s"] // window_s) for p in pauses]
    inside = [p for p, i in zip(pauses, idx) if 0 <= i < len(windows_mask) and windows_mask[i]]
    minutes = windows_mask.sum() * window_s / 60.0
    if not inside:
        return PauseStats(0, 0.0 if minutes else None, None, None)
    by_gen: Counter = Counter()
    for p in inside:
        by_gen[p.get("generation")] += p["duration_ms"]
    gen = by_gen.most_common(1)[0][0]
    mean = float(np.mean([p["duration_ms"] for p in inside if p.get("generation") == gen]))
    return PauseStats(len(inside), len(inside) / minutes if minutes else None, mean, gen)


def output_series(request_outputs: list[dict], n_windows: int) -> dict[str, np.ndarray]:
    """Per window of completion: share of outputs that hit max_tokens, mean repeated 3-gram rate
    (NaN where no request finished, or no token ids were logged)."""
    hit: list[list[float]] = [[] for _ in range(n_windows)]
    rep: list[list[float]] = [[] for _ in range(n_windows)]
    for r in request_outputs:
        w = r["window"]
        if not 0 <= w < n_windows:
            continue
        if r.get("max_tokens") and r.get("output_tokens") is not None:
            hit[w].append(
                float(r["output_tokens"] >= r["max_tokens"] or r.get("finish_reason") == "length")
            )
        ids = r.get("output_token_ids")
        if ids is not None and len(ids) >= 3:
            rep[w].append(repeated_ngram_rate(list(ids)))

    def mean(xs):
        return float(np.mean(xs)) if xs else np.nan

    return {
        "hit_max_tokens": np.array([mean(x) for x in hit]),
        "repeated_3gram_rate": np.array([mean(x) for x in rep]),
    }


class EvidenceBuilder:
    """Builds Evidence rows for one spike: spike vs baseline means of window series, with r."""

    def __init__(self, latency: np.ndarray, in_spike: np.ndarray, in_base: np.ndarray):
        self.latency, self.in_spike, self.in_base = latency, in_spike, in_base

    def series(
        self, signal: str, values: np.ndarray, unit: str, note: str, scale: float = 1.0
    ) -> Evidence | None:
        """Evidence from a window series; None when the run never reported the signal."""
        if not np.isfinite(values).any():
            return None
        s, b = values[self.in_spike], values[self.in_base]
        return Evidence(
            signal,
            mean_or_zero(s) * scale if np.isfinite(s).any() else None,
            mean_or_zero(b) * scale if np.isfinite(b).any() else None,
            unit,
            note,
            pearson(values, self.latency),
        )

    def strength(self, values: np.ndarray) -> float:
        return strength(values, self.in_spike, self.in_base, pearson(values, self.latency))


def straggler(steps: dict[str, np.ndarray], in_spike: np.ndarray) -> tuple[int | None, float]:
    """The rank that waited least in most spike steps (it arrives last), and in what share of them."""
    ranks = steps["straggler_rank"][in_spike]
    ranks = ranks[np.isfinite(ranks)]
    if not len(ranks):
        return None, 0.0
    rank, count = Counter(ranks.astype(int).tolist()).most_common(1)[0]
    return rank, count / len(ranks)
