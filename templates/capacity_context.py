"""The capacity page's context: the steps of a sweep against load, the knee, the causes past it.

`capacity_context(sweep)` turns flows/capacity.py's sweep summary (plain data) into the page's
context; `check_capacity_context` checks its shape (same contract as templates/page_contexts.py:
a completed deep copy, ContextError naming the first bad key). Pure.
"""
from __future__ import annotations

from templates.context_checks import (ContextError, clean_floats, complete, need_list,
                                      need_mapping, need_number, relative_href)

KNEE_STATUSES = ("found", "not_reached", "below_range")
# Figures per step the page tables and charts read (rca.capacity.step_metrics keys).
STEP_METRICS = ("request_throughput", "output_throughput", "goodput", "ttft_p50_ms", "ttft_p90_ms",
                "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p99_ms",
                "e2e_p50_ms", "e2e_p99_ms")


def _unit(kind: str) -> str:
    return "users" if kind == "users" else "requests/s"


def _headline(ctx: dict) -> str:
    knee, unit, slo = ctx["knee"], ctx["load_unit"], ctx["slo_text"]
    if knee["status"] == "found":
        text = (f"Capacity {knee['capacity']:g} {unit}: the SLO ({slo}) holds up to "
                f"{knee['capacity']:g} and fails from {knee['first_fail']:g} {unit}.")
        past = [s for s in ctx["steps"] if s["cause"]["past_knee"]]
        named = sorted({s["cause"]["label"] for s in past})
        return text + (f" Past the knee: {'; '.join(named)}." if named else "")
    if knee["status"] == "not_reached":
        return (f"Every step met the SLO ({slo}), up to {knee['capacity']:g} {unit}: the knee lies "
                "beyond the loads tried.")
    lowest = min(s["load"] for s in ctx["steps"])
    return f"Even the lowest step ({lowest:g} {unit}) missed the SLO ({slo})."


def capacity_context(sweep: dict) -> dict:
    """The page context from flows.capacity.sweep_summary's dict."""
    slo_text = ", ".join(f"{k.removesuffix('_ms').upper()} ≤ {v:g} ms" for k, v in sweep["slo"].items())
    slo_text += f" for ≥ {sweep['attainment']:.0%} of requests"
    ctx = {"run": {"run_id": sweep["sweep_id"], "command": sweep["command"],
                   "scenario_name": sweep["scenario_name"], "started_at": sweep.get("started_at")},
           "kind": sweep["kind"], "load_unit": _unit(sweep["kind"]), "slo": sweep["slo"],
           "slo_text": slo_text, "attainment": sweep["attainment"], "knee": sweep["knee"],
           "search": sweep["search"], "steps": sweep["steps"]}
    ctx["headline"] = _headline(ctx)
    return ctx


def check_capacity_context(context: dict) -> dict:
    """{run, kind, load_unit, slo_text, attainment, knee, steps: [...], headline?} → completed copy."""
    ctx = clean_floats(need_mapping(context, "context"))
    for key in ("run", "kind", "knee", "steps", "slo_text", "attainment"):
        if key not in ctx:
            raise ContextError(f"context: missing key {key!r}")
    complete(ctx["run"], "run", ("run_id", "command"), {"scenario_name": "", "started_at": None, "git_commit": None,
                                                       "host": None, "status": None, "scenario_yaml": ""})
    ctx.setdefault("headline", "")
    ctx.setdefault("load_unit", _unit(ctx["kind"]))
    ctx.setdefault("search", False)
    knee = complete(ctx["knee"], "knee", ("capacity", "first_fail", "status"),
                    {"capacity_run_id": None, "first_fail_run_id": None})
    if knee["status"] not in KNEE_STATUSES:
        raise ContextError(f"knee.status: must be one of {', '.join(KNEE_STATUSES)}; got {knee['status']!r}")
    ctx["steps"] = need_list(ctx["steps"], "steps")
    if not ctx["steps"]:
        raise ContextError("steps: a sweep has at least one step")
    for i, s in enumerate(ctx["steps"]):
        where = f"steps[{i}]"
        complete(s, where, ("load", "run_id", "passed", "metrics", "cause"),
                 {"attainment": None, "judged": None, "good_requests": None, "run_status": None, "run_note": "",
                  "report_href": None, "queue": None})
        need_number(s["load"], f"{where}.load", allow_none=False)
        for key in STEP_METRICS:
            s["metrics"].setdefault(key, None)
            need_number(s["metrics"][key], f"{where}.metrics.{key}")
        complete(s["cause"], f"{where}.cause", ("label", "past_knee"),
                 {"cause": None, "note": "", "spikes": 0})
        if s["report_href"] is not None:
            s["report_href"] = relative_href(s["report_href"], f"{where}.report_href")
    ctx["steps"].sort(key=lambda s: s["load"])
    return ctx
