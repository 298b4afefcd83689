"""What an analysis finds beyond the spikes themselves, stored with the run so that pages only read.

Two findings, both computed by rca.analyze from the rows the analysis read and stored beside its
spikes (tables `spike_comparison` and `fault_verdicts`, warehouse/schema.sql):

- the comparison: each signal's mean outside every reported spike (with a 2-window guard) against
  its mean inside any reported spike — the "normal vs spike" table of the incident page;
- the fault verdicts: each injected fault (ground truth) matched one-to-one to a reported spike
  exactly as rca.evaluate scores runs (the fault widened by `tolerance_windows`), with that
  spike's top cause. Only scoring and these verdicts read the ground truth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rca.evaluate import match_events

GUARD_WINDOWS = 2  # windows either side of a spike that count neither as spike nor as normal
TOLERANCE_WINDOWS = 2  # how far a spike may miss its fault and still be matched (rca.evaluate)


class SpanLike(Protocol):
    """A reported spike as the findings read it."""

    spike_id: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class ComparisonRow:
    """A signal's mean outside every spike and inside any spike (None: no sample)."""

    signal: str
    unit: str
    normal: float | None
    spike: float | None


@dataclass(frozen=True)
class FaultVerdict:
    """An injected fault and the reported spike matched to it, if any."""

    kind: str
    cause: str
    start_s: float
    end_s: float  # the start when the fault has no end
    params: Any
    spike_id: int | None  # the matched spike; None: missed
    attributed_cause: str | None  # that spike's top cause


def _real(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _masks(n: int, spikes: Sequence[SpanLike], window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Windows inside any spike, and windows outside every spike ± GUARD_WINDOWS windows."""
    t = np.arange(n) * window_s
    in_spike, normal = np.zeros(n, dtype=bool), np.isfinite(t)
    for s in spikes:
        in_spike |= (t >= s.start_s) & (t < s.end_s)
        guard = GUARD_WINDOWS * window_s
        normal &= ~((t >= s.start_s - guard) & (t < s.end_s + guard))
    return in_spike, normal


def _col(rows: list[dict], key: str) -> np.ndarray:
    return np.array(
        [np.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64
    )


def _nanmean(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else None


def _gc_rows(
    pauses: list[dict], in_spike: np.ndarray, normal: np.ndarray, window_s: float
) -> list[ComparisonRow]:
    """GC pauses per minute and the mean pause, normal vs spike, from the pause list itself."""
    n = len(in_spike)
    t = np.array([p["t_s"] for p in pauses], dtype=np.float64)
    d = np.array([p["duration_ms"] for p in pauses], dtype=np.float64)
    w_idx = np.floor(t / window_s).astype(int) if len(t) else np.array([], dtype=int)
    ok = (w_idx >= 0) & (w_idx < n)
    p_spike, p_norm = ok.copy(), ok.copy()
    p_spike[ok] = in_spike[w_idx[ok]]
    p_norm[ok] = normal[w_idx[ok]]
    minutes_norm, minutes_spike = normal.sum() * window_s / 60, in_spike.sum() * window_s / 60
    return [
        ComparisonRow(
            "GC pauses per minute",
            "1/min",
            _real(p_norm.sum() / minutes_norm if minutes_norm else None),
            _real(p_spike.sum() / minutes_spike if minutes_spike else None),
        ),
        ComparisonRow(
            "mean GC pause",
            "ms",
            _real(float(d[p_norm].mean()) if p_norm.any() else None),
            _real(float(d[p_spike].mean()) if p_spike.any() else None),
        ),
    ]


# (signal, unit, step_stages column(s) summed, scale): the engine's own signals, per step window
_STEP_SIGNALS: tuple[tuple[str, str, tuple[str, ...], float | None], ...] = (
    ("GC time inside steps", "ms/step", ("gc_ms",), 1.0),
    ("step duration (mean)", "ms", ("step_mean_ms",), 1.0),
    ("forward", "ms/step", ("forward_ms",), 1.0),
    ("penalty + sampling", "ms/step", ("penalty_ms", "sample_ms"), 1.0),
    ("collective wait (longest rank)", "ms/step", ("comm_max_ms",), 1.0),
    ("KV occupancy", "%", ("kv_usage",), 100.0),
    ("preemptions", "1/s", ("preemptions",), None),  # None: per window → per second
    ("batch size", "seqs", ("batch_size",), 1.0),
    ("waiting", "seqs", ("waiting",), 1.0),
)


def comparison(
    windows: list[dict],
    step_windows: list[dict],
    pauses: list[dict],
    spikes: Sequence[SpanLike],
    window_s: float,
) -> list[ComparisonRow]:
    """Normal (outside every spike, guarded) vs spike (inside any spike), per signal; empty when
    nothing spiked. `windows`, `step_windows`, `pauses`: the queries windows, step_stages and
    gc_pauses, as the analysis read them."""
    if not spikes or not windows:
        return []
    in_spike, normal = _masks(len(windows), spikes, window_s)
    rows: list[ComparisonRow] = []

    def add(signal: str, unit: str, series: np.ndarray, scale: float = 1.0) -> None:
        a, b = _nanmean(series[normal]), _nanmean(series[in_spike])
        rows.append(
            ComparisonRow(
                signal,
                unit,
                _real(None if a is None else a * scale),
                _real(None if b is None else b * scale),
            )
        )

    for key, label in (
        ("itl_p99_ms", "ITL p99"),
        ("ttft_p99_ms", "TTFT p99"),
        ("e2e_p99_ms", "E2E p99"),
    ):
        add(label, "ms", _col(windows, key))
    rows += _gc_rows(pauses, in_spike, normal, window_s)
    if step_windows:
        for signal, unit, keys, scale in _STEP_SIGNALS:
            series = _col(step_windows, keys[0])
            for key in keys[1:]:
                series = series + _col(step_windows, key)
            add(signal, unit, series, 1.0 / window_s if scale is None else scale)
    add("arrivals", "1/s", _col(windows, "arrivals"), 1.0 / window_s)
    add("output tokens per request", "tokens", _col(windows, "output_tokens_mean"))
    return rows


def fault_verdicts(
    faults: list[dict],
    spikes: Sequence[SpanLike],
    top_causes: dict[int, str],
    window_s: float,
    tolerance_windows: int = TOLERANCE_WINDOWS,
) -> list[FaultVerdict]:
    """Each fault (query `faults`, in its order) with the reported spike matched to it one-to-one
    (rca.evaluate.match_events) and that spike's top cause (`top_causes` by spike_id)."""
    rows = [{**f, "end_s": f["end_s"] if f["end_s"] is not None else f["start_s"]} for f in faults]
    matched = dict(
        match_events(
            rows,
            [{"start_s": s.start_s, "end_s": s.end_s} for s in spikes],
            window_s,
            tolerance_windows,
        )
    )
    out = []
    for i, f in enumerate(rows):
        spike = spikes[matched[i]] if i in matched else None
        out.append(
            FaultVerdict(
                kind=f["kind"],
                cause=f["cause"],
                start_s=float(f["start_s"]),
                end_s=float(f["end_s"]),
                params=f.get("params"),
                spike_id=None if spike is None else int(spike.spike_id),
                attributed_cause=None if spike is None else top_causes.get(spike.spike_id),
            )
        )
    return out
