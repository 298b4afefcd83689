"""Checks for the contexts of the index, nightly, sweep and evaluation pages (docs/reports.md).

Same contract as templates/incident_context.py: return a completed deep copy, raise ContextError
naming the first bad key, keep extra keys. Pure.
"""
from __future__ import annotations

from templates.context_checks import (ContextError, clean_floats, complete, need_list, need_mapping,
                                      need_number, need_share, need_str, relative_href)

RUN_KINDS = ("incident", "nightly", "replay", "sweep", "evaluation", "capacity", "compare")
# rca.compare.MetricVerdict's words, used for each metric and for the page as a whole.
VERDICTS = ("regressed", "improved", "unchanged", "insufficient")

_OPTIONAL_RUN = {"started_at": None, "git_commit": None, "host": None, "scenario_yaml": "", "status": None}


def _run(ctx: dict) -> dict:
    """Check the `run` section and the optional `headline` every page has."""
    if "run" not in ctx:
        raise ContextError("context: missing key 'run'")
    ctx.setdefault("headline", "")
    need_str(ctx["headline"], "headline")
    return complete(ctx["run"], "run", ("run_id", "command"), {"scenario_name": "", **_OPTIONAL_RUN})


def _one_of(value, allowed: tuple[str, ...], where: str) -> None:
    if value not in allowed:
        raise ContextError(f"{where}: must be one of {', '.join(allowed)}; got {value!r}")


def _optional_href(item: dict, key: str, where: str) -> None:
    item.setdefault(key, None)
    if item[key] is not None:
        item[key] = relative_href(item[key], f"{where}.{key}")


def check_index_context(context: dict) -> dict:
    """{title?, generated_at?, runs: [{run_id, kind, started_at, href, scenario_name?, verdict?, top_cause?, headline?}]}"""
    ctx = clean_floats(need_mapping(context, "context"))
    ctx.setdefault("title", "spikelens reports")
    ctx.setdefault("generated_at", None)
    if "runs" not in ctx:
        raise ContextError("context: missing key 'runs'")
    ctx["runs"] = need_list(ctx["runs"], "runs")
    for i, r in enumerate(ctx["runs"]):
        where = f"runs[{i}]"
        complete(r, where, ("run_id", "kind", "started_at", "href"),
                 {"scenario_name": "", "verdict": None, "top_cause": None, "headline": ""})
        _one_of(r["kind"], RUN_KINDS, f"{where}.kind")
        need_str(r["started_at"], f"{where}.started_at", allow_none=True)
        r["started_at"] = r["started_at"] or ""
        r["href"] = relative_href(r["href"], f"{where}.href")
    # Newest first: ISO-8601 UTC strings sort as times.
    ctx["runs"].sort(key=lambda r: r["started_at"], reverse=True)
    return ctx


def overall_verdict(metrics: list[dict]) -> str:
    """The page's verdict from its metrics: any regressed → regressed; else any improved → improved;
    else unchanged when at least one metric could be judged; else insufficient."""
    verdicts = {m["verdict"] for m in metrics}
    for verdict in ("regressed", "improved", "unchanged"):
        if verdict in verdicts:
            return verdict
    return "insufficient"


def check_nightly_context(context: dict) -> dict:
    """{run, metrics: [...], title?, verdict?, headline?, baseline_label?, trend?, incident_href?}

    A metric row is rca.compare.MetricVerdict.to_dict() (+ optional unit, scenario, higher_is_better).
    """
    ctx = clean_floats(need_mapping(context, "context"))
    _run(ctx)
    if "metrics" not in ctx:
        raise ContextError("context: missing key 'metrics'")
    ctx.setdefault("title", "Nightly regression")
    need_str(ctx["title"], "title")
    ctx.setdefault("kind", "nightly")  # "replay" for a replay-vs-original page (the index shows it)
    _one_of(ctx["kind"], ("nightly", "replay"), "kind")
    ctx.setdefault("baseline_label", "baseline")
    ctx.setdefault("trend", [])
    _optional_href(ctx, "incident_href", "context")
    ctx["metrics"] = need_list(ctx["metrics"], "metrics")
    for i, m in enumerate(ctx["metrics"]):
        where = f"metrics[{i}]"
        complete(m, where, ("metric", "baseline", "candidate", "delta", "ci_low", "ci_high", "verdict"),
                 {"unit": "", "scenario": None, "rel_delta": None, "n_baseline": None, "n_candidate": None,
                  "run_noise": None})
        for key in ("baseline", "candidate", "delta", "ci_low", "ci_high", "rel_delta", "run_noise"):
            need_number(m[key], f"{where}.{key}")
        _one_of(m["verdict"], VERDICTS, f"{where}.verdict")
        if None not in (m["ci_low"], m["ci_high"]) and m["ci_low"] > m["ci_high"]:
            raise ContextError(f"{where}.ci_low: {m['ci_low']!r} is above ci_high {m['ci_high']!r}")
        if m["rel_delta"] is None and m["delta"] is not None and m["baseline"]:
            m["rel_delta"] = m["delta"] / m["baseline"]
    ctx.setdefault("verdict", overall_verdict(ctx["metrics"]))
    _one_of(ctx["verdict"], VERDICTS, "verdict")
    ctx["trend"] = need_list(ctx["trend"], "trend")
    for i, t in enumerate(ctx["trend"]):
        complete(t, f"trend[{i}]", ("run_id", "started_at", "metric", "value"), {"scenario": None})
        need_number(t["value"], f"trend[{i}].value")
    return ctx


def check_sweep_context(context: dict) -> dict:
    """{run, headline?, x: {name, values}, y: {name, values}, metrics: [{key, label, unit?}], cells: [...]}"""
    ctx = clean_floats(need_mapping(context, "context"))
    _run(ctx)
    for key in ("x", "y", "metrics", "cells"):
        if key not in ctx:
            raise ContextError(f"context: missing key {key!r}")
    for axis in ("x", "y"):
        complete(ctx[axis], axis, ("name", "values"), {})
        values = need_list(ctx[axis]["values"], f"{axis}.values")
        if not values:
            raise ContextError(f"{axis}.values: must not be empty")
        for i, v in enumerate(values):
            need_number(v, f"{axis}.values[{i}]", allow_none=False)
        ctx[axis]["values"] = values
    ctx["metrics"] = [complete(m, f"metrics[{i}]", ("key", "label"), {"unit": "", "higher_is_worse": True})
                      for i, m in enumerate(need_list(ctx["metrics"], "metrics"))]
    ctx["cells"] = need_list(ctx["cells"], "cells")
    xs, ys = set(ctx["x"]["values"]), set(ctx["y"]["values"])
    for i, c in enumerate(ctx["cells"]):
        where = f"cells[{i}]"
        # A cell may carry its coordinates under the axis names (rca.sweep.SweepCell.to_dict()).
        for axis in ("x", "y"):
            if axis not in c and ctx[axis]["name"] in c:
                c[axis] = c[ctx[axis]["name"]]
        complete(c, where, ("x", "y"), {"requests": None})
        if c["x"] not in xs:
            raise ContextError(f"{where}.x: {c['x']!r} is not one of x.values")
        if c["y"] not in ys:
            raise ContextError(f"{where}.y: {c['y']!r} is not one of y.values")
        for m in ctx["metrics"]:
            c.setdefault(m["key"], None)
            need_number(c[m["key"]], f"{where}.{m['key']}")
    return ctx


def check_evaluation_context(context: dict) -> dict:
    """{run, headline?, labels, confusion, per_cause, method_columns, methods, cases?}"""
    ctx = clean_floats(need_mapping(context, "context"))
    _run(ctx)
    for key in ("labels", "confusion", "per_cause", "method_columns", "methods"):
        if key not in ctx:
            raise ContextError(f"context: missing key {key!r}")
    ctx.setdefault("cases", [])
    labels = need_list(ctx["labels"], "labels")
    matrix = need_list(ctx["confusion"], "confusion")
    if len(matrix) != len(labels):
        raise ContextError(f"confusion: {len(matrix)} rows for {len(labels)} labels")
    for i, row in enumerate(matrix):
        row = need_list(row, f"confusion[{i}]")
        if len(row) != len(labels):
            raise ContextError(f"confusion[{i}]: {len(row)} columns for {len(labels)} labels")
        for j, v in enumerate(row):
            need_number(v, f"confusion[{i}][{j}]", allow_none=False)
        matrix[i] = row
    ctx["labels"], ctx["confusion"] = labels, matrix
    ctx["per_cause"] = need_list(ctx["per_cause"], "per_cause")
    for i, p in enumerate(ctx["per_cause"]):
        complete(p, f"per_cause[{i}]", ("cause", "precision", "recall", "f1"), {"support": None})
        for key in ("precision", "recall", "f1"):
            if p[key] is not None:
                need_share(p[key], f"per_cause[{i}].{key}")
    ctx["method_columns"] = [complete(c, f"method_columns[{i}]", ("key", "label"), {"unit": "", "better": "higher"})
                             for i, c in enumerate(need_list(ctx["method_columns"], "method_columns"))]
    for i, c in enumerate(ctx["method_columns"]):
        _one_of(c["better"], ("higher", "lower"), f"method_columns[{i}].better")
    ctx["methods"] = need_list(ctx["methods"], "methods")
    for i, m in enumerate(ctx["methods"]):
        complete(m, f"methods[{i}]", ("method",), {"note": ""})
        for col in ctx["method_columns"]:
            m.setdefault(col["key"], None)
            need_number(m[col["key"]], f"methods[{i}].{col['key']}")
    ctx["cases"] = need_list(ctx["cases"], "cases")
    for i, c in enumerate(ctx["cases"]):
        complete(c, f"cases[{i}]", ("run_id", "truth", "predicted"), {"fault_kind": None, "detected": None})
        _optional_href(c, "href", f"cases[{i}]")
    return ctx
