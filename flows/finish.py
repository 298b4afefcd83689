"""How a run is finished: its files into the warehouse, its spikes found and attributed, its
report rendered, the reports index rebuilt. The one finish of every run: the flows call it after
the load, and `spikelens report` calls it again on a stored run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.paths import StatePaths
from flows.tasks import analyze, ingest, refresh_index, render_report


@dataclass(frozen=True)
class FinishedRun:
    """What finishing a run produced."""

    analysis: Any  # rca.analyze.Analysis: the spikes and their attributions
    report: Path  # the incident report's HTML page


def finish_run(
    paths: StatePaths,
    run_id: str,
    run_dir: Path | None,
    *,
    in_flow: bool = True,
    detector: str | None = None,
) -> FinishedRun:
    """Ingest `run_dir` (None: keep what the warehouse holds) → analyse → render → index.
    Idempotent: each step replaces what an earlier finish of the run stored. `detector`: the
    analysis' preset (rca.config.PRESETS; None: the run's own).

    `in_flow`: run the steps as Prefect tasks (retries, seen in Prefect's UI); False calls the
    same functions directly, so a command outside any flow (`spikelens report`) starts no
    Prefect server."""

    def step(task):
        return task if in_flow else task.fn

    if run_dir is not None:
        step(ingest)(paths.warehouse, run_dir)
    analysis = step(analyze)(paths.warehouse, run_id, detector)
    report = step(render_report)(paths.warehouse, run_id, paths.reports / run_id)
    step(refresh_index)(paths.reports)
    return FinishedRun(analysis=analysis, report=report)
