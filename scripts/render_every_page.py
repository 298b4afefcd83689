"""Render one page of every kind from a simulated warehouse, through the flows' own task
functions: incidents (gc, comm on 2 ranks, kv, penalty, repetition, host noise, two controls),
two nightlies, a replay-vs-original, a sweep, an evaluation and the index.

Why: a refactor of the report layer must leave the pages unchanged. Run it from two checkouts
and diff the folders (only the index's "updated" time differs, and the CIs of the second control's
nightly and replay pages, whose bootstrap in rca.compare is not reproducible run to run):

    python scripts/render_every_page.py /tmp/after            # in this checkout
    (cd /tmp/base && PYTHONPATH=$PWD python $OLDPWD/scripts/render_every_page.py /tmp/before)
    diff -r /tmp/before/reports /tmp/after/reports

`--from DIR` re-renders the warehouse-built pages of an earlier output DIR instead of building a
new warehouse, which compares the rendering alone (every page but the index byte for byte).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # the repository root: tests.support

from flows.evaluate import score_suite, write_outputs
from flows.nightly import compare, render_nightly_report
from flows.nightly_config import NightlyConfig, default_config_dir
from flows.replay import compare_with_original, render_comparison
from flows.sweep import render_sweep_report, summarise_cells
from flows.tasks import refresh_index, render_report
from tests.support.runbuilder import SimSpec, write_run

SPECS = (
    SimSpec(run_id="r1-gc", incident="gc"),
    SimSpec(run_id="r2-comm", incident="comm", tp=2),
    SimSpec(run_id="r3-kv", incident="kv"),
    SimSpec(run_id="r4-control", incident=None),
    SimSpec(run_id="r5-control", incident=None, seed=1, t0_ns=1_800_000_100_000_000_000),
    SimSpec(run_id="r6-penalty", incident="penalty"),
    SimSpec(run_id="r7-repetition", incident="repetition"),
    SimSpec(run_id="r8-host", incident="host", contention_p=0.01),
)


def build_warehouse(out: Path) -> Path:
    from rca.analyze import analyze_run
    from warehouse.ingest import ingest_run

    db = out / "w.duckdb"
    for spec in SPECS:
        ingest_run(db, write_run(out / "runs", spec))
        analyze_run(db, spec.run_id)
    config = NightlyConfig.load(default_config_dir())
    compare.fn(db, "sim-control", "r4-control", [], config)
    compare.fn(db, "sim-control", "r5-control", ["r4-control"], config)
    return db


def render_from_warehouse(db: Path, reports: Path) -> None:
    for spec in SPECS:
        render_report.fn(db, spec.run_id, reports / spec.run_id)
    for run_id in ("r4-control", "r5-control"):
        render_nightly_report.fn(db, run_id, reports / run_id / "nightly")


def render_derived(db: Path, reports: Path) -> None:
    verdicts = compare_with_original.fn(db, "r5-control", "r4-control")
    render_comparison.fn(
        db, "r5-control", "r4-control", verdicts, reports / "r5-control" / "vs-original"
    )
    cells = summarise_cells.fn(db, "r6-penalty")
    temperatures = sorted({c["temperature"] for c in cells})
    penalties = sorted({c["frequency_penalty"] for c in cells})
    render_sweep_report.fn(
        db, "r6-penalty", cells, temperatures, penalties, reports / "r6-penalty" / "sweep"
    )
    run_ids = [s.run_id for s in SPECS]
    scores = score_suite.fn(db, run_ids, ("baro", "nsigma"))
    write_outputs.fn("suite-1", Path("scenarios/eval"), run_ids, scores, reports / "suite-1")


def main(argv: list[str]) -> None:
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--from"):
        raise SystemExit("usage: render_every_page.py OUT_DIR [--from EARLIER_OUT_DIR]")
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    reports = out / "reports"
    if len(argv) == 3:
        render_from_warehouse(Path(argv[2]) / "w.duckdb", reports)
    else:
        db = build_warehouse(out)
        render_from_warehouse(db, reports)
        render_derived(db, reports)
    refresh_index.fn(reports)
    print("\n".join(sorted(str(p.relative_to(reports)) for p in reports.rglob("index.html"))))


if __name__ == "__main__":
    main(sys.argv[1:])
