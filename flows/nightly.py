"""`nightly_regression`: run the nightly scenarios and judge each against its baseline.

Per scenario: an incident run (engine, load, warehouse, causes, report) with kind `nightly`, then a
bootstrap comparison per metric against the rolling window of the last N passing nightlies of the
same scenario (or a pinned run). Verdicts go to DuckDB (`nightly_verdicts`), to Prefect artifacts
(a markdown summary and a table) and to the nightly report. A regression makes the CLI exit 1.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from flows.incident import incident_replay
from flows.nightly_config import METRICS, NightlyConfig
from flows.paths import StatePaths
from flows.tasks import progress, refresh_index


def default_config_dir() -> Path:
    return Path(str(resources.files("scenarios") / "nightly"))


@dataclass
class ScenarioVerdict:
    scenario_name: str
    run_id: str
    report: str | None
    baseline_runs: list[str]
    verdicts: list[dict]

    @property
    def regressed(self) -> list[str]:
        return [v["metric"] for v in self.verdicts if v["verdict"] == "regressed"]


@dataclass
class NightlyResult:
    scenarios: list[ScenarioVerdict] = field(default_factory=list)
    report: str | None = None

    @property
    def regressed(self) -> bool:
        return any(s.regressed for s in self.scenarios)


@task(name="find-baseline", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def find_baseline(db_path: Path, scenario_name: str, before_ns: int,
                  config: NightlyConfig) -> list[str]:
    """The pinned run, or the last N passing nightlies of this scenario before `before_ns`."""
    if config.baseline == "pinned":
        return [config.pinned_run_id]
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        rows = query(conn, "nightly_baseline_runs", scenario_name=scenario_name,
                     before_ns=before_ns, last_n=config.last_n)
    return [r["run_id"] for r in rows]


@task(name="compare-with-baseline", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def compare(db_path: Path, scenario_name: str, run_id: str, baseline_runs: list[str],
            config: NightlyConfig) -> list[dict]:
    """Bootstrap verdict per metric; stored in nightly_verdicts."""
    from rca.compare import MetricVerdict, compare_runs, store_verdicts

    metrics = {m: METRICS[m] for m in config.metrics}
    if baseline_runs:
        verdicts = compare_runs(db_path, run_id, baseline_runs, metrics, config.thresholds,
                                reps=config.bootstrap_reps, noise_guard=config.noise_guard)
    else:   # the first nightly of a scenario becomes the baseline of the next
        nan = float("nan")
        verdicts = [MetricVerdict(m, nan, nan, nan, nan, nan, nan, "insufficient", 0, 0)
                    for m in metrics]
    store_verdicts(db_path, run_id, scenario_name, verdicts, baseline_runs)
    return [v.to_dict() for v in verdicts]


def _fmt(x: float) -> str:
    return "–" if x != x else f"{x:,.2f}"


@task(name="publish-artifacts", cache_policy=NONE)
def publish(result: NightlyResult) -> None:
    """Markdown summary + a table per scenario in Prefect's UI, linking to the report."""
    lines = ["# Nightly regression", ""]
    for s in result.scenarios:
        status = f"**regressed**: {', '.join(s.regressed)}" if s.regressed else "no regression"
        lines.append(f"- `{s.scenario_name}` run `{s.run_id}`: {status} "
                     f"(baseline: {len(s.baseline_runs)} run(s))")
        create_table_artifact(
            key=f"nightly-{s.scenario_name}".lower().replace("_", "-")[:60],
            table=[{"metric": v["metric"], "baseline": _fmt(v["baseline"]),
                    "candidate": _fmt(v["candidate"]), "delta": _fmt(v["delta"]),
                    "ci": f"[{_fmt(v['ci_low'])}, {_fmt(v['ci_high'])}]",
                    "run noise": _fmt(v["run_noise"]), "verdict": v["verdict"]} for v in s.verdicts],
            description=f"{s.scenario_name}: candidate {s.run_id}")
    if result.report:
        lines += ["", f"Report: [{result.report}](file://{result.report})"]
    create_markdown_artifact(key="nightly-summary", markdown="\n".join(lines),
                             description="spikelens nightly regression")


@task(name="render-nightly-report", cache_policy=NONE)
def render_nightly_report(db_path: Path, run_id: str, out_dir: Path) -> Path:
    """The nightly page of one scenario's run: verdict per metric with its CI, and trends."""
    from pages.nightly import build_nightly_context
    from templates.render import render_nightly

    return render_nightly(build_nightly_context(db_path, run_id), out_dir, index_href="../../index.html")


@flow(name="nightly-regression")
def nightly_regression(config_dir: str | None = None, state_home: str | None = None,
                       pinned_run_id: str | None = None) -> NightlyResult:
    """Run every nightly scenario and compare each with its baseline."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    config = NightlyConfig.load(config_dir or default_config_dir())
    if pinned_run_id:
        config = NightlyConfig(**{**config.__dict__, "baseline": "pinned",
                                  "pinned_run_id": pinned_run_id})
    result = NightlyResult()
    for scenario_path in config.scenarios:
        started_ns = time.time_ns()
        run = incident_replay(str(scenario_path), state_home=str(paths.home), kind="nightly")
        scenario_name = run.scenario_name
        baseline = find_baseline(paths.warehouse, scenario_name, started_ns, config)
        progress.info("comparing %s with %d baseline run(s)", scenario_name, len(baseline))
        verdicts = compare(paths.warehouse, scenario_name, run.run_id, baseline, config)
        page = render_nightly_report(paths.warehouse, run.run_id,
                                     paths.reports / run.run_id / "nightly")
        result.scenarios.append(ScenarioVerdict(scenario_name, run.run_id, str(page),
                                                baseline, verdicts))
    result.report = result.scenarios[-1].report if result.scenarios else None
    refresh_index(paths.reports)
    publish(result)
    return result
