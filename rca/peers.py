"""Peer root-cause methods on the same runs, for comparison: BARO and NSigma (the `rcaeval` package)
and a seeded random floor.

BARO and NSigma rank metrics, not causes: each gets a frame of per-window candidate signals (the
same engine, GC, KV, load and NVML signals spikelens' attribution reads; latency series left out,
they are the symptom) with the detected spike's start as the anomaly time. Their top-ranked metric
is mapped to a cause by its name (SIGNAL_CAUSE). A method that raises, or ranks nothing, answers
'unexplained' and is counted in `failures` — rcaeval's own wrapper would silently fall back to the
unranked column order, so the functions are called directly, not through it.

rcaeval preprocessing (dataset="custom") drops columns that are constant on either side of the
anomaly time — e.g. preemptions that are 0 before a KV fault — which is part of how these methods
behave on this data.
"""

from __future__ import annotations

import random
import warnings

import numpy as np

from rca.attribute import RunSignals, window_series
from rca.config import CAUSES

# Candidate signals per window and the cause each stands for.
SIGNAL_CAUSE = {
    "gc_ms": "memory",
    "gc_pause_ms": "memory",
    "preemptions": "memory",
    "kv_usage": "memory",
    "nvml_mem_fraction": "memory",
    "page_faults": "memory",
    "penalty_ms": "penalty",
    "sample_ms": "penalty",
    "output_tokens_mean": "penalty",
    "comm_ms": "communication",
    "batch_size": "load",
    "waiting": "load",
    "arrivals": "load",
    "forward_ms": "unexplained",
    "schedule_ms": "unexplained",
    "other_ms": "unexplained",
}
PEER_METHODS = ("baro", "nsigma")


def signal_frame(signals: RunSignals):
    """pandas DataFrame [n_windows, 1 + signals]: 'time' (window start, s) and each candidate signal
    (NaN → column median, then 0 when the signal was never reported)."""
    import pandas as pd

    n = len(signals.windows)
    sw = signals.step_windows
    cols = {"time": window_series(signals.windows, "t_s")}
    for key in (
        "gc_ms",
        "preemptions",
        "kv_usage",
        "page_faults",
        "penalty_ms",
        "sample_ms",
        "comm_max_ms",
        "batch_size",
        "waiting",
        "forward_ms",
        "schedule_ms",
        "other_ms",
    ):
        cols["comm_ms" if key == "comm_max_ms" else key] = window_series(sw, key, n)
    pauses = np.zeros(n)
    for p in signals.gc_pauses:
        i = int(p["t_s"] // signals.window_s)
        if 0 <= i < n:
            pauses[i] += p["duration_ms"]
    cols["gc_pause_ms"] = pauses
    cols["arrivals"] = window_series(signals.windows, "arrivals")
    cols["output_tokens_mean"] = window_series(signals.windows, "output_tokens_mean")
    if signals.nvml_windows:
        mem = np.full(n, np.nan)
        for r in signals.nvml_windows:
            if r.get("mem_fraction") is not None and 0 <= r["window"] < n:
                mem[r["window"]] = np.nanmax([mem[r["window"]], r["mem_fraction"]])
        cols["nvml_mem_fraction"] = mem
    frame = pd.DataFrame(cols)
    for c in frame.columns:
        if c != "time":
            frame[c] = frame[c].fillna(frame[c].median()).fillna(0.0)
    return frame


def _method(name: str):
    # Importing RCAEval switches every warning off process-wide: keep that inside this block.
    with warnings.catch_warnings():
        if name == "baro":
            from RCAEval.e2e.baro import baro as fn
        elif name == "nsigma":
            from RCAEval.e2e import nsigma as fn
        else:
            raise ValueError(f"peer method must be one of {PEER_METHODS}, got {name!r}")
    return fn


def peer_cause(name: str, frame, anomaly_time_s: float) -> tuple[str, str | None, bool]:
    """(cause, top metric, failed) of one peer method for an anomaly starting at anomaly_time_s."""
    fn = _method(name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(frame, inject_time=anomaly_time_s, dataset="custom")
        ranks = [r for r in out.get("ranks", []) if r != "time"]
    except Exception:  # any failure of the peer method counts as a failure, not a crash of ours
        return "unexplained", None, True
    if not ranks:
        return "unexplained", None, True
    return SIGNAL_CAUSE.get(ranks[0], "unexplained"), ranks[0], False


def random_cause(rng: random.Random) -> str:
    """The random floor: a cause drawn uniformly (expected accuracy 1/5)."""
    return rng.choice(CAUSES)
