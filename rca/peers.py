"""Peer root-cause methods on the same runs and the same cleaned signals as spikelens: BARO and
NSigma (RCAEval), the other RCAEval metric-based methods that work here (PEER_METHODS), and a
seeded random floor.

The peers rank metrics, not causes. Each gets, per detected spike, a frame of per-window signals
built the way spikelens' own attribution reads them (`peer_frame`):
  - stage times per step from the step timeline with each rank's own all-reduce taken out of
    forward_ms (comm_ms is the longest wait across ranks) and each step's GC overlap taken out of
    the stages it landed in (rca.stepcost), GC time a column of its own;
  - a signal that is exactly 0 before the spike (GC, preemptions) is kept: RCAEval's own
    preprocessing (dataset='custom') drops columns that are constant on either side of the
    anomaly time, so the methods are called with dataset=None and see every column;
  - the anomaly segment is the spike: windows after it are cut, and the windows of the run's
    other spikes are left out of the normal period;
  - the signals of the causes outside the engine: client event-loop lag (client), client − server
    TTFT per request (network), engine processes' run-queue wait and involuntary switches (host).
Latency series are left out: they are the symptom. A method's ranked metrics become ranked causes
by SIGNAL_CAUSE (rca.rank_scores.ranked_causes). A method that raises or ranks nothing counts as a
failure and answers no cause — RCAEval's own wrapper would silently fall back to the unranked
column order, so the functions are called directly.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rca.attribute import RunSignals
from rca.rank_scores import ranked_causes
from rca.stepcost import remove_gc_from_stages
from rca.window_columns import by_window, nvml_series, window_series

# Candidate signals per window and the cause each stands for ('unexplained': residual step time).
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
    "client_lag_ms": "client",
    "ttft_gap_ms": "network",
    "runq_wait_ms_per_s": "host",
    "involuntary_switches_per_s": "host",
    "forward_ms": "unexplained",
    "schedule_ms": "unexplained",
    "other_ms": "unexplained",
}
# The RCAEval methods that install from PyPI with the project's pins and run here.
PEER_METHODS = ("baro", "nsigma", "circa")
DEFAULT_PEERS = ("baro", "nsigma")
# RCAEval's other metric-based methods, and why each is not a peer (each was tried).
UNAVAILABLE_PEERS = {
    "rcd": "RCAEval's rcd calls causallearn SkeletonDiscovery.local_skeleton_discovery, which only "
    "RCD's patched causal-learn has (PyPI causal-learn 0.1.4.8: AttributeError)",
    "e_diagnosis": "needs sfr-pyrca (PyRCA), which requires scikit-learn<1.2 and cannot install "
    "beside the pinned scikit-learn 1.9.1",
}
_STEP_STAGES = ("schedule_ms", "forward_ms", "penalty_ms", "sample_ms", "comm_ms", "other_ms")
_STEP_SIGNALS = ("gc_ms", "batch_size", "waiting", "kv_usage", "page_faults", "preempted")


@dataclass(frozen=True)
class PeerAnswer:
    """One peer method's answer for one spike."""

    causes: tuple[str, ...]  # ranked causes, most likely first; () on failure
    metrics: tuple[str, ...]  # the method's ranked metrics (the first 10)
    failed: bool  # the method raised or ranked nothing
    seconds: float  # wall time of the method's call


def _per_window(values: np.ndarray, index: np.ndarray, n: int, how: str = "mean") -> np.ndarray:
    """Per-step values [n_steps] aggregated into windows [n] (mean or sum; no step → NaN)."""
    ok = np.isfinite(values) & (index >= 0) & (index < n)
    sums = np.bincount(index[ok], weights=values[ok], minlength=n)[:n]
    counts = np.bincount(index[ok], minlength=n)[:n]
    if how == "sum":
        return np.where(counts > 0, sums, np.nan)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _in_any(t: np.ndarray, spans: Sequence[tuple[float, float]]) -> np.ndarray:
    out = np.zeros(len(t), dtype=bool)
    for a, b in spans:
        out |= (t >= a) & (t < b)
    return out


def _step_columns(
    signals: RunSignals, spans: Sequence[tuple[float, float]], n: int
) -> dict[str, np.ndarray]:
    """Stage times without GC and without double-counted collectives, per window [n]."""
    steps = signals.steps
    t = steps.get("t_s", np.zeros(0))
    if len(t) == 0:
        return {}
    index = np.floor(np.nan_to_num(t, nan=-1.0) / signals.window_s).astype(np.int64)  # NaN → none
    clean = remove_gc_from_stages(steps, ~_in_any(t, spans))
    cols = {s: _per_window(clean[s], index, n) for s in _STEP_STAGES}
    for key in _STEP_SIGNALS:
        how = "sum" if key == "preempted" else "mean"
        cols["preemptions" if key == "preempted" else key] = _per_window(
            np.nan_to_num(steps[key]) if key in ("gc_ms", "preempted") else steps[key],
            index,
            n,
            how,
        )
    return cols


def _outside_columns(signals: RunSignals, n: int) -> dict[str, np.ndarray]:
    """Client, network and host signals per window [n] (absent collectors: no column)."""
    cols = {}
    if signals.client_windows:
        cols["client_lag_ms"] = by_window(signals.client_windows, "lag_p99_ms", n)
    engine_cpu = [r for r in signals.process.cpu_windows if r.get("role") != "loadgen"]
    for key in ("runq_wait_ms_per_s", "involuntary_switches_per_s"):
        if engine_cpu:
            sums = np.zeros(n)
            for r in engine_cpu:
                if r.get(key) is not None and 0 <= r["window"] < n:
                    sums[r["window"]] += float(r[key])
            cols[key] = sums
    return cols


def peer_frame(
    signals: RunSignals,
    spike: tuple[float, float],
    other_spikes: Sequence[tuple[float, float]] = (),
    transit_windows: Sequence[dict] = (),
):
    """pandas DataFrame [windows, 1 + signals] for one spike: 'time' (window start, s) and each
    candidate signal, cut at the spike's end, the other spikes' windows left out (NaN → the
    column's median, then 0 when the signal was never reported)."""
    import pandas as pd

    n = len(signals.windows)
    t = window_series(signals.windows, "t_s")
    cols: dict[str, np.ndarray] = {"time": t, **_step_columns(signals, [spike, *other_spikes], n)}
    pauses = np.zeros(n)
    for p in signals.gc_pauses:
        i = int(p["t_s"] // signals.window_s)
        if 0 <= i < n:
            pauses[i] += p["duration_ms"]
    cols["gc_pause_ms"] = pauses
    cols["arrivals"] = window_series(signals.windows, "arrivals")
    cols["output_tokens_mean"] = window_series(signals.windows, "output_tokens_mean")
    if signals.nvml_windows:
        cols["nvml_mem_fraction"] = nvml_series(signals.nvml_windows, "mem_fraction", n)
    if transit_windows:
        cols["ttft_gap_ms"] = by_window(list(transit_windows), "ttft_gap_ms", n)
    cols.update({k: v for k, v in _outside_columns(signals, n).items() if k not in cols})
    frame = pd.DataFrame(cols)
    keep = (frame["time"] < spike[1]) & ~pd.Series(_in_any(t, other_spikes))
    frame = frame[keep].reset_index(drop=True)
    for c in frame.columns:
        if c != "time":
            frame[c] = frame[c].fillna(frame[c].median()).fillna(0.0)
    # a column constant over the whole frame carries nothing for any method (and stalls CIRCA's
    # PC search on NaN correlations); one that is constant only before the spike is kept
    flat = [c for c in frame.columns if c != "time" and frame[c].nunique() <= 1]
    return frame.drop(columns=flat)


def _method(name: str) -> Callable:
    # Importing RCAEval switches every warning off process-wide: keep that inside this block.
    with warnings.catch_warnings():
        if name == "baro":
            from RCAEval.e2e.baro import baro as fn
        elif name == "nsigma":
            from RCAEval.e2e import nsigma as fn
        elif name == "circa":
            fn = _circa
        else:
            raise ValueError(f"peer method must be one of {PEER_METHODS}, got {name!r}")
    return fn


def _circa(frame, inject_time: float, dataset=None, seed: int = 0) -> dict:
    """CIRCA as RCAEval's circa runs it (PC graph, then regression-based hypothesis testing), called
    step by step: RCAEval's wrapper hides a failure behind the unranked column order, and its
    scorer wants 'service_metric' column names and draws from numpy's global generator."""
    with warnings.catch_warnings():
        from RCAEval.graph_construction.pc import pc_default
        from RCAEval.graph_heads.rht import rht
    names = [c for c in frame.columns if c != "time"]
    alias = {c: f"s{i}_m" for i, c in enumerate(names)}
    back = {v: k for k, v in alias.items()}
    data = frame.rename(columns=alias)
    np.random.seed(seed)  # rht picks its SLI node with np.random.choice
    adj = pc_default(data.drop(columns=["time"]), dataset="ob")
    ranks = sorted(rht(adj, inject_time, data), key=lambda x: x[1], reverse=True)
    return {"ranks": [back.get(r[0], r[0]) for r in ranks]}


def peer_answer(name: str, frame, anomaly_time_s: float) -> PeerAnswer:
    """The ranked causes of one peer method for the anomaly starting at anomaly_time_s."""
    fn = _method(name)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(frame, inject_time=anomaly_time_s, dataset=None)
        ranks = [str(r) for r in out.get("ranks", []) if r != "time"]
    except Exception:  # a failure of the peer method counts as a failure, not a crash of ours
        return PeerAnswer((), (), True, time.perf_counter() - t0)
    seconds = time.perf_counter() - t0
    if not ranks:
        return PeerAnswer((), (), True, seconds)
    return PeerAnswer(ranked_causes(ranks, SIGNAL_CAUSE), tuple(ranks[:10]), False, seconds)


def random_ranking(rng: random.Random, causes: Sequence[str]) -> tuple[str, ...]:
    """The random floor: the causes in a uniformly random order."""
    out = list(causes)
    rng.shuffle(out)
    return tuple(out)
