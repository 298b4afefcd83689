"""`capacity_sweep`: run a scenario at increasing load, find the highest load that meets an SLO.

Each load step is a full incident run (flows/run_scenario.py, with the load overridden), so every
step has its own report, spikes and causes. A step passes when enough of its requests meet the
SLO (rca/capacity.py: vLLM's goodput definition, as an attainment share); the knee lies between
the capacity (the highest load passing with every lower step passing) and the next, failing step.
Steps and the knee go to the warehouse (`capacity_steps`), with what the page needs beyond the
figures (each step's run status and the engine queue's reading), so the nightly can judge a
capacity drop as a regression and pages/capacity.py builds the page from the warehouse alone.

Loads: an explicit list (`loads`), or a search (doubling from `search.start` until a step fails,
then bisecting between the last pass and the first fail, at most `search.max_steps` runs). A
step whose run raises once started (the engine died under the load) is a failed step, shown with
its error; the sweep goes on.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from flows.paths import StatePaths
from flows.run_scenario import run_scenario
from flows.scenario import load_scenario
from flows.tasks import progress, refresh_index
from pages.capacity import CapacityContext, build_capacity_context
from rca.capacity import (
    SearchOptions,
    StepOutcome,
    find_knee,
    judge_step,
    next_search_load,
    queueing_reading,
    step_metrics,
)

DEFAULT_ATTAINMENT = 0.9  # DistServe's and vLLM's usual goodput target: 90 % of requests in SLO


@dataclass(frozen=True)
class CapacityOptions:
    """What to sweep and what counts as meeting the SLO."""

    kind: str = "users"  # users (closed loop) | rate (open loop, requests/s)
    loads: tuple[float, ...] = ()  # explicit steps; empty = search
    search: SearchOptions = field(default_factory=SearchOptions)
    slo: dict | None = None  # {ttft_ms, tpot_ms, e2e_ms}; None = the scenario's slo:
    attainment: float = DEFAULT_ATTAINMENT  # share of judged requests that must meet the SLO


@dataclass
class CapacityResult:
    sweep_id: str
    scenario_name: str
    kind: str
    steps: list[dict]
    knee: dict
    report: str


class CapacityError(ValueError):
    """A sweep that cannot start (no SLO, a load kind the scenario cannot take): names the field."""


def resolve_slo(scenario_path: str, options: CapacityOptions) -> dict:
    """The SLO of the sweep: the CLI's, else the scenario's `slo:` block; validated up front."""
    from loadgen.metrics import SLO

    scenario = load_scenario(scenario_path)
    slo = options.slo if options.slo is not None else scenario.raw.get("slo")
    if not slo:
        raise CapacityError(
            f"{scenario_path}: slo: a capacity sweep needs an SLO: a `slo:` block "
            "in the scenario (e.g. {ttft_ms: 500}) or --slo ttft_ms=500,tpot_ms=50"
        )
    SLO.from_dict(slo, where="slo")
    if not 0 < options.attainment <= 1:
        raise CapacityError(f"attainment: must be in (0, 1], got {options.attainment}")
    return dict(slo)


def load_override(kind: str, load: float) -> dict:
    """The scenario override of one step: a constant closed loop, or a Poisson open loop."""
    if kind == "users":
        return {"shape": "constant", "users": int(load)}
    return {"shape": "poisson", "rate": float(load)}


def new_sweep_id(scenario_name: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^a-z0-9]+", "-", scenario_name.lower()).strip("-")[:32] or "run"
    return f"{stamp}-capacity-{slug}-{secrets.token_hex(2)}"


@task(name="judge-step", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def judge(run_dir: Path, load: float, attainment: float) -> StepOutcome:
    """The step's verdict from the summary its run wrote into run.json."""
    manifest = json.loads((run_dir / "run.json").read_text())
    summary = (manifest.get("extra") or {}).get("summary")
    if not summary:
        raise RuntimeError(
            f"run {manifest['run_id']}: run.json has no load summary "
            f"(status {manifest.get('status')}: {'; '.join(manifest.get('errors') or [])})"
        )
    extra = manifest.get("extra") or {}
    reasons = list((extra.get("client_health") or {}).get("reasons") or []) + list(
        manifest.get("errors") or []
    )
    return judge_step(
        load,
        manifest["run_id"],
        summary,
        attainment,
        manifest.get("status", "ok"),
        "; ".join(reasons),
    )


@task(name="step-evidence", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def step_evidence(db_path: Path, run_id: str) -> dict:
    """The step's spikes (worst first, with the top cause's share) and its engine queue."""
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        spikes = query(conn, "capacity_spikes", run_id=run_id)
        queue = query(conn, "capacity_queueing", run_id=run_id)
    row = queue[0] if queue else None
    return {
        "spikes": spikes[:3],
        "spike_count": len(spikes),
        "queue": row,
        "queueing": queueing_reading(row),
    }


@dataclass(frozen=True)
class SweepRecord:
    """What a sweep stores beside its steps: its id, scenario, SLO, start and command."""

    sweep_id: str
    scenario_name: str
    slo: dict
    started_ns: int
    command: str = ""


def _rows(
    sweep: SweepRecord,
    options: CapacityOptions,
    steps: list[StepOutcome],
    evidence: dict[str, dict],
) -> list[dict]:
    """The sweep's capacity_steps rows, in the order the steps ran."""
    knee = find_knee(steps)
    rows = []
    for i, s in enumerate(steps):
        spikes, queueing = evidence[s.run_id]["spikes"], evidence[s.run_id]["queueing"]
        rows.append(
            {
                "sweep_id": sweep.sweep_id,
                "step": i,
                "scenario_name": sweep.scenario_name,
                "load_kind": options.kind,
                "load": s.load,
                "run_id": s.run_id,
                "metrics": json.dumps(s.metrics),
                "attainment": s.attainment,
                "passed": s.passed,
                "knee": s.run_id == knee.capacity_run_id,
                "capacity": knee.capacity,
                "first_fail": knee.first_fail,
                "slo": json.dumps(sweep.slo),
                "target_attainment": options.attainment,
                "top_cause": spikes[0]["top_cause"] if spikes else None,
                "started_ns": sweep.started_ns,
                "judged": s.judged,
                "good_requests": s.good_requests,
                "run_status": s.run_status,
                "run_note": s.run_note,
                "queueing": queueing["queueing"],
                "queueing_note": queueing["note"],
                "command": sweep.command,
                "search": not options.loads,
            }
        )
    return rows


@task(name="store-capacity", cache_policy=NONE, retries=3, retry_delay_seconds=2)
def store(db_path: Path, rows: list[dict]) -> int:
    """Replace the sweep's rows in capacity_steps (one transaction, warehouse.store)."""
    import pyarrow as pa

    from warehouse.db import connect
    from warehouse.store import replace_rows

    with connect(db_path) as conn:
        replace_rows(
            conn, "sweep_id", rows[0]["sweep_id"], {"capacity_steps": pa.Table.from_pylist(rows)}
        )
    return len(rows)


@task(name="render-capacity-report", cache_policy=NONE)
def render_page(db_path: Path, sweep_id: str, reports_root: Path) -> tuple[CapacityContext, Path]:
    """The sweep's page from the warehouse, at reports_root/<sweep_id>/ (steps link to their
    runs' pages that exist)."""
    from templates.render import render_capacity

    out_dir = reports_root / sweep_id
    ctx = build_capacity_context(db_path, sweep_id, reports_root, out_dir)
    return ctx, render_capacity(ctx, out_dir, index_href="../index.html")


def _fmt(x) -> str:
    return "–" if x is None else f"{x:,.3g}" if isinstance(x, float) else str(x)


@task(name="publish-capacity-artifacts", cache_policy=NONE)
def publish(ctx: CapacityContext, report: Path) -> None:
    """A table of the steps and a markdown summary in Prefect's UI."""
    knee, unit = ctx.knee, "users" if ctx.kind == "users" else "req/s"
    create_table_artifact(
        key=f"capacity-{ctx.run.run_id}".lower()[:60].rstrip("-"),
        table=[
            {
                "load": _fmt(s.load),
                "run": s.run_id,
                "passed": s.passed,
                "attainment": _fmt(s.attainment),
                "req/s": _fmt(s.metrics["request_throughput"]),
                "goodput": _fmt(s.metrics["goodput"]),
                "TTFT p99 ms": _fmt(s.metrics["ttft_p99_ms"]),
                "E2E p99 ms": _fmt(s.metrics["e2e_p99_ms"]),
                "cause": s.cause.label,
            }
            for s in ctx.steps
        ],
        description=f"capacity sweep of {ctx.run.scenario_name}",
    )
    found = (
        f"capacity **{_fmt(knee.capacity)} {unit}**; the knee lies between "
        f"{_fmt(knee.capacity)} and {_fmt(knee.first_fail)} {unit}"
        if knee.status == "found"
        else f"every step met the SLO (up to {_fmt(knee.capacity)} {unit}): the knee is not reached"
        if knee.status == "not_reached"
        else "even the lowest step missed the SLO"
    )
    lines = [
        f"# Capacity sweep: {ctx.run.scenario_name}",
        "",
        f"- {found}",
        f"- SLO {dict(ctx.slo or {})}, attainment ≥ {ctx.attainment:.0%}",
        "",
        f"Report: [{report}](file://{report})",
    ]
    create_markdown_artifact(
        key="capacity-summary", markdown="\n".join(lines), description="spikelens capacity sweep"
    )


def _command(scenario_path: str, options: CapacityOptions) -> str:
    import shlex

    loads = ",".join(f"{x:g}" for x in options.loads)
    how = (
        f"--{'users' if options.kind == 'users' else 'rates'} {loads}"
        if options.loads
        else f"--search {options.kind} --start {options.search.start:g} --max-load "
        f"{options.search.max_load:g} --max-steps {options.search.max_steps}"
    )
    slo = ",".join(f"{k}={v:g}" for k, v in (options.slo or {}).items())
    return (
        f"spikelens capacity {shlex.quote(scenario_path)} {how}"
        + (f" --slo {slo}" if slo else "")
        + f" --attainment {options.attainment:g}"
    )


def _run_step(
    paths: StatePaths, scenario_path: str, options: CapacityOptions, slo: dict, load: float
) -> StepOutcome:
    """One load step as a full incident run. A run that fails once started (the engine died
    under the load, a timeout) is a failed step, not the end of the sweep: what it collected is
    judged, and the error is shown beside the step."""
    started_ns = time.time_ns()
    try:
        run = run_scenario(
            scenario_path,
            state_home=str(paths.home),
            kind="capacity",
            overrides={"load": load_override(options.kind, load), "slo": slo},
        )
    except Exception as e:
        run_dir = newest_run_since(paths.runs, started_ns)
        if run_dir is None:
            raise  # nothing started: a broken setup, not a property of the load
        progress.info("capacity step at %g failed: %s", load, e)
        return failed_step(run_dir, load, options.attainment, e)
    return judge(run.run_dir, load, options.attainment)


def newest_run_since(runs_root: Path, since_ns: int) -> Path | None:
    """The newest capacity run directory whose run.json says it started at or after `since_ns`."""
    found = []
    for manifest in runs_root.glob("*/run.json"):
        try:
            meta = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        if meta.get("kind") == "capacity" and (meta.get("started_ns") or 0) >= since_ns:
            found.append((meta["started_ns"], manifest.parent))
    return max(found)[1] if found else None


def failed_step(run_dir: Path, load: float, attainment: float, error: BaseException) -> StepOutcome:
    """A step whose run raised: judged on its summary when it has one, else nothing passed."""
    manifest = json.loads((run_dir / "run.json").read_text())
    summary = (manifest.get("extra") or {}).get("summary")
    note = "; ".join(list(manifest.get("errors") or []) or [f"{type(error).__name__}: {error}"])
    if summary and "good_requests" in summary:
        return judge_step(load, manifest["run_id"], summary, attainment, "failed", note)
    return StepOutcome(
        float(load), manifest["run_id"], 0, 0, None, False, step_metrics({}), "failed", note
    )


def _next_load(
    planned: list[float], steps: list[StepOutcome], options: CapacityOptions
) -> float | None:
    """The next explicit step (consumed from `planned`), or the search's next load."""
    if options.loads:
        return planned.pop(0) if planned else None
    return next_search_load(steps, options.search)


@flow(name="capacity-sweep")
def capacity_sweep(
    scenario_path: str, options: CapacityOptions = CapacityOptions(), state_home: str | None = None
) -> CapacityResult:
    """Run the scenario at each load step (or a search), find the knee, store and render it."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    slo = resolve_slo(scenario_path, options)
    scenario_name = load_scenario(scenario_path).name
    sweep_id, started_ns = new_sweep_id(scenario_name), time.time_ns()
    steps: list[StepOutcome] = []
    evidence: dict[str, dict] = {}
    planned = list(options.loads)
    while (load := _next_load(planned, steps, options)) is not None:
        progress.info("capacity step %d: %g %s", len(steps) + 1, load, options.kind)
        step = _run_step(paths, scenario_path, options, slo, load)
        steps.append(step)
        evidence[step.run_id] = step_evidence(paths.warehouse, step.run_id)
    record = SweepRecord(sweep_id, scenario_name, slo, started_ns, _command(scenario_path, options))
    store(paths.warehouse, _rows(record, options, steps, evidence))
    ctx, report = render_page(paths.warehouse, sweep_id, paths.reports)
    refresh_index(paths.reports)
    publish(ctx, report)
    return CapacityResult(
        sweep_id,
        scenario_name,
        options.kind,
        [asdict(s) for s in ctx.steps],
        asdict(ctx.knee),
        str(report),
    )
