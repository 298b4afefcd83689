"""`spikelens confirm RUN_ID`: re-run a spike's stretch with its verdict's cause removed and
measure what is left.

The flow only orchestrates: read the run and spike (flows.confirm_source), plan the stretch and
the intervention (flows.interventions), then K times (A B A B …) replay the stretch as recorded
(A) and with the cause removed (B) through `run_scenario` (each arm is a full run: engine,
collectors, load, ingest), measure each arm's spike-window excess from the warehouse, and judge
(rca.confirm). The result is written beside the recorded run (`confirm-<spike>-<cause>.json`,
and `confirmations/<spike>-<cause>.jsonl`, the row a re-ingest reads), to the warehouse
(`confirmations`) and as a page (reports/<run>/confirm-<spike>-<cause>/), which the run's incident
page and the index then link. Where the cause has no intervention
nothing is run and the result says so (inconclusive).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, task
from prefect.cache_policies import NONE

from flows.confirm_source import ConfirmSource, read_source
from flows.interventions import (
    MIN_BASELINE_S,
    BaselineFacts,
    Intervention,
    Stretch,
    TraceEntry,
    apply_to_trace,
    arm_scenario,
    intervention_for,
    plan_stretch,
    recorded_closed_loop,
)
from flows.paths import StatePaths
from flows.priority import RAISED_NICE, why_not
from flows.run_scenario import run_scenario
from flows.tasks import progress, rebuild_index, render_report
from rca.config import DetectConfig, preset


@dataclass
class ConfirmResult:
    run_id: str
    spike_id: int
    metric: str
    cause: str
    stored_cause: str | None
    intervention: dict[str, Any]
    verdict: str
    reason: str
    exit_code: int
    share: dict[str, Any] | None
    arms: list[dict[str, Any]] = field(default_factory=list)
    stretch: dict[str, Any] = field(default_factory=dict)
    report: str | None = None
    json_path: str | None = None
    outside: dict[str, Any] | None = None  # client/network: rca.confirm.OutsideMeasure


@task(name="read-confirm-source", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def load_source(
    db_path: Path, run_dir: Path, run_id: str, spike: int | None, cause: str | None
) -> ConfirmSource:
    """The run, spike and verdict to confirm (ConfirmUsageError on bad input)."""
    return read_source(db_path, run_dir, run_id, spike, cause)


@task(name="baseline-facts", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def baseline_facts(db_path: Path, source: ConfirmSource, stretch: Stretch) -> BaselineFacts:
    """The recorded baseline stretch's median output and arrival rate, and how far before the
    spike its load began arriving (the baseline ends there when that leaves MIN_BASELINE_S)."""
    from warehouse.db import connect
    from warehouse.queries import query

    base_from = max(0.0, stretch.shift_s)  # the arm's measured start, in recorded time
    with connect(db_path, read_only=True) as conn:
        run_id, spike_s = source.run_id, source.spike_start_s
        lead_s = query(conn, "confirm_inflight", run_id=run_id, spike_s=spike_s)[0]["lead_s"]
        base_to = spike_s - lead_s if spike_s - lead_s - base_from >= MIN_BASELINE_S else spike_s
        row = query(conn, "confirm_stretch", run_id=run_id, from_s=base_from, to_s=base_to)[0]
    return BaselineFacts(row["median_output_tokens"], row["arrivals_per_s"], lead_s)


@task(name="write-arm", cache_policy=NONE, retries=1, retry_delay_seconds=1)
def write_arm(
    source: ConfirmSource,
    stretch: Stretch,
    intervention: Intervention | None,
    facts: BaselineFacts,
    out_dir: Path,
    label: str,
) -> Path:
    """The arm's trace (JSONL) and scenario (YAML) files; returns the scenario's path."""
    from loadgen.replay import TraceOptions, load_trace

    replayed = load_trace(
        source.run_dir, TraceOptions(from_s=stretch.trace_from_s, to_s=stretch.trace_to_s)
    )
    entries = [
        TraceEntry(e.t_s, e.prompt_tokens, e.max_tokens, dict(e.sampling), e.user, e.until_s)
        for e in replayed
        if e.prompt_tokens
    ]
    if intervention is not None:
        spike_in_slice = (
            stretch.spike_start_s + stretch.warmup_s,
            stretch.spike_end_s + stretch.warmup_s,
        )
        entries = apply_to_trace(entries, intervention, facts, spike_in_slice)
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = out_dir / f"{label}.jsonl"
    trace.write_text("".join(json.dumps(e.row()) + "\n" for e in entries))
    scenario = out_dir / f"{label}.yaml"
    raw = arm_scenario(source.scenario, stretch, str(trace), intervention)
    scenario.write_text(yaml.safe_dump(raw, sort_keys=False))
    return scenario


@task(name="measure-arm", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def measure(
    db_path: Path, run_id: str, source: ConfirmSource, stretch: Stretch, arm: str, repeat: int
) -> dict[str, Any]:
    """The arm's spike-window excess against its own baseline (rca.confirm.measure_arm)."""
    from rca.confirm import measure_arm
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        windows = query(conn, "windows", run_id=run_id, window_s=1.0)
    spike = (stretch.spike_start_s, stretch.spike_end_s)
    config = detect_settings(source)
    return measure_arm(windows, source.metric, spike, arm, repeat, run_id, config).to_dict()


@task(name="measure-outside", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def measure_outside(db_path: Path, source: ConfirmSource) -> dict[str, Any] | None:
    """Client vs server excess in the recorded run's spike windows (rca.confirm.measure_outside):
    how a client or network cause is confirmed, by measurement rather than a re-run."""
    from rca.confirm import measure_outside as measured
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        transit = query(conn, "transit_windows", run_id=source.run_id, window_s=1.0)
    spike = (source.spike_start_s, source.spike_end_s)
    m = measured(transit, source.metric, spike, detect_settings(source))
    return None if m is None else m.to_dict()


def detect_settings(source: ConfirmSource) -> DetectConfig:
    """rca.config.DetectConfig of the recorded run's preset (its scenario's `detector:`): each
    arm's spike is judged by the thresholds that found it (the arms' scenarios carry it too)."""
    return preset(source.scenario.get("detector", "default"))[0]


def page_dir(result: ConfirmResult) -> str:
    """The confirmation page's folder, relative to the run's report folder."""
    return f"confirm-{result.spike_id}-{result.cause}"


@task(name="render-confirm", cache_policy=NONE)
def render(paths: StatePaths, result: ConfirmResult) -> Path:
    """reports/<run>/confirm-<spike>-<cause>/index.html."""
    from pages.confirm import build_confirm_context
    from templates.render import render_confirm

    out_dir = paths.reports / result.run_id / page_dir(result)
    incident = "../index.html" if (out_dir.parent / "index.html").is_file() else None
    context = build_confirm_context(asdict(result), incident_href=incident)
    return render_confirm(context, out_dir, "../../index.html")


def confirmation_row(result: ConfirmResult, confirmed_ns: int) -> dict[str, Any]:
    """The result as a `confirmations` row (warehouse/schema.sql), less its run_id."""
    share = result.share or {}
    return {
        "spike_id": result.spike_id,
        "cause": result.cause,
        "verdict": result.verdict,
        "reason": result.reason,
        "intervention": result.intervention.get("does") or result.intervention.get("name"),
        "share_removed": share.get("point"),
        "share_low": share.get("low"),
        "share_high": share.get("high"),
        "pairs": share.get("pairs"),
        "confirmed_ns": confirmed_ns,
        "page": f"{page_dir(result)}/index.html",
    }


@task(name="store-confirmation", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def store_confirmation(paths: StatePaths, result: ConfirmResult) -> Path:
    """The result as one JSON line in the run's folder (so a re-ingest keeps it) and as its row
    in `confirmations`; then the run's incident page again, which now links it, and the index."""
    from warehouse.db import connect
    from warehouse.store import replace_rows

    row = confirmation_row(result, time.time_ns())
    folder = paths.run_dir(result.run_id) / "confirmations"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result.spike_id}-{result.cause}.jsonl").write_text(json.dumps(row) + "\n")
    key = (result.run_id, result.spike_id, result.cause)
    with connect(paths.warehouse) as conn:  # this spike's confirmation of this cause, replaced
        replace_rows(
            conn,
            ("run_id", "spike_id", "cause"),
            key,
            {"confirmations": [{"run_id": key[0], **row}]},
        )
    incident = render_report.fn(paths.warehouse, result.run_id, paths.reports / result.run_id)
    rebuild_index(paths.reports)
    return incident


@task(name="publish-confirm-artifacts", cache_policy=NONE)
def publish(result: ConfirmResult) -> None:
    """The arms as a table and the verdict as markdown in Prefect's UI."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    key = f"confirm-{result.run_id}-{result.spike_id}".lower()[:60].rstrip("-")
    create_table_artifact(
        key=key,
        table=[
            {k: a.get(k) for k in ("arm", "repeat", "run_id", "baseline_ms", "excess_ms")}
            for a in result.arms
        ],
        description=f"confirm {result.cause} for spike {result.spike_id} of {result.run_id}",
    )
    share = result.share
    create_markdown_artifact(
        key="confirm-summary",
        markdown=f"# {result.verdict}: {result.cause}, spike {result.spike_id} of {result.run_id}"
        + "\n\n"
        + (
            f"- share removed {share['point']:.0%} [{share['low']:.0%}, {share['high']:.0%}]\n"
            if share
            else ""
        )
        + f"- {result.reason}\n\nReport: [{result.report}](file://{result.report})",
        description="spikelens confirm",
    )


def _judge(
    source: ConfirmSource,
    intervention: Intervention,
    stretch: Stretch,
    arms: list[dict],
    outside: dict[str, Any] | None = None,
) -> ConfirmResult:
    """The share and the verdict from the arms' measures, or for a measured cause from the
    client vs server excess (rca.confirm)."""
    from rca.confirm import ArmMeasure, OutsideMeasure, outside_verdict, share_removed, verdict

    if intervention.name == "measured":
        measured = OutsideMeasure(**outside) if outside is not None else None
        share = measured.share_outside if measured is not None else None
        judged = outside_verdict(measured, source.cause)
    else:
        measures = [ArmMeasure(**{k: v for k, v in a.items() if k != "wall_s"}) for a in arms]
        recorded = [m for m in measures if m.arm == "recorded"]
        share = share_removed(recorded, [m for m in measures if m.arm == "removed"])
        judged = verdict(recorded, share, "" if intervention.available else intervention.reason)
    return ConfirmResult(
        run_id=source.run_id,
        spike_id=source.spike_id,
        metric=source.metric,
        cause=source.cause,
        stored_cause=source.stored_cause,
        intervention=intervention.to_dict(),
        verdict=judged.verdict,
        reason=judged.reason,
        exit_code=judged.exit_code,
        share=asdict(share) if share is not None else None,
        arms=arms,
        stretch=asdict(stretch),
        outside=outside,
    )


def _run_arms(
    paths: StatePaths,
    source: ConfirmSource,
    stretch: Stretch,
    intervention: Intervention,
    repeats: int,
) -> list[dict[str, Any]]:
    """K × (as recorded, cause removed), alternating: each a full run, measured."""
    facts = baseline_facts(paths.warehouse, source, stretch)
    run_id = source.run_id
    out_dir = paths.home / "confirm" / f"{run_id}-{source.spike_id}-{intervention.name}"
    arms: list[dict[str, Any]] = []
    for i in range(repeats):
        for arm, change in (("recorded", None), ("removed", intervention)):
            progress.info("confirm %s: %s arm, repeat %d of %d", run_id, arm, i + 1, repeats)
            scenario = write_arm(source, stretch, change, facts, out_dir, f"{arm}-{i + 1}")
            started = time.monotonic()
            run = run_scenario(str(scenario), state_home=str(paths.home), kind="confirm")
            measured = measure(paths.warehouse, run.run_id, source, stretch, arm, i + 1)
            arms.append({**measured, "wall_s": round(time.monotonic() - started, 1)})
    return arms


@flow(name="confirm-spike")
def confirm_spike(
    run_id: str,
    spike: int | None = None,
    repeats: int = 2,
    cause: str | None = None,
    state_home: str | None = None,
) -> ConfirmResult:
    """Replay spike `spike` of `run_id` K=`repeats` times as recorded and K times with `cause`
    (default: its verdict) removed, alternating, and judge how much of the excess went away."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    source = load_source(paths.warehouse, paths.run_dir(run_id), run_id, spike, cause)
    intervention = intervention_for(
        source.cause,
        source.runtime_kind,
        gc_paused=source.memory_kind == "gc",
        engine=source.scenario.get("engine"),
        priority_denied=why_not(RAISED_NICE),
        loops=source.loops,
        closed_loop=recorded_closed_loop(source.scenario),
    )
    stretch = plan_stretch(
        source.spike_start_s,
        source.spike_end_s,
        source.t0_offset_s,
        source.warmup_s,
        source.trace_end_s,
    )
    arms: list[dict[str, Any]] = []
    outside = None
    if intervention.name == "measured":
        outside = measure_outside(paths.warehouse, source)
    elif intervention.available:
        arms = _run_arms(paths, source, stretch, intervention, repeats)
    else:
        progress.warning("confirm %s: %s", run_id, intervention.reason)
    result = _judge(source, intervention, stretch, arms, outside)
    json_path = paths.run_dir(run_id) / f"confirm-{source.spike_id}-{source.cause}.json"
    result.json_path = str(json_path)
    result.report = str(render(paths, result))
    publish(result)
    json_path.write_text(json.dumps(asdict(result), indent=2, default=str))
    store_confirmation(paths, result)
    return result
