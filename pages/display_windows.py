"""Latency windows aggregated for display, so a long run's charts stay light and still show
every spike.

A one-hour run has 3,600 one-second windows (more with shorter windows or longer runs); drawing
each as a point makes the page slow to open and the lines unreadable. Up to MAX_DISPLAY_WINDOWS
windows are shown as they are; beyond that, consecutive windows are grouped into equal-count
display buckets and each bucket becomes one point:
  latency percentiles (ITL p50/p99, TTFT p99, E2E p99)  the MAX over the bucket — a spike of one
                                                         window stays at its full height instead
                                                         of being averaged away
  running, waiting (batch and queue)                    the MAX over the bucket (bursts show)
  requests, tokens (counts per window)                  the MEAN over the bucket, rounded (the
                                                         unit stays "per window")
  t_s                                                   the bucket's first window's start
Missing values (None) are left out of a bucket's max and mean; a bucket with none stays None.
The analysis never reads these points: spikes, attributions and the tables use every window.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any, TypeVar

import numpy as np

# Above this many windows the charts get display buckets (1 h of 1-s windows → 1,200 points of
# 3 s): enough points for a 1,366-px-wide chart, few enough to draw in well under a second.
MAX_DISPLAY_WINDOWS = 1200

_MAX_FIELDS = ("itl_p50_ms", "itl_p99_ms", "ttft_p99_ms", "e2e_p99_ms", "running", "waiting")
_MEAN_FIELDS = ("requests", "tokens")

W = TypeVar("W")


def display_windows(windows: tuple[W, ...], max_points: int = MAX_DISPLAY_WINDOWS) -> tuple[W, ...]:
    """`windows` (latency windows in time order, e.g. pages.incident.Window) as at most
    max_points display points: max of the latencies and of the queue, mean of the counts per
    bucket of consecutive windows (see the module docstring). Fewer windows pass unchanged."""
    if len(windows) <= max_points:
        return windows
    names = {f.name for f in fields(windows[0])}  # type: ignore[arg-type]
    buckets = np.array_split(np.arange(len(windows)), max_points)
    return tuple(_bucket([windows[i] for i in b], names) for b in buckets)


def _bucket(group: list[W], names: set[str]) -> W:
    values: dict[str, Any] = {}
    for name in names & set(_MAX_FIELDS):
        present = [v for v in (getattr(w, name) for w in group) if _present(v)]
        values[name] = max(present) if present else None
    for name in names & set(_MEAN_FIELDS):
        present = [v for v in (getattr(w, name) for w in group) if _present(v)]
        values[name] = round(sum(present) / len(present)) if present else None
    return replace(group[0], **values)  # type: ignore[type-var]


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
