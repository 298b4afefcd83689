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

Each row says how its signal moves when it supports the cause (`direction`): most rise with it;
the GPU clock falls when it throttles; the server's own p99 (network) and the engine process's
own CPU time (host) support by *not* rising; a straggler's rank is context. A row that did not
move that way is no evidence and is not listed (`supports`): a falling share or a "0 vs 0" row
read as support on a replayed production burst's page.

Pure: window series are numpy arrays [n_windows]; masks select spike / baseline windows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rca.arrow_columns import float_column, int_column, list_column
from rca.stepcost import mean_or_zero
from rca.sweep import repeated_ngram_rate, repeated_ngram_rates

RISE, FALL, NOT_RISE, CONTEXT = "rise", "fall", "not_rise", "context"
# A signal that supports its cause by not rising may sit this far above its baseline: a p99 per
# 1-s window, or a process's CPU ms per second, wobbles by a few percent on a quiet box.
NOT_RISE_TOLERANCE = 0.1


@dataclass
class Evidence:
    signal: str
    value: float | None  # during the spike
    baseline: float | None
    unit: str
    note: str
    pearson_r: float | None  # of the signal's window series with the spike's latency series
    direction: str = (
        RISE  # how it moves when it supports its cause: RISE | FALL | NOT_RISE | CONTEXT
    )


def supports(e: Evidence) -> bool:
    """Whether `e` moved the way its cause would move it: rose, fell, or stayed within
    NOT_RISE_TOLERANCE of its baseline, per its direction. Context, and a row missing its spike
    value or its baseline, cannot be judged and are kept."""
    if e.direction == CONTEXT or e.value is None or e.baseline is None:
        return True
    if e.direction == RISE:
        return e.value > e.baseline
    if e.direction == FALL:
        return e.value < e.baseline
    return e.value <= e.baseline + NOT_RISE_TOLERANCE * abs(e.baseline)


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


def with_loop_rates(outputs: pa.Table) -> pa.Table:
    """Rows of query `request_outputs` (an Arrow table) with each output's repeated 3-gram rate
    (`repeated_3gram_rate`, null where no token ids were logged or fewer than 3) in place of its
    token ids: computed once per run for every request at once (rca.sweep.repeated_ngram_rates),
    so attributing each spike reads a number per request instead of its ids."""
    if "output_token_ids" not in outputs.column_names:
        return outputs
    values, offsets, logged = list_column(outputs["output_token_ids"])
    valid = logged & (np.diff(offsets) >= 3)
    rates = repeated_ngram_rates(values, offsets)
    column = pa.Array.from_buffers(
        pa.float64(),
        len(rates),
        [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(rates)],
    )
    return outputs.drop_columns(["output_token_ids"]).append_column("repeated_3gram_rate", column)


def _output_columns(request_outputs: list[dict] | pa.Table) -> dict[str, np.ndarray]:
    """window, hit (1/0 per output that counts toward the max_tokens share, NaN otherwise) and
    rate (repeated 3-gram rate, NaN where unknown) per request, in row order."""
    if isinstance(request_outputs, pa.Table):
        t = request_outputs
        if "output_token_ids" in t.column_names:
            t = with_loop_rates(t)
        out_tok = float_column(t["output_tokens"])
        max_tok = float_column(t["max_tokens"])
        length = np.array([f == "length" for f in t["finish_reason"].to_pylist()], dtype=bool)
        rate = (
            float_column(t["repeated_3gram_rate"])
            if "repeated_3gram_rate" in t.column_names
            else np.full(t.num_rows, np.nan)
        )
        window = int_column(t["window"])
    else:
        rows = request_outputs
        window = np.array([r["window"] for r in rows], dtype=np.int64)
        out_tok = np.array(
            [np.nan if r.get("output_tokens") is None else r["output_tokens"] for r in rows],
            dtype=np.float64,
        )
        max_tok = np.array(
            [np.nan if r.get("max_tokens") is None else r["max_tokens"] for r in rows],
            dtype=np.float64,
        )
        length = np.array([r.get("finish_reason") == "length" for r in rows], dtype=bool)
        rate = np.array([_row_rate(r) for r in rows], dtype=np.float64)
    counted = np.isfinite(max_tok) & (max_tok != 0) & np.isfinite(out_tok)
    hit = np.where(counted, ((out_tok >= max_tok) | length).astype(np.float64), np.nan)
    return {"window": window, "hit": hit, "rate": rate}


def _row_rate(row: dict) -> float:
    if row.get("repeated_3gram_rate") is not None:
        return float(row["repeated_3gram_rate"])
    ids = row.get("output_token_ids")
    return repeated_ngram_rate(list(ids)) if ids is not None and len(ids) >= 3 else np.nan


def _window_means(window: np.ndarray, values: np.ndarray, n_windows: int) -> np.ndarray:
    """Mean of the finite values per window [n_windows] (NaN where none): np.mean over each
    window's values in row order, the very sums the per-window lists used to give."""
    keep = np.isfinite(values) & (window >= 0) & (window < n_windows)
    w, v = window[keep], values[keep]
    order = np.argsort(w, kind="stable")
    w, v = w[order], v[order]
    out = np.full(n_windows, np.nan)
    bounds = np.flatnonzero(np.diff(w)) + 1
    for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(w)]))):
        if hi > lo:
            out[w[lo]] = float(np.mean(v[lo:hi]))
    return out


def output_series(request_outputs: list[dict] | pa.Table, n_windows: int) -> dict[str, np.ndarray]:
    """Per window of completion: share of outputs that hit max_tokens, mean repeated 3-gram rate
    (NaN where no request finished, or no token ids were logged). `request_outputs`: query
    `request_outputs` as dict rows, or as an Arrow table (`with_loop_rates` of it: the analysis
    reads it so); numpy per column, a Python step per window only."""
    cols = _output_columns(request_outputs)
    return {
        "hit_max_tokens": _window_means(cols["window"], cols["hit"], n_windows),
        "repeated_3gram_rate": _window_means(cols["window"], cols["rate"], n_windows),
    }


class EvidenceBuilder:
    """Builds Evidence rows for one spike: spike vs baseline means of window series, with r."""

    def __init__(self, latency: np.ndarray, in_spike: np.ndarray, in_base: np.ndarray):
        self.latency, self.in_spike, self.in_base = latency, in_spike, in_base

    def series(
        self,
        signal: str,
        values: np.ndarray,
        unit: str,
        note: str,
        scale: float = 1.0,
        direction: str = RISE,
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
            direction,
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
