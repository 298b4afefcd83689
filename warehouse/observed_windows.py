"""Latency windows of an observed run (no client samples) from the engine's own histograms.

A run imported from Prometheus (`spikelens incident --prometheus`) has no requests of its own:
its ITL, TTFT and E2E per window come from the engine's latency histograms, the quantiles of
each window's bucket increases (warehouse query `metric_histogram_windows`, Prometheus'
histogram_quantile interpolation). A series' sample count is its histogram's observations in the
window, so detection's `min_samples` applies as it does to client samples. Finished requests
(E2E observations) stand in for arrivals, and generated tokens per window come from the engine's
token counter. The rows have the keys of query `windows`, so detection and attribution read them
alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from warehouse.db import DbConnection
from warehouse.queries import query

# The histograms of each latency series, first found wins (vLLM ≥ 0.10 names ITL
# inter_token_latency; older releases only time_per_output_token, a per-request mean).
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "itl": (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ),
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
}
TOKEN_COUNTERS = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")


def latency_sources(histogram_rows: list[dict]) -> dict[str, str]:
    """series (itl/ttft/e2e) → the histogram name that feeds it; series without one left out."""
    present = {r["name"] for r in histogram_rows}
    return {
        series: next(name for name in names if name in present)
        for series, names in HISTOGRAMS.items()
        if any(name in present for name in names)
    }


def _by_window(histogram_rows: list[dict], name: str) -> dict[int, tuple[dict, int]]:
    """window → (quantile row, observations) of one histogram: the row of its busiest label set
    (its quantiles are the closest stand-in for all) and the observations of every label set."""
    best: dict[int, dict] = {}
    totals: dict[int, int] = {}
    for r in histogram_rows:
        if r["name"] != name or r["p99"] is None:
            continue
        w, n = int(r["window"]), int(r["observations"] or 0)
        totals[w] = totals.get(w, 0) + n
        if w not in best or n > int(best[w]["observations"] or 0):
            best[w] = r
    return {w: (row, totals[w]) for w, row in best.items()}


def _token_counts(metric_rows: list[dict], n_windows: int) -> list[float]:
    """Generated tokens per window from the engine's token counter (0 where unknown)."""
    name = next((c for c in TOKEN_COUNTERS if any(r["name"] == c for r in metric_rows)), None)
    last: dict[int, float] = {}
    for r in metric_rows:
        if r["name"] == name and r["last_value"] is not None:
            w = int(r["window"])
            last[w] = last.get(w, 0.0) + float(r["last_value"])
    out = [0.0] * n_windows
    for w in range(1, n_windows):
        if w in last and w - 1 in last and last[w] >= last[w - 1]:
            out[w] = last[w] - last[w - 1]
    return out


def observed_windows(
    histogram_rows: list[dict], metric_rows: list[dict], n_windows: int, window_s: float
) -> list[dict]:
    """Rows with the keys of query `windows` for windows 0 .. n_windows − 1 (module doc)."""
    sources = latency_sources(histogram_rows)
    per = {series: _by_window(histogram_rows, name) for series, name in sources.items()}
    tokens = _token_counts(metric_rows, n_windows)
    rows = []
    for w in range(n_windows):
        row: dict = {"window": w, "t_s": w * window_s, "errors": 0, "tokens": tokens[w]}
        for series in HISTOGRAMS:
            found, n = per.get(series, {}).get(w, ({}, 0))
            for q in ("p50", "p90", "p99"):
                value = found.get(q)
                row[f"{series}_{q}_ms"] = None if value is None else float(value) * 1e3
            row[f"{series}_n"] = n
        finished = row["e2e_n"]
        row["arrivals"] = row["requests"] = finished
        row["output_tokens_mean"] = tokens[w] / finished if finished else None
        rows.append(row)
    return rows


def is_observed(engine: Mapping[str, Any] | None) -> bool:
    """A run imported from monitoring (`spikelens incident --prometheus`): no client samples."""
    return engine is not None and engine.get("kind") == "observed"


def latency_windows(
    conn: DbConnection, run_id: str, window_s: float, engine: Mapping[str, Any] | None
) -> list[dict]:
    """The run's latency per window: client samples (query `windows`), or for an observed run
    the engine's histograms (`observed_windows`) on the same grid."""
    windows = query(conn, "windows", run_id=run_id, window_s=window_s)
    if not is_observed(engine):
        return windows
    histograms = query(conn, "metric_histogram_windows", run_id=run_id, window_s=window_s)
    metrics = query(conn, "metric_windows", run_id=run_id, window_s=window_s)
    return observed_windows(histograms, metrics, len(windows), window_s)
