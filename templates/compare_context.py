"""The run-vs-run comparison page's context: both runs side by side and the verdict per metric.

`compare_context` reads the two runs' headers from the warehouse; `check_compare_context` checks
the shape (same contract as templates/page_contexts.py: a completed deep copy, ContextError
naming the first bad key). The metric rows are rca.compare.MetricVerdict dicts, checked by the
nightly page's own checks so both pages accept exactly the same rows.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from templates.context_checks import ContextError, clean_floats, complete, need_mapping, relative_href
from templates.page_contexts import check_nightly_context

_SIDE_KEYS = ("run_id", "scenario_name", "status", "started_at", "git_commit", "host", "command",
              "engine", "load", "target", "report_href")


def _iso(ns: int | None) -> str | None:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="seconds") if ns else None


def _side(row: dict, reports_root: Path | None, out_dir: Path | None) -> dict:
    page = reports_root / row["run_id"] / "index.html" if reports_root else None
    href = (Path(os.path.relpath(page, out_dir)).as_posix()
            if page is not None and out_dir is not None and page.is_file() else None)
    return {"run_id": row["run_id"], "scenario_name": row["scenario_name"] or "",
            "status": row["status"], "started_at": _iso(row["started_ns"]),
            "git_commit": row["git_commit"], "host": row["host"], "command": row["command"] or "",
            "engine": json.loads(row["engine_json"]) if row["engine_json"] else None,
            "load": json.loads(row["load_json"]) if row["load_json"] else None,
            "target": row["target"], "report_href": href}


def compare_context(db_path, run_a: str, run_b: str, verdicts: list[dict],
                    reports_root: Path | None = None, out_dir: Path | None = None) -> dict:
    """A (baseline) and B (candidate) from the warehouse, with `verdicts` of B − A."""
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        sides = []
        for rid in (run_a, run_b):
            rows = query(conn, "compare_run_side", run_id=rid)
            if not rows:
                raise KeyError(f"run {rid!r} is not in the warehouse")
            sides.append(_side(rows[0], reports_root, out_dir))
    a, b = sides
    units = {"throughput": "tokens/s per window", "error_rate": "share"}
    metrics = [{**{k: v[k] for k in ("metric", "baseline", "candidate", "delta", "ci_low", "ci_high",
                                      "rel_delta", "verdict", "n_baseline", "n_candidate")},
                "unit": units.get(v["metric"], "ms")} for v in verdicts]
    differs = [k for k in ("scenario_name", "engine", "load", "target") if a[k] != b[k]]
    return {"run_a": a, "run_b": b, "metrics": metrics, "differs": differs,
            "command": f"spikelens compare {run_a} {run_b}"}


def check_compare_context(context: dict) -> dict:
    """{run_a, run_b, metrics, command, differs?, headline?, verdict?} → completed copy."""
    ctx = clean_floats(need_mapping(context, "context"))
    for key in ("run_a", "run_b", "metrics", "command"):
        if key not in ctx:
            raise ContextError(f"context: missing key {key!r}")
    for side in ("run_a", "run_b"):
        complete(ctx[side], side, ("run_id",), {k: None for k in _SIDE_KEYS if k != "run_id"})
        if ctx[side]["report_href"] is not None:
            ctx[side]["report_href"] = relative_href(ctx[side]["report_href"], f"{side}.report_href")
    ctx.setdefault("differs", [])
    ctx.setdefault("headline", "")
    nightly = check_nightly_context({"run": {"run_id": ctx["run_b"]["run_id"], "command": ctx["command"]},
                                     "metrics": ctx["metrics"], "kind": "nightly"})
    ctx["metrics"] = nightly["metrics"]
    ctx.setdefault("verdict", nightly["verdict"])
    return ctx
