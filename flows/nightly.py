"""`nightly_regression`: run the nightly scenarios and judge each against its baseline.

Per scenario: an incident run (engine, load, warehouse, causes, report) with kind `nightly`, then a
bootstrap comparison per metric against the rolling window of the last N passing nightlies of the
same scenario (or a pinned run). Verdicts go to DuckDB (`nightly_verdicts`), to Prefect artifacts
(a markdown summary and a table) and to the nightly report. A regression makes the CLI exit 1.

Optionally (a `capacity:` block in the config; off in the shipped one, to keep CI short) a
capacity sweep runs last, and a capacity below every recent sweep's by more than `drop_rel` is a
regression like any other (it shows as a `capacity-<scenario>` entry).

With `confirm_repeats: K` (1 in the shipped config) a regressed run's most severe reported spike
is confirmed (`spikelens confirm`, K repeats per arm) before its page is rendered: the nightly
page, the run's incident page and the index then show whether removing the verdict's cause took
the excess away. A regression without a spike (a uniform slowdown) has nothing to confirm.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from flows.nightly_config import METRICS, CapacityCheck, NightlyConfig, default_config_dir
from flows.paths import StatePaths
from flows.run_scenario import run_scenario
from flows.tasks import progress, refresh_index


@dataclass
class ScenarioVerdict:
    scenario_name: str
    run_id: str
    report: str | None
    baseline_runs: list[str]
    verdicts: list[dict]
    confirmation: dict | None = None  # the regressed run's worst spike, confirmed

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
def find_baseline(
    db_path: Path, scenario_name: str, before_ns: int, config: NightlyConfig
) -> list[str]:
    """The pinned run, or the last N passing nightlies of this scenario before `before_ns`."""
    if config.baseline == "pinned":
        if config.pinned_run_id is None:
            raise ValueError("pinned_run_id: required when baseline is pinned")
        return [config.pinned_run_id]
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        rows = query(
            conn,
            "nightly_baseline_runs",
            scenario_name=scenario_name,
            before_ns=before_ns,
            last_n=config.last_n,
        )
    return [r["run_id"] for r in rows]


@task(name="compare-with-baseline", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def compare(
    db_path: Path, scenario_name: str, run_id: str, baseline_runs: list[str], config: NightlyConfig
) -> list[dict]:
    """Bootstrap verdict per metric; stored in nightly_verdicts."""
    from rca.compare import MetricVerdict, compare_runs, store_verdicts

    metrics = {m: METRICS[m] for m in config.metrics}
    if baseline_runs:
        verdicts = compare_runs(
            db_path,
            run_id,
            baseline_runs,
            metrics,
            config.thresholds,
            reps=config.bootstrap_reps,
            noise_guard=config.noise_guard,
        )
    else:  # the first nightly of a scenario becomes the baseline of the next
        nan = float("nan")
        verdicts = [
            MetricVerdict(m, nan, nan, nan, nan, nan, nan, "insufficient", 0, 0) for m in metrics
        ]
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
        lines.append(
            f"- `{s.scenario_name}` run `{s.run_id}`: {status} "
            f"(baseline: {len(s.baseline_runs)} run(s))"
        )
        if (proof := s.confirmation) is not None and proof["spike_id"] is not None:
            lines.append(
                f"  - spike {proof['spike_id']} ({proof['cause']}): **{proof['verdict']}**, "
                f"{proof['reason']}"
            )
        create_table_artifact(
            key=f"nightly-{s.scenario_name}".lower().replace("_", "-")[:60],
            table=[
                {
                    "metric": v["metric"],
                    "baseline": _fmt(v["baseline"]),
                    "candidate": _fmt(v["candidate"]),
                    "delta": _fmt(v["delta"]),
                    "ci": f"[{_fmt(v['ci_low'])}, {_fmt(v['ci_high'])}]",
                    "run noise": _fmt(v["run_noise"]),
                    "verdict": v["verdict"],
                }
                for v in s.verdicts
            ],
            description=f"{s.scenario_name}: candidate {s.run_id}",
        )
    if result.report:
        lines += ["", f"Report: [{result.report}](file://{result.report})"]
    create_markdown_artifact(
        key="nightly-summary", markdown="\n".join(lines), description="spikelens nightly regression"
    )


@task(name="capacity-baseline", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def capacity_baseline(
    db_path: Path, scenario_name: str, check: CapacityCheck, before_ns: int
) -> list[dict]:
    """The last `check.last_n` earlier sweeps of this scenario over the same load steps."""
    from warehouse.db import connect
    from warehouse.queries import query

    with connect(db_path, read_only=True) as conn:
        rows = query(
            conn,
            "capacity_baseline",
            scenario_name=scenario_name,
            load_kind=check.kind,
            before_ns=before_ns,
            last_n=1000,
        )
    same = [r for r in rows if [float(x) for x in r["loads"]] == [float(x) for x in check.loads]]
    return same[: check.last_n]


def judge_capacity(db_path: Path, sweep, check: CapacityCheck, started_ns: int) -> ScenarioVerdict:
    """A finished sweep (flows.capacity.CapacityResult) judged against the sweeps before it."""
    from rca.capacity import capacity_verdict

    baseline = capacity_baseline(db_path, sweep.scenario_name, check, started_ns)
    verdict = capacity_verdict(
        f"capacity_{check.kind}",
        sweep.knee["capacity"],
        [b["capacity"] for b in baseline],
        check.drop_rel,
    )
    found = sweep.knee["capacity"]
    progress.info(
        "capacity %s: %s vs %d earlier sweep(s)",
        "below the lowest step" if found is None else f"{found:g}",
        verdict["verdict"],
        len(baseline),
    )
    slug = re.sub(r"[^a-z0-9]+", "-", sweep.scenario_name.lower()).strip("-")
    return ScenarioVerdict(
        f"capacity-{slug}",
        sweep.sweep_id,
        sweep.report,
        [b["sweep_id"] for b in baseline],
        [verdict],
    )


def capacity_check(paths: StatePaths, check: CapacityCheck) -> ScenarioVerdict:
    """Sweep the capacity scenario and judge its capacity against the earlier sweeps."""
    from flows.capacity import CapacityOptions, capacity_sweep

    started_ns = time.time_ns()
    sweep = capacity_sweep(
        str(check.scenario),
        CapacityOptions(
            kind=check.kind, loads=check.loads, slo=check.slo, attainment=check.attainment
        ),
        state_home=str(paths.home),
    )
    return judge_capacity(paths.warehouse, sweep, check, started_ns)


@task(name="reported-spikes", cache_policy=NONE, retries=2, retry_delay_seconds=1)
def reported_spikes(db_path: Path, run_id: str) -> int:
    """How many spikes the run's report shows (suppressed ones left out)."""
    from warehouse.db import connect

    with connect(db_path, read_only=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM spikes WHERE run_id = ? AND NOT suppressed", [run_id]
        ).fetchone()
    return int(row[0]) if row else 0


def confirm_regression(paths: StatePaths, run_id: str, repeats: int) -> dict | None:
    """`spikelens confirm` of a regressed run's most severe spike; None: the run has none."""
    from flows.confirm import confirm_spike

    if reported_spikes(paths.warehouse, run_id) == 0:
        progress.info("regressed without a spike: nothing to confirm in %s", run_id)
        return None
    try:
        result = confirm_spike(run_id, None, repeats, None, str(paths.home))
    except Exception as e:  # the regression's verdicts are stored: keep the nightly's page
        progress.warning("could not confirm %s's worst spike: %s", run_id, e)
        return {"spike_id": None, "cause": None, "verdict": "inconclusive", "reason": str(e)}
    return {
        "spike_id": result.spike_id,
        "cause": result.cause,
        "verdict": result.verdict,
        "reason": result.reason,
        "report": result.report,
    }


@task(name="render-nightly-report", cache_policy=NONE)
def render_nightly_report(db_path: Path, run_id: str, out_dir: Path) -> Path:
    """The nightly page of one scenario's run: verdict per metric with its CI, and trends."""
    from pages.nightly import build_nightly_context
    from templates.render import render_nightly

    return render_nightly(
        build_nightly_context(db_path, run_id), out_dir, index_href="../../index.html"
    )


@flow(name="nightly-regression")
def nightly_regression(
    config_dir: str | None = None, state_home: str | None = None, pinned_run_id: str | None = None
) -> NightlyResult:
    """Run every nightly scenario and compare each with its baseline."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    config = NightlyConfig.load(config_dir or default_config_dir())
    if pinned_run_id:
        config = NightlyConfig(
            **{**config.__dict__, "baseline": "pinned", "pinned_run_id": pinned_run_id}
        )
    result = NightlyResult()
    for scenario_path in config.scenarios:
        started_ns = time.time_ns()
        run = run_scenario(str(scenario_path), state_home=str(paths.home), kind="nightly")
        scenario_name = run.scenario_name
        baseline = find_baseline(paths.warehouse, scenario_name, started_ns, config)
        progress.info("comparing %s with %d baseline run(s)", scenario_name, len(baseline))
        verdicts = compare(paths.warehouse, scenario_name, run.run_id, baseline, config)
        regressed = any(v["verdict"] == "regressed" for v in verdicts)
        proof = None
        if regressed and config.confirm_repeats:
            proof = confirm_regression(paths, run.run_id, config.confirm_repeats)
        page = render_nightly_report(
            paths.warehouse, run.run_id, paths.reports / run.run_id / "nightly"
        )
        result.scenarios.append(
            ScenarioVerdict(scenario_name, run.run_id, str(page), baseline, verdicts, proof)
        )
    result.report = result.scenarios[-1].report if result.scenarios else None
    if config.capacity is not None:
        result.scenarios.append(capacity_check(paths, config.capacity))
    refresh_index(paths.reports)
    publish(result)
    return result
