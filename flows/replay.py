"""Replay a recorded run: the same arrival times, request mix and sampling parameters, optionally
against another engine config or an external URL, compared metric by metric with the original.

The recorded run's scenario (from its run.json) is the starting point; its load becomes a
`replay` of its own requests.parquet, so the new run sends what the original sent, when it sent
it. Engine faults are injected again when spikelens starts the engine (to reproduce the incident)
and dropped against an external target (we cannot inject into an engine we did not start):
only the kinds the catalogue allows on a target (loadgen's and the proxy's) stay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from prefect import flow, task
from prefect.cache_policies import NONE

from flows.manifest import RunManifest
from flows.nightly_config import METRICS, Thresholds
from flows.paths import StatePaths
from flows.run_scenario import run_scenario
from flows.scenario import deep_merge
from flows.tasks import progress, refresh_index
from spikelens_common.fault_catalogue import Runtime as RuntimeKey
from spikelens_common.fault_catalogue import kinds_on

# the kinds a target can get (loadgen's and the proxy's): the others need an engine spikelens starts
_TARGET_FAULTS = frozenset(kinds_on(RuntimeKey.TARGET))


@dataclass
class ReplayResult:
    run_id: str
    original_run_id: str
    report: str | None
    comparison_report: str | None
    verdicts: list[dict]
    reproduction: list[str] = field(default_factory=list)  # an incident's replay: one line a spike


def replay_scenario(
    original: RunManifest, original_dir: Path, engine_overrides: dict | None, target: str | None
) -> dict:
    """The scenario mapping of a replay of `original` (pure)."""
    raw = dict(original.scenario)
    raw["name"] = f"replay of {original.scenario_name}"
    raw["load"] = {"shape": "replay", "trace": str(original_dir)}
    if target:
        raw.pop("engine", None)
        raw["target"] = target
        raw["faults"] = [f for f in raw.get("faults") or [] if f.get("kind") in _TARGET_FAULTS]
    elif engine_overrides:
        raw["engine"] = deep_merge(raw.get("engine") or {}, engine_overrides)
    return raw


def incident_replay_scenario(
    incident: RunManifest, trace: Path, engine: dict | None, target: str | None
) -> dict:
    """The scenario mapping of a replay of an incident imported from Prometheus (pure): its
    window's length, the requests built from its counters (a Mooncake trace whose times start at
    the window's start), no warm-up, so the replay's time axis is the incident's, and the
    incident's detector preset, so the replay is judged as the incident was."""
    raw: dict = {
        "name": f"replay of {incident.run_id}",
        "duration_s": incident.duration_s,
        "warmup_s": 0,
        "load": {"shape": "replay", "trace": str(trace)},
    }
    if "detector" in incident.scenario:
        raw["detector"] = incident.scenario["detector"]
    if target:
        raw["target"] = target
    else:
        raw["engine"] = dict(engine or {})
    return raw


@task(name="build-incident-trace", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def build_incident_trace(db_path: Path, run_id: str, window_s: float, out: Path) -> Path:
    """The incident's requests (warehouse.incident_workload) as a trace the replay shape reads."""
    from loadgen.trace_formats import write_mooncake_jsonl
    from warehouse.db import connect
    from warehouse.incident_workload import incident_requests

    with connect(db_path, read_only=True) as conn:
        requests = incident_requests(conn, run_id, window_s)
    progress.info("%d requests rebuilt from %s's counters", len(requests), run_id)
    return write_mooncake_jsonl(out, [(r.t_s, r.prompt_tokens, r.output_tokens) for r in requests])


@task(name="compare-spikes-with-incident", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def compare_with_incident(db_path: Path, replay_run_id: str, incident_run_id: str) -> list:
    """rca.reproduction of the incident's reported spikes by the replay's."""
    from rca.reproduction import reproduction
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        production = query(conn, "spikes", run_id=incident_run_id)
        replayed = query(conn, "spikes", run_id=replay_run_id)
    return reproduction(production, replayed)


@task(name="compare-with-original", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def compare_with_original(db_path: Path, replay_run_id: str, original_run_id: str) -> list[dict]:
    from rca.compare import compare_runs

    return [
        v.to_dict()
        for v in compare_runs(db_path, replay_run_id, [original_run_id], METRICS, Thresholds())
    ]


@task(name="render-replay-comparison", cache_policy=NONE)
def render_comparison(
    db_path: Path, replay_run_id: str, original_run_id: str, verdicts: list[dict], out_dir: Path
) -> Path:
    from pages.nightly import build_replay_context
    from templates.render import render_nightly

    return render_nightly(
        build_replay_context(db_path, replay_run_id, original_run_id, verdicts),
        out_dir,
        index_href="../../index.html",
    )


@flow(name="replay-run")
def replay_run(
    run_id: str,
    engine_overrides: dict | None = None,
    target: str | None = None,
    state_home: str | None = None,
) -> ReplayResult:
    """Replay recorded run `run_id` and compare the replay with it."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    original_dir = paths.run_dir(run_id)
    if (
        not (original_dir / "run.json").is_file()
        or not (original_dir / "requests.parquet").is_file()
    ):
        raise FileNotFoundError(f"run {run_id}: no run.json/requests.parquet in {original_dir}")
    original = RunManifest.read(original_dir)
    scenario = replay_scenario(original, original_dir, engine_overrides, target)
    scenario_file = paths.home / "replays" / f"{run_id}.yaml"
    scenario_file.parent.mkdir(parents=True, exist_ok=True)
    scenario_file.write_text(yaml.safe_dump(scenario, sort_keys=False))
    progress.info("replaying %s (%s)", run_id, "target " + target if target else "engine")
    run = run_scenario(str(scenario_file), state_home=str(paths.home), kind="replay")
    verdicts = compare_with_original(paths.warehouse, run.run_id, run_id)
    comparison = render_comparison(
        paths.warehouse, run.run_id, run_id, verdicts, paths.reports / run.run_id / "vs-original"
    )
    refresh_index(paths.reports)
    (paths.run_dir(run.run_id) / "replay_of.json").write_text(
        json.dumps(
            {"original_run_id": run_id, "engine_overrides": engine_overrides, "target": target},
            indent=2,
        )
    )
    return ReplayResult(
        run.run_id, run_id, str(run.report) if run.report else None, str(comparison), verdicts
    )


def replayable_incident(
    paths: StatePaths, run_id: str, engine: dict | None, target: str | None
) -> RunManifest:
    """The manifest of incident `run_id`, after checking that it can be replayed: it exists, it
    was imported from Prometheus, and an engine or a target was given. Raises ValueError in one
    line (the CLI checks before any work; the flow again)."""
    incident_dir = paths.run_dir(run_id)
    if not (incident_dir / "run.json").is_file():
        raise ValueError(f"run {run_id}: no run.json in {incident_dir}")
    incident = RunManifest.read(incident_dir)
    if incident.kind != "observed":
        raise ValueError(
            f"run {run_id} is a {incident.kind} run, not an incident imported from Prometheus:"
            f" replay it with `spikelens replay {run_id}`"
        )
    if not target and not (engine or {}).get("model"):
        raise ValueError(
            "an incident imported from Prometheus names no engine spikelens can start: give"
            " --engine '{\"model\": DIR}' or --target URL"
        )
    return incident


@flow(name="replay-incident")
def replay_incident(
    run_id: str,
    engine: dict | None = None,
    target: str | None = None,
    state_home: str | None = None,
) -> ReplayResult:
    """Replay an incident imported from Prometheus (`spikelens incident`) from its counters
    against an engine spikelens starts (`engine`: its config, a model at least) or `target`, and
    say which of its spikes came back (rca.reproduction)."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    incident = replayable_incident(paths, run_id, engine, target)
    window_s = float((incident.engine or {}).get("step_s") or 1.0)
    trace = build_incident_trace(
        paths.warehouse, run_id, window_s, paths.home / "replays" / f"{run_id}.jsonl"
    )
    scenario_file = paths.home / "replays" / f"{run_id}.yaml"
    scenario = incident_replay_scenario(incident, trace, engine, target)
    scenario_file.write_text(yaml.safe_dump(scenario, sort_keys=False))
    progress.info("replaying incident %s (%s)", run_id, "target " + target if target else "engine")
    run = run_scenario(str(scenario_file), state_home=str(paths.home), kind="replay")
    found = compare_with_incident(paths.warehouse, run.run_id, run_id)
    (paths.run_dir(run.run_id) / "replay_of.json").write_text(
        json.dumps(
            {
                "original_run_id": run_id,
                "from_incident": True,
                "engine": engine,
                "target": target,
                "reproduction": [r.to_dict() for r in found],
            },
            indent=2,
        )
    )
    return ReplayResult(
        run.run_id,
        run_id,
        str(run.report) if run.report else None,
        None,
        [],
        [r.line() for r in found],
    )
