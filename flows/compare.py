"""`spikelens compare RUN_A RUN_B`: any two stored runs, judged as the nightly judges a run.

B is the candidate and A its baseline: per metric (flows/nightly_config.METRICS) the cluster
bootstrap of rca/compare.py gives a 95 % CI of B − A, and the nightly's thresholds decide
regressed / improved / unchanged / insufficient. With one baseline run there is no between-run
noise to measure, so the page says so (two clean runs on a shared box can differ by tens of
percent: a verdict between single runs is about these two runs, not about the code).

No Prefect flow: it only reads the warehouse and writes one page, in well under a second of work;
starting Prefect's embedded server would cost more than the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flows.nightly_config import METRICS, Thresholds
from flows.paths import StatePaths


class CompareUsageError(ValueError):
    """A run id that is not in the warehouse, or no warehouse at all: the CLI exits 2."""


@dataclass
class CompareResult:
    run_a: str
    run_b: str
    verdicts: list[dict]
    report: Path

    @property
    def regressed(self) -> list[str]:
        return [v["metric"] for v in self.verdicts if v["verdict"] == "regressed"]


def _known_runs(db_path: Path, run_ids: tuple[str, ...]) -> dict[str, dict]:
    """run_header rows of `run_ids`; a CompareUsageError names every unknown id."""
    from warehouse.db import connect
    from warehouse.queries import query

    if not db_path.exists():
        raise CompareUsageError(f"no warehouse at {db_path}: run a scenario first")
    with connect(db_path, read_only=True) as conn:
        rows = {r: query(conn, "run_header", run_id=r) for r in run_ids}
        missing = [r for r, found in rows.items() if not found]
        if missing:
            recent = [r["run_id"] for r in query(conn, "recent_runs", last_n=5)]
            hint = (
                f"; recent runs: {', '.join(recent)}" if recent else "; the warehouse has no runs"
            )
            raise CompareUsageError(f"unknown run id(s): {', '.join(missing)}{hint}")
    return {r: found[0] for r, found in rows.items()}


def compare_stored_runs(
    run_a: str, run_b: str, state_home: str | None = None, reps: int = 400, seed: int = 0
) -> CompareResult:
    """Compare B (candidate) with A (baseline) and render the comparison page."""
    from rca.compare import compare_runs

    if run_a == run_b:
        raise CompareUsageError(f"RUN_A and RUN_B are the same run ({run_a}): give two runs")
    paths = StatePaths(Path(state_home).resolve()) if state_home else StatePaths.from_env()
    _known_runs(paths.warehouse, (run_a, run_b))
    verdicts = [
        v.to_dict()
        for v in compare_runs(
            paths.warehouse, run_b, [run_a], METRICS, Thresholds(), reps=reps, seed=seed
        )
    ]
    report = render_compare_report(paths, run_a, run_b, verdicts)
    return CompareResult(run_a, run_b, verdicts, report)


def render_compare_report(paths: StatePaths, run_a: str, run_b: str, verdicts: list[dict]) -> Path:
    """reports/<B>/vs-<A>/index.html, and the index refreshed."""
    from flows.tasks import rebuild_index
    from pages.compare import build_compare_context
    from templates.render import render_compare

    out_dir = paths.reports / run_b / f"vs-{run_a}"
    context = build_compare_context(
        paths.warehouse, run_a, run_b, verdicts, reports_root=paths.reports, out_dir=out_dir
    )
    page = render_compare(context, out_dir, index_href="../../index.html")
    rebuild_index(paths.reports)
    return page
