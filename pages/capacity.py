"""The capacity page: the steps of a sweep against load, the knee, and the cause of the slowdown
past it.

A sweep is stored in the warehouse (`capacity_steps`, one row per load step, written by
flows/capacity.py); each step is a full run with its own report, spikes and causes. The page is
built from those rows and each step run's stored spikes and engine queue, so any sweep can be
re-rendered from the warehouse alone. The words (each step's cause, the headline) are written here.
Steps are kept in load order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pages.fields import ContextError, finite, iso_utc, one_of, relative_href
from pages.from_mapping import from_mapping
from pages.index import ReportEntry
from pages.run_header import RunHeader
from warehouse.db import connect
from warehouse.queries import query

KNEE_STATUSES = ("found", "not_reached", "below_range")
# Figures per step the page tables and charts read (rca.capacity.step_metrics keys).
STEP_METRICS = (
    "request_throughput",
    "output_throughput",
    "goodput",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
)


@dataclass(frozen=True)
class Knee:
    """Where the SLO stops holding (rca.capacity.Knee)."""

    capacity: float | None  # highest load passing, every lower one passing too
    first_fail: float | None  # lowest failing load above it (None: none failed)
    status: str  # one of KNEE_STATUSES
    capacity_run_id: str | None = None
    first_fail_run_id: str | None = None

    def __post_init__(self) -> None:
        one_of(self.status, KNEE_STATUSES, "status")


@dataclass(frozen=True)
class StepCause:
    """What the page says about a step's slowdown (flows.capacity._step_cause)."""

    label: str  # e.g. "memory (80% of the excess)", "load (queueing)"
    past_knee: bool  # the step lies above the capacity
    cause: str | None = None  # the attributed cause; None: none named
    note: str = ""  # the worst spike's summary and/or the queue's reading
    spikes: int = 0  # spikes detected in the step's run


@dataclass(frozen=True)
class CapacityStep:
    """One load step (rca.capacity.StepOutcome) with its cause and the link to its run's report."""

    load: float
    run_id: str
    passed: bool
    metrics: Mapping[str, float | None]  # STEP_METRICS at least (missing ones become None)
    cause: StepCause
    attainment: float | None = None  # good / judged requests (None: nothing judged)
    judged: int | None = None
    good_requests: int | None = None
    run_status: str | None = None  # the step's run status (ok | invalid | failed)
    run_note: str = ""  # why, when not ok
    report_href: str | None = None  # relative link to the step's incident page
    queue: Mapping[str, Any] | None = None  # the engine's queue figures (capacity_queueing.sql)

    def __post_init__(self) -> None:
        # NaN and ±inf → None; an int stays an int (the charts' JSON shows what was measured)
        metrics = {k: finite(v) if isinstance(v, float) else v for k, v in self.metrics.items()}
        object.__setattr__(self, "metrics", {**{k: None for k in STEP_METRICS}, **metrics})
        if self.report_href is not None:
            object.__setattr__(self, "report_href", relative_href(self.report_href, "report_href"))


@dataclass(frozen=True)
class CapacityContext:
    """Everything the capacity page shows; at least one step, in load order."""

    run: RunHeader  # the sweep: its id, command, scenario, start
    kind: Literal["users", "rate"]  # closed loop (users) or open loop (requests/s)
    slo_text: str  # e.g. "TTFT ≤ 150 ms for ≥ 90% of requests"
    attainment: float  # share of judged requests that must meet the SLO
    knee: Knee
    steps: tuple[CapacityStep, ...]
    slo: Mapping[str, float] | None = None  # objective → limit in ms (the charts' dashed lines)
    load_unit: str = ""  # "users" | "requests/s" (derived from kind when "")
    search: bool = False  # the loads were searched, not chosen
    headline: str = ""

    def __post_init__(self) -> None:
        if not self.steps:
            raise ContextError("steps", "a sweep has at least one step")
        object.__setattr__(self, "steps", tuple(sorted(self.steps, key=lambda s: s.load)))
        if not self.load_unit:
            object.__setattr__(self, "load_unit", load_unit(self.kind))
        if not self.headline.strip():
            object.__setattr__(self, "headline", capacity_headline(self))

    def entry(self) -> ReportEntry:
        """The page's report.json: the cause named past the knee, if any."""
        past = [s for s in self.steps if s.cause.past_knee and s.cause.cause]
        return ReportEntry.of(
            self.run,
            "capacity",
            top_cause=past[0].cause.cause if past else None,
            headline=self.headline,
        )


def load_unit(kind: str) -> str:
    return "users" if kind == "users" else "requests/s"


def capacity_headline(ctx: CapacityContext) -> str:
    """The capacity and where the SLO fails, the causes past the knee; or why there is no knee."""
    knee, unit, slo = ctx.knee, ctx.load_unit, ctx.slo_text
    if knee.status == "found":
        text = (
            f"Capacity {knee.capacity:g} {unit}: the SLO ({slo}) holds up to "
            f"{knee.capacity:g} and fails from {knee.first_fail:g} {unit}."
        )
        named = sorted({s.cause.label for s in ctx.steps if s.cause.past_knee})
        return text + (f" Past the knee: {'; '.join(named)}." if named else "")
    if knee.status == "not_reached":
        return (
            f"Every step met the SLO ({slo}), up to {knee.capacity:g} {unit}: the knee lies "
            "beyond the loads tried."
        )
    return f"Even the lowest step ({ctx.steps[0].load:g} {unit}) missed the SLO ({slo})."


def step_cause(
    spikes: list[dict], queueing: bool | None, queueing_note: str, past_knee: bool
) -> dict:
    """What the page says about a step's slowdown: its worst spike's cause (capacity_spikes.sql
    rows, worst first), else the engine's queue (rca.capacity.queueing_reading, stored)."""
    if spikes:
        worst = spikes[0]
        share = (
            f" ({worst['top_share']:.0%} of the excess)"
            if worst.get("top_share") is not None
            else ""
        )
        # The spike explains the step's worst moment; queueing, when the engine shows it, is
        # what keeps the whole step slow, so both are said.
        notes = [worst.get("summary") or ""] + ([queueing_note] if queueing else [])
        return {
            "cause": worst["top_cause"],
            "label": f"{worst['top_cause']}{share}",
            "note": "; ".join(n for n in notes if n),
            "spikes": len(spikes),
            "past_knee": past_knee,
        }
    return {
        "cause": "load" if queueing else None,
        "label": "load (queueing)" if queueing else "no spike detected",
        "note": "no spike detected; " + queueing_note,
        "spikes": 0,
        "past_knee": past_knee,
    }


def _knee(row: Mapping[str, Any]) -> dict:
    """The knee as every step row of the sweep repeats it (rca.capacity.find_knee's status)."""
    capacity, first_fail = row["capacity"], row["first_fail"]
    status = "below_range" if capacity is None else "not_reached" if first_fail is None else "found"
    return {
        "capacity": capacity,
        "first_fail": first_fail,
        "status": status,
        "capacity_run_id": row["capacity_run_id"],
        "first_fail_run_id": row["first_fail_run_id"],
    }


def _report_href(run_id: str, reports_root: Path | None, out_dir: Path | None) -> str | None:
    """The step run's incident page relative to the sweep's page (`out_dir`, default
    reports_root/<sweep_id>); None when reports_root is given and the page is not there."""
    if reports_root is None:
        return f"../{run_id}/index.html"
    page = reports_root / run_id / "index.html"
    if not page.is_file():
        return None  # the step's run died before its report: no dead link
    return Path(os.path.relpath(page, out_dir)).as_posix() if out_dir else f"../{run_id}/index.html"


def build_capacity_context(
    db_path: str | Path,
    sweep_id: str,
    reports_root: Path | None = None,
    out_dir: Path | None = None,
) -> CapacityContext:
    """The page of a stored sweep (capacity_steps) with its step runs' spikes and queues; a step
    links to its run's page (only when it exists under `reports_root`, when given). KeyError when
    the sweep is not in the warehouse."""
    with connect(db_path, read_only=True) as conn:
        rows = query(conn, "capacity_sweep", sweep_id=sweep_id)
        if not rows:
            raise KeyError(f"capacity sweep {sweep_id!r} is not in the warehouse")
        spikes = {r["run_id"]: query(conn, "capacity_spikes", run_id=r["run_id"]) for r in rows}
        queues = {r["run_id"]: query(conn, "capacity_queueing", run_id=r["run_id"]) for r in rows}
    first, knee = rows[0], _knee(rows[0])
    past = knee["capacity"] if knee["capacity"] is not None else float("-inf")
    steps = [
        {
            "load": r["load"],
            "run_id": r["run_id"],
            "passed": r["passed"],
            "metrics": json.loads(r["metrics"]) if r["metrics"] else {},
            "attainment": r["attainment"],
            "judged": r["judged"],
            "good_requests": r["good_requests"],
            "run_status": r["run_status"],
            "run_note": r["run_note"] or "",
            "cause": step_cause(
                spikes[r["run_id"]], r["queueing"], r["queueing_note"] or "", r["load"] > past
            ),
            "queue": queues[r["run_id"]][0] if queues[r["run_id"]] else None,
            "report_href": _report_href(r["run_id"], reports_root, out_dir),
        }
        for r in rows
    ]
    return context_from_sweep(
        {
            "sweep_id": sweep_id,
            "scenario_name": first["scenario_name"],
            "kind": first["load_kind"],
            "slo": json.loads(first["slo"]) if first["slo"] else {},
            "attainment": first["target_attainment"],
            "knee": knee,
            "steps": steps,
            "command": first["command"] or "",
            "search": bool(first["search"]),
            "started_at": iso_utc(first["started_ns"]),
        }
    )


def context_from_sweep(sweep: Mapping[str, Any]) -> CapacityContext:
    """The page of a sweep given as plain data (the keys build_capacity_context reads from the
    warehouse); a ContextError names its first bad key."""
    slo_text = ", ".join(
        f"{k.removesuffix('_ms').upper()} ≤ {v:g} ms" for k, v in sweep["slo"].items()
    )
    slo_text += f" for ≥ {sweep['attainment']:.0%} of requests"
    run = RunHeader(
        run_id=sweep["sweep_id"],
        command=sweep["command"],
        scenario_name=sweep["scenario_name"],
        started_at=sweep.get("started_at"),
    )
    return from_mapping(
        CapacityContext,
        {
            "run": asdict(run),
            "kind": sweep["kind"],
            "slo": sweep["slo"],
            "slo_text": slo_text,
            "attainment": sweep["attainment"],
            "knee": sweep["knee"],
            "search": sweep["search"],
            "steps": sweep["steps"],
        },
    )
