"""Did an injected fault act? Judged from the raw client latencies alone (pure).

The evaluation scores accuracy over the faults that *acted*, so that a fault drawn below what
the system can feel is not counted as a miss of spikelens' detector. The judge must therefore not
be that detector (no 1-s windows, no fitted baseline, no threshold of rca.config); it asks only
whether the run's clients saw a worse tail during the fault than anywhere else in the run:

For a fault's window W = [start, end + tail) and each client metric (TTFT, ITL, E2E), the
statistic is the 99th percentile of the metric's samples stamped inside W's *own time*: W less
every other fault's window (with its tail). Where two faults overlap, the latency of the shared
stretch is both faults' doing, so it cannot show that either one acted: judged on it, the weaker
partner of a pair inherits the stronger one's ratio (measured: a client stall beside a GC storm
read 12.03× against the storm's 11.99×). Its null distribution comes from the same run:
every window of the own time's length lying wholly in the run's fault-free time (every fault's
window with its tail left out), slid by `step_s` — placebo windows. The fault acted on a metric
when its statistic is above `margin` × the largest placebo statistic; it acted when it did on any
metric. With too little time running alone (its own time less its tail), too few placebo windows
or too few samples the judge abstains (None), and the evaluation counts the fault as acted: a
miss then counts against spikelens, never for it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

CLIENT_METRICS = ("ttft", "itl", "e2e")


@dataclass(frozen=True)
class ActedConfig:
    # A fault's cost can land after its window closes (the GC storm's last collection, a queue
    # that drains, an E2E stamped at the last token): its window is widened by this much.
    tail_s: float = 3.0
    # Placebo windows start every `step_s`: overlapping, so the null is the run's worst stretch
    # of that length, not a sample of independent windows.
    step_s: float = 1.0
    # Above the run's worst fault-free stretch by a fifth: overlapping placebos are few
    # independent draws (a 50-s run holds ~5 of an 8-s fault's length), so merely beating them
    # all would call about one null fault in five "acted" per metric.
    margin: float = 1.2
    # A percentile of fewer samples is noise: a window (fault or placebo) needs this many.
    min_samples: int = 5
    # Fewer fault-free windows than this: no null to judge against, abstain.
    min_placebos: int = 3
    # A fault that ran alone (outside every other fault's window and tail) for less than this has
    # no time of its own to judge: under two seconds its p99 rests on the few requests a closed
    # loop of a handful of users finishes (2-6 a second in the generated suites), so abstain.
    min_own_s: float = 2.0


@dataclass(frozen=True)
class Acted:
    """The judgement on one fault: `acted` None when the judge abstained (see `why`)."""

    acted: bool | None
    metric: str | None  # the metric that showed it (the largest ratio), None if none did
    ratio: float | None  # own-time p99 / largest placebo p99 on that metric
    placebos: int  # placebo windows on that metric
    why: str = ""
    own_s: float | None = None  # seconds of its window no other fault's window covers

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def samples_by_metric(rows: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """metric → (t_s, value_ms) arrays from query `client_latency_samples`' rows."""
    out = {}
    for metric in CLIENT_METRICS:
        mine = [r for r in rows if r["metric"] == metric]
        out[metric] = (
            np.array([r["t_s"] for r in mine], dtype=float),
            np.array([r["value_ms"] for r in mine], dtype=float),
        )
    return out


def fault_free_windows(
    faults: list[tuple[float, float]], duration_s: float, length_s: float, config: ActedConfig
) -> list[float]:
    """Start times of the placebo windows of `length_s` in [0, duration_s) that overlap no fault
    window widened by the tail."""
    blocked = [(s, e + config.tail_s) for s, e in faults]
    starts = np.arange(0.0, max(0.0, duration_s - length_s) + 1e-9, config.step_s)
    return [float(t) for t in starts if all(t + length_s <= s or t >= e for s, e in blocked)]


def own_time(
    fault: tuple[float, float], others: list[tuple[float, float]], config: ActedConfig
) -> list[tuple[float, float]]:
    """The stretches of the fault's window (widened by the tail) that no other fault's window
    (widened the same way) covers."""
    pieces = [(fault[0], fault[1] + config.tail_s)]
    for s, e in others:
        cut = [((a, min(b, s)), (max(a, e + config.tail_s), b)) for a, b in pieces]
        pieces = [(a, b) for pair in cut for a, b in pair if b - a > 1e-9]
    return pieces


def _p99(
    t: np.ndarray, v: np.ndarray, spans: list[tuple[float, float]], n_min: int
) -> float | None:
    mask = np.zeros(len(t), dtype=bool)
    for lo, hi in spans:
        mask |= (t >= lo) & (t < hi)
    inside = v[mask]
    return float(np.quantile(inside, 0.99)) if len(inside) >= n_min else None


def judge(
    samples: dict[str, tuple[np.ndarray, np.ndarray]],
    fault: tuple[float, float],
    all_faults: list[tuple[float, float]],
    duration_s: float,
    config: ActedConfig = ActedConfig(),
) -> Acted:
    """Did the fault at `fault` (start_s, end_s) act? `samples`: metric → (t_s, value_ms)
    arrays of the run's client samples; `all_faults`: every fault window of the run (this one
    included)."""
    others = list(all_faults)
    if fault in others:
        others.remove(fault)
    own = own_time(fault, others, config)
    length = sum(b - a for a, b in own)
    own_s = round(length, 3)
    # own time that is only its tail would judge a fault after it stopped: count the active part
    active = sum(max(0.0, min(b, fault[1]) - max(a, fault[0])) for a, b in own)
    if active < config.min_own_s:
        why = f"{active:.1f} s of it ran alone, the rest overlaps another fault's window"
        return Acted(None, None, None, 0, f"{why} (< {config.min_own_s:g} s)", own_s)
    placebo_starts = fault_free_windows(all_faults, duration_s, length, config)
    best: Acted | None = None
    for metric in CLIENT_METRICS:
        if metric not in samples:
            continue
        t, v = samples[metric]
        stat = _p99(t, v, own, config.min_samples)
        nulls = [_p99(t, v, [(s, s + length)], config.min_samples) for s in placebo_starts]
        null = [x for x in nulls if x is not None]
        if stat is None or len(null) < config.min_placebos or max(null) <= 0:
            continue
        ratio = stat / max(null)
        if best is None or ratio > (best.ratio or 0.0):
            best = Acted(ratio > config.margin, metric, round(ratio, 3), len(null), own_s=own_s)
    if best is None:
        why = _abstain_reason(placebo_starts, config)
        return Acted(None, None, None, len(placebo_starts), why, own_s)
    return best


def _abstain_reason(placebo_starts: list[float], config: ActedConfig) -> str:
    if len(placebo_starts) < config.min_placebos:
        return f"{len(placebo_starts)} fault-free windows of its length (< {config.min_placebos})"
    return f"fewer than {config.min_samples} samples in its window or the fault-free ones"
