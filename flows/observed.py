"""`spikelens incident --prometheus`: explain a production window from the monitoring it already has.

The flow checks the window and the server before any work (collectors.prometheus_range), pulls
every serving series of the window at the query step into a run directory of kind `observed`
(metrics.parquet and run.json: no client samples, no faults), then finishes it as every run is
finished (flows.finish: ingest, analyse, report, index). The analysis reads latency from the
engine's histograms per step (warehouse.observed_windows) and attributes from its series
(rca.metric_rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NONE

from collectors.prometheus_range import PulledRange, RangeRequest, check_range, pull_range
from flows.finish import finish_run
from flows.manifest import RunManifest, new_run_id
from flows.paths import StatePaths
from flows.tasks import progress


@dataclass(frozen=True)
class ObservedResult:
    run_id: str
    report: Path
    rows: int  # samples pulled
    series: int
    spikes: int  # reported spikes


@task(name="check-prometheus", cache_policy=NONE)
def check_prometheus(req: RangeRequest) -> list[str]:
    """The window, the server and the selectors, checked before any work (no retries: a bad
    argument stays bad)."""
    return check_range(req)


@task(name="pull-prometheus", cache_policy=NONE, retries=2, retry_delay_seconds=2)
def pull_prometheus(req: RangeRequest, chosen: list[str], run_dir: Path) -> PulledRange:
    """Every selected series of the window at the step, into the run's metrics.parquet."""
    progress.info("pulling %d selector(s) from %s", len(chosen), req.url)
    return pull_range(req, chosen, run_dir / "metrics.parquet")


def observed_manifest(
    run_id: str, req: RangeRequest, pulled: PulledRange, detector: str = "default"
) -> RunManifest:
    """run.json of an observed window: t = 0 at --from, its length the window's; `detector`
    (the analysis' preset) recorded as a scenario's would be, so a re-analysis keeps it."""
    return RunManifest(
        run_id=run_id,
        kind="observed",
        scenario_name="prometheus",
        scenario_path="",
        scenario={} if detector == "default" else {"detector": detector},
        engine={
            "kind": "observed",
            "prometheus": req.url,
            "selectors": pulled.selectors,
            "step_s": req.step_s,
        },
        target=None,
        faults=[],
        warmup_s=0.0,
        duration_s=req.end_s - req.start_s,
        command=(
            f"spikelens incident --prometheus {req.url} --from {req.start_s:.3f}"
            f" --to {req.end_s:.3f} --step {req.step_s:g}"
            + (f" --match '{req.match}'" if req.match else "")
            + (f" --detector {detector}" if detector != "default" else "")
        ),
        started_ns=int(req.start_s * 1e9),
        ended_ns=int(req.end_s * 1e9),
        load_started_ns=int(req.start_s * 1e9),
        status="ok",
        extra={"prometheus": {"rows": pulled.rows, "series": pulled.series, "names": pulled.names}},
    )


@flow(name="observed-incident")
def observed_incident(
    req: RangeRequest,
    state_home: str | None = None,
    checked: list[str] | None = None,
    detector: str = "default",
) -> ObservedResult:
    """Pull the window, store it as an observed run, find and explain its spikes. `checked`: the
    selectors a caller's own `check_range` returned (the CLI checks before Prefect starts);
    `detector`: the spike detector's preset (rca.config.PRESETS)."""
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    chosen = checked if checked is not None else check_prometheus(req)
    host = req.url.split("://", 1)[-1].split("/", 1)[0].replace(":", "-")
    run_id = new_run_id("observed", host)
    run_dir = paths.run_dir(run_id)
    pulled = pull_prometheus(req, chosen, run_dir)
    observed_manifest(run_id, req, pulled, detector).write(run_dir)
    progress.info("%d series, %d samples", pulled.series, pulled.rows)
    finished = finish_run(paths, run_id, run_dir)
    return ObservedResult(
        run_id, finished.report, pulled.rows, pulled.series, len(finished.analysis.spikes)
    )
