"""The run-vs-run comparison page: both runs side by side and the verdict per metric (B − A).

Run B is the candidate and run A its baseline; the metric rows are the nightly page's own
MetricRow, so both pages accept exactly the same rows. Each side is read from the warehouse
(warehouse/queries/compare_run_side.sql): what ran (scenario, engine or target, load) and how it
ended.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pages.fields import iso_utc, one_of, relative_href
from pages.index import ReportEntry
from pages.nightly import VERDICTS, MetricRow, metric_rows, moved_headline, overall_verdict
from pages.run_header import RunHeader
from warehouse.db import connect
from warehouse.queries import query

# What can differ between the two runs' settings; the page lists the ones that do.
SETTINGS = ("scenario_name", "engine", "load", "target")


@dataclass(frozen=True)
class RunSide:
    """One of the two runs."""

    run_id: str
    scenario_name: str | None = None
    status: str | None = None
    started_at: str | None = None  # ISO-8601 UTC, to the second
    git_commit: str | None = None
    host: str | None = None
    command: str | None = None
    engine: Mapping[str, Any] | None = (
        None  # the engine config spikelens started; None: `target:` run
    )
    load: Mapping[str, Any] | None = None  # the scenario's load block
    target: str | None = None  # the URL of an engine spikelens only drove
    report_href: str | None = None  # relative link to the run's incident page (None: none)

    def __post_init__(self) -> None:
        if self.report_href is not None:
            object.__setattr__(self, "report_href", relative_href(self.report_href, "report_href"))


@dataclass(frozen=True)
class CompareContext:
    """Everything the comparison page shows."""

    run_a: RunSide  # the baseline
    run_b: RunSide  # the candidate
    metrics: tuple[MetricRow, ...]  # B − A per metric
    command: str  # the command line that reproduces the page
    differs: tuple[str, ...] = ()  # the SETTINGS whose values differ between the runs
    headline: str = ""
    verdict: str | None = None  # the page's verdict (derived when not given)

    def __post_init__(self) -> None:
        if self.verdict is None:
            object.__setattr__(self, "verdict", overall_verdict(self.metrics))
        one_of(self.verdict, VERDICTS, "verdict")
        if not self.headline.strip():
            object.__setattr__(self, "headline", moved_headline(self.metrics, self.baseline_label))

    def entry(self) -> ReportEntry:
        """The page's report.json: listed under run B, its headline saying against what."""
        return ReportEntry.of(
            self.run,
            "compare",
            verdict=self.verdict,
            headline=f"vs {self.run_a.run_id}: {self.headline}",
        )

    @property
    def run(self) -> RunHeader:
        """The page's own header, as the index lists it: run B, and the compare command."""
        b = self.run_b
        return RunHeader(
            run_id=b.run_id,
            command=self.command,
            scenario_name=b.scenario_name or "",
            started_at=b.started_at,
        )

    @property
    def baseline_label(self) -> str:
        return f"run A ({self.run_a.run_id})"


def _side(row: dict, reports_root: Path | None, out_dir: Path | None) -> RunSide:
    page = reports_root / row["run_id"] / "index.html" if reports_root else None
    href = (
        Path(os.path.relpath(page, out_dir)).as_posix()
        if page is not None and out_dir is not None and page.is_file()
        else None
    )
    return RunSide(
        run_id=row["run_id"],
        scenario_name=row["scenario_name"] or "",
        status=row["status"],
        started_at=iso_utc(row["started_ns"]),
        git_commit=row["git_commit"],
        host=row["host"],
        command=row["command"] or "",
        engine=json.loads(row["engine_json"]) if row["engine_json"] else None,
        load=json.loads(row["load_json"]) if row["load_json"] else None,
        target=row["target"],
        report_href=href,
    )


def build_compare_context(
    db_path: str | Path,
    run_a: str,
    run_b: str,
    verdicts: list[dict],
    reports_root: Path | None = None,
    out_dir: Path | None = None,
) -> CompareContext:
    """A (baseline) and B (candidate) from the warehouse, with `verdicts` of B − A
    (rca.compare.MetricVerdict.to_dict()). A side links to its run's page under `reports_root`
    when that page exists, relative to `out_dir`; KeyError when a run is not in the warehouse."""
    with connect(db_path, read_only=True) as conn:
        sides = []
        for rid in (run_a, run_b):
            rows = query(conn, "compare_run_side", run_id=rid)
            if not rows:
                raise KeyError(f"run {rid!r} is not in the warehouse")
            sides.append(_side(rows[0], reports_root, out_dir))
    a, b = sides
    return CompareContext(
        run_a=a,
        run_b=b,
        metrics=metric_rows(verdicts),
        differs=tuple(k for k in SETTINGS if getattr(a, k) != getattr(b, k)),
        command=f"spikelens compare {run_a} {run_b}",
    )
