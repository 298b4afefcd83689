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
from dataclasses import dataclass
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
