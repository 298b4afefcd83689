"""Contexts of the nightly, replay-comparison and sweep pages (docs/reports.md), read from the
warehouse. The incident page's context is rca/report.py's.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from warehouse.db import connect
from warehouse.queries import query

# Units of the nightly metrics, for the page.
METRIC_UNITS = {"throughput": "tokens/s per window", "error_rate": "share"}


def _iso(ns: int | None) -> str | None:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="seconds") if ns else None


def _run_section(conn, run_id: str) -> dict:
    rows = query(conn, "run_header", run_id=run_id)
    if not rows:
        raise KeyError(f"run {run_id!r} is not in the warehouse")
    r = rows[0]
    return {"run_id": run_id, "scenario_name": r["scenario_name"] or "", "command": r["command"] or "",
            "started_at": _iso(r["started_ns"]), "git_commit": r["git_commit"], "host": r["host"],
            "status": r["status"]}


def _metric_rows(verdicts: list[dict], scenario: str | None = None) -> list[dict]:
    rows = []
    for v in verdicts:
        row = {k: v[k] for k in ("metric", "baseline", "candidate", "delta", "ci_low", "ci_high",
                                 "rel_delta", "verdict")}
        row["run_noise"] = v.get("run_noise")
        row["unit"] = METRIC_UNITS.get(v["metric"], "ms")
        row["scenario"] = scenario
        rows.append(row)
    return rows


def nightly_context(db_path: str | Path, run_id: str) -> dict:
    """A nightly run's verdicts per metric with CIs, and the trend of each metric across past
    nightlies of the same scenario."""
    with connect(db_path, read_only=True) as conn:
        run = _run_section(conn, run_id)
        verdicts = query(conn, "nightly_run_verdicts", run_id=run_id)
        trend = query(conn, "nightly_trend", scenario_name=run["scenario_name"])
        baseline_runs = verdicts[0]["baseline_runs"] if verdicts else []
    label = (f"{len(baseline_runs)} earlier nightly run(s)" if baseline_runs
             else "no earlier passing nightly (this run starts the baseline)")
    return {"run": run, "kind": "nightly", "title": f"Nightly regression: {run['scenario_name']}",
            "baseline_label": label, "metrics": _metric_rows(verdicts),
            "trend": [{"run_id": t["run_id"], "started_at": _iso(t["started_ns"]),
                       "metric": t["metric"], "value": t["candidate"]} for t in trend],
            "incident_href": "../index.html"}


def comparison_context(db_path: str | Path, run_id: str, original_run_id: str,
                       verdicts: list[dict]) -> dict:
    """A replay compared metric by metric with the run it replayed."""
    with connect(db_path, read_only=True) as conn:
        run = _run_section(conn, run_id)
    return {"run": run, "kind": "replay", "title": f"Replay vs original run {original_run_id}",
            "baseline_label": f"original run {original_run_id}",
            "metrics": _metric_rows(verdicts), "trend": [], "incident_href": "../index.html"}


SWEEP_METRICS = [
    {"key": "repeated_3gram_rate", "label": "repeated 3-gram rate", "unit": "share", "higher_is_worse": True},
    {"key": "entropy_bits", "label": "output entropy", "unit": "bits", "higher_is_worse": False},
    {"key": "output_tokens", "label": "output length", "unit": "tokens", "higher_is_worse": True},
    {"key": "e2e_p99_ms", "label": "E2E p99", "unit": "ms", "higher_is_worse": True},
    {"key": "itl_p99_ms", "label": "ITL p99", "unit": "ms", "higher_is_worse": True},
]


def sweep_context(db_path: str | Path, run_id: str, temperatures: list[float],
                  penalties: list[float], cells: list[dict]) -> dict:
    """Heatmaps over temperature (x) × frequency_penalty (y)."""
    with connect(db_path, read_only=True) as conn:
        run = _run_section(conn, run_id)
    grid_cells = [{**c, "x": c["temperature"], "y": c["frequency_penalty"]} for c in cells
                  if c["temperature"] in temperatures and c["frequency_penalty"] in penalties]
    return {"run": run, "x": {"name": "temperature", "values": list(temperatures)},
            "y": {"name": "frequency_penalty", "values": list(penalties)},
            "metrics": SWEEP_METRICS, "cells": grid_cells}

