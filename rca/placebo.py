"""What the attribution says of a clean stretch: placebo spikes on runs without a fault.

A control run has no fault, so a cause named over one of its stretches is what that cause's
signals say by chance: how often each signal fires on clean runs. Each control is cut into
stretches of `PlaceboConfig.windows` windows, after `skip_windows` (warm-up transients); a stretch
is attributed as if it were a spike of a series (ITL and TTFT p99, each on its own) when that
series' mean over it is above the run's baseline median (as a detected spike's always is) — with
the run's own baselines, the same attribution path the analysis takes (step stages, or /metrics
ranking for an engine without step traces), and nothing else marked as a spike. The answer per
placebo is its verdict: 'unexplained' is the honest one; a named cause is a signal that fired.

Pure over rca's inputs; the warehouse reads are the analysis' own (rca.analyze.load_signals).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from rca.attribute import RunSignals
from rca.config import CAUSES, AttributeConfig, DetectConfig
from rca.detect import Interval, Spike, baseline, series
from rca.metric_rank import attribute_any

PLACEBO_METRICS = ("itl_p99", "ttft_p99")  # E2E is binned at completion: it lags its cause


@dataclass(frozen=True)
class PlaceboConfig:
    windows: int = 5  # a stretch as long as a typical detected spike (4-10 windows)
    skip_windows: int = 10  # the load's first seconds: warm-up transients are no clean stretch


@dataclass(frozen=True)
class Placebo:
    """One clean stretch attributed as a spike of `metric`: windows [first, last]."""

    metric: str
    first: int
    last: int
    verdict: str  # a cause, or 'unexplained'


def _placebo_spike(metric: str, first: int, last: int, values: np.ndarray, median: float, w: float):
    """A Spike over windows [first, last] of `metric`, as detection would have built it."""
    peak = float(np.nanmax(values[first : last + 1]))
    flagged = [i for i in range(first, last + 1) if not np.isnan(values[i])]
    iv = Interval(metric, first, last, peak, median, flagged, 0.0)
    return Spike(
        1, metric, [metric], first, last, first * w, (last + 1) * w, peak, median,
        "minor", 0.0, "placebo", [iv],
    )  # fmt: skip


def run_placebos(
    signals: RunSignals,
    detect: DetectConfig | None = None,
    attribute: AttributeConfig | None = None,
    options: PlaceboConfig | None = None,
) -> list[Placebo]:
    """Every placebo of one run (see the module docstring)."""
    detect, attribute = detect or DetectConfig(), attribute or AttributeConfig()
    options = options or PlaceboConfig()
    w = signals.window_s
    out = []
    for metric in PLACEBO_METRICS:
        values = series(signals.windows, metric, detect)
        base = baseline(values, metric, detect)
        if base is None:
            continue
        for first in range(
            options.skip_windows, len(values) - options.windows + 1, options.windows
        ):
            last = first + options.windows - 1
            stretch = values[first : last + 1]
            if not np.isfinite(stretch).any() or np.nanmean(stretch) <= base.median_ms:
                continue
            spike = _placebo_spike(metric, first, last, values, base.median_ms, w)
            found = attribute_any(spike, [spike], signals, attribute)
            out.append(Placebo(metric, first, last, found.top_cause))
    return out


def placebo_rates(placebos: list[Placebo], runs: int) -> dict:
    """Per answer, how many placebos gave it and what share of them: `named` is the share that
    named any cause (a signal fired on a clean stretch)."""
    counts = Counter(p.verdict for p in placebos)
    n = len(placebos)
    return {
        "runs": runs,
        "placebos": n,
        "named": (n - counts.get("unexplained", 0)) / n if n else None,
        "by_cause": {
            c: {"n": counts.get(c, 0), "share": counts.get(c, 0) / n if n else None} for c in CAUSES
        },
        "by_metric": {m: sum(p.metric == m for p in placebos) for m in PLACEBO_METRICS},
    }
