"""Attribution by metric ranking, for targets without step traces (an engine spikelens did not
start: vLLM, SGLang, TGI), from their Prometheus /metrics samples and NVML.

Each series (metric name + labels; counters — names ending in _total, _count or _sum — as
per-second rates of their last value per window) is scored like BARO: robust z = (value − median)
/ IQR of the baseline windows, the largest z over the spike's windows. Series are mapped to causes
by their names (CAUSE_PATTERNS, first match wins; vLLM's names are the reference) — occupancy
fractions (KV cache, GPU memory) count as memory only near capacity (≥ 0.9), else as load. The five
highest-scoring series with z > min_z vote with their z: a cause's share = its votes / all votes
(no vote at all → unexplained). Confidence of a cause = its best series' z / (z + 3).

Pure: rows of warehouse queries `metric_windows` / `nvml_windows` in, an Attribution out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rca.attribute import Attribution, CauseShare, RunSignals, window_masks, window_series
from rca.config import CAUSES, AttributeConfig
from rca.detect import Spike
from rca.evidence import Evidence, pearson

CAUSE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("memory", r"cache_usage|kv_|preempt|gpu_memory|mem_fraction|memory|swap|gc_"),
    ("communication", r"nccl|all_?reduce|collective|comm|pcie|nvlink"),
    ("penalty", r"penalt|sampl|repetit"),
    ("load", r"requests_running|requests_waiting|waiting|running|queue|arrival|request_success|"
             r"prompt_tokens|num_requests"),
)
# Occupancy fractions (KV cache, GPU memory) grow with the number of sequences too: they point at
# memory only when they reach near capacity, else at load.
OCCUPANCY = r"cache_usage|mem_fraction"
NEAR_CAPACITY = 0.9
COUNTER_SUFFIXES = ("_total", "_count", "_sum")
TOP_K = 5
MIN_Z = 3.0


def cause_of(series_name: str) -> str:
    """The cause a metric name stands for; 'unexplained' when no pattern matches."""
    for cause, pattern in CAUSE_PATTERNS:
        if re.search(pattern, series_name):
            return cause
    return "unexplained"


@dataclass
class RankedSeries:
    name: str            # name{labels}
    cause: str
    z: float
    spike_value: float
    baseline_value: float
    series: np.ndarray   # [n_windows]


def metric_series(rows: list[dict], n: int, window_s: float) -> dict[str, np.ndarray]:
    """{name{labels}: values [n_windows]} from `metric_windows` rows; counters become rates."""
    by_series: dict[str, np.ndarray] = {}
    for r in rows:
        key = r["name"] + ("" if r["labels"] in (None, "{}") else r["labels"])
        arr = by_series.setdefault(key, np.full(n, np.nan))
        if 0 <= r["window"] < n and r["last_value"] is not None:
            arr[r["window"]] = float(r["last_value"])
    for key, arr in by_series.items():
        if key.split("{")[0].endswith(COUNTER_SUFFIXES):
            rate = np.full(n, np.nan)
            rate[1:] = np.diff(arr) / window_s               # NaN where either window is missing
            by_series[key] = np.where(rate < 0, np.nan, rate)   # a counter reset is not a rate
    return by_series


def _nvml(rows: list[dict], n: int) -> dict[str, np.ndarray]:
    out = {}
    for key in ("util_gpu", "mem_fraction", "power_w", "sm_clock", "pcie_tx", "pcie_rx"):
        arr = np.full(n, np.nan)
        for r in rows:
            if r.get(key) is not None and 0 <= r["window"] < n:
                arr[r["window"]] = np.nanmax([arr[r["window"]], float(r[key])])
        if np.isfinite(arr).any():
            out[f"nvml_{key}"] = arr
    return out


def rank_series(series: dict[str, np.ndarray], in_spike: np.ndarray, in_base: np.ndarray) -> list[RankedSeries]:
    """Every series with data on both sides, by robust z (largest first)."""
    ranked = []
    for name, values in series.items():
        base, spike = values[in_base], values[in_spike]
        base, spike = base[np.isfinite(base)], spike[np.isfinite(spike)]
        if len(base) < 3 or not len(spike):
            continue
        median = float(np.median(base))
        iqr = float(np.subtract(*np.percentile(base, [75, 25])))
        scale = max(iqr, 0.05 * abs(median), 1e-9)       # a flat baseline must not make z infinite
        z = float((spike.max() - median) / scale)
        cause = cause_of(name)
        if re.search(OCCUPANCY, name) and spike.max() < NEAR_CAPACITY:
            cause = "load"
        ranked.append(RankedSeries(name, cause, z, float(spike.mean()), median, values))
    ranked.sort(key=lambda r: -r.z)
    return ranked


def attribute_by_metrics(spike: Spike, spikes: list[Spike], signals: RunSignals,
                         config: AttributeConfig | None = None) -> Attribution:
    """Attribution of one spike from /metrics and NVML series alone (see module docstring)."""
    config = config or AttributeConfig()
    n = len(signals.windows)
    in_spike, in_base = window_masks(n, spike, spikes, config.guard_windows)
    series = {**metric_series(signals.metric_windows, n, signals.window_s), **_nvml(signals.nvml_windows, n)}
    ranked = rank_series(series, in_spike, in_base)
    voters = [r for r in ranked[:TOP_K] if r.z > MIN_Z]
    latency = window_series(signals.windows, f"{spike.metric}_ms")
    votes = {c: sum(r.z for r in voters if r.cause == c) for c in CAUSES}
    total = sum(votes.values())
    shares = {c: votes[c] / total for c in CAUSES} if total > 0 else {**{c: 0.0 for c in CAUSES}, "unexplained": 1.0}
    causes = []
    for c in CAUSES:
        if shares[c] <= 1e-4:
            continue
        mine = [r for r in voters if r.cause == c]
        conf = mine[0].z / (mine[0].z + 3.0) if mine else 0.0
        evidence = [Evidence(r.name, r.spike_value, r.baseline_value, "", f"robust z = {r.z:.1f} (rank "
                             f"{ranked.index(r) + 1} of {len(ranked)})", pearson(r.series, latency)) for r in mine]
        causes.append(CauseShare(c, round(shares[c], 4), round(conf, 4), 0.0, evidence))
    causes.sort(key=lambda cs: -cs.share)
    overshoot = sum(cs.share for cs in causes) - 1.0
    if overshoot > 0:
        causes[0].share = round(causes[0].share - overshoot, 4)
    top = causes[0].cause
    summary = (f"top metric {voters[0].name} (robust z {voters[0].z:.1f})" if voters
               else "no metric moved beyond its baseline noise")
    return Attribution(spike.spike_id, causes, top, 0.0, 0.0, {c: 0.0 for c in CAUSES}, summary, "metric_rank")
