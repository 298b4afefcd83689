"""Per-window rows (the warehouse's `*_windows` queries) as numpy columns [n_windows].

One home for the three shapes the analysis reads, so every side (attribution, the outside
causes, the metric ranking, the peers, validity) reads a column the same way: rows that cover
every window in order (`window_series`), rows keyed by their 'window' with gaps
(`by_window`), and NVML rows with one row per GPU a window (`nvml_series`).
"""

from __future__ import annotations

import numpy as np


def window_series(rows: list[dict], key: str, n: int | None = None) -> np.ndarray:
    """One column of window rows as float64 [n_windows] (None or absent → NaN)."""
    if not rows and n is not None:
        return np.full(n, np.nan)
    return np.array(
        [np.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64
    )


def by_window(rows: list[dict], key: str, n: int) -> np.ndarray:
    """A column of rows keyed by 'window' as [n_windows] (windows without a row → NaN)."""
    out = np.full(n, np.nan)
    for r in rows:
        if r.get(key) is not None and 0 <= r["window"] < n:
            out[r["window"]] = float(r[key])
    return out


def nvml_series(rows: list[dict], key: str, n: int) -> np.ndarray:
    """Mean over GPUs per window of an nvml_windows column [n_windows]."""
    sums, counts = np.zeros(n), np.zeros(n)
    for r in rows:
        if r.get(key) is not None and 0 <= r["window"] < n:
            sums[r["window"]] += float(r[key])
            counts[r["window"]] += 1
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
