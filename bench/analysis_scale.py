"""Benchmark: how the analysis of a run grows with the run's length and load.

Builds simulated runs with tests/support/runbuilder.py (collectors on, one GC storm in the middle
of measured load) of 1 min, 10 min and 1 h at 8 users and 1 h at 64 users, ingests each into a
fresh DuckDB file and analyses it with `rca.analyze.analyze_run`, the flows' entry point. Prints
JSON: per run the rows ingested, the seconds of each stage (ingest; each signal query; the step
arrays; detect; attribute; store; render of the incident page) and rows/s of the analysis.

Stages are timed by wrapping the functions `analyze_run` calls (the wrappers only add a clock
read), so the figure is the real entry point's cost, not a re-implementation of it. A run longer
than 10 min is simulated in 10-min segments appended one after another (same seed sequence, ids
and step numbers offset), because the simulation keeps every row of a segment as Python dicts.

    PYTHONPATH=$PWD .venv/bin/python bench/analysis_scale.py [--cases 1min-8u,1h-8u] \
        [--runs-dir /tmp/analysis-scale-runs] [--dump DIR]

--runs-dir keeps the built run directories, so a second invocation (e.g. after a change to the
analysis) reads the same rows; --dump writes each analysis' spikes/attributions/evidence as JSON
for comparing two implementations.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.runbuilder import (  # noqa: E402
    SimSpec,
    _write_collector_files,
    run_json,
    simulate,
)

SEGMENT_S = 600.0  # longest stretch simulated in one go (memory: rows are dicts until written)


@dataclass(frozen=True)
class Case:
    name: str
    duration_s: float
    users: int


CASES = (
    Case("1min-8u", 60.0, 8),
    Case("10min-8u", 600.0, 8),
    Case("1h-8u", 3600.0, 8),
    Case("1h-64u", 3600.0, 64),
)


def spec_of(case: Case) -> SimSpec:
    """The run of a case: one GC storm of 10 s in the middle of measured load, collectors on."""
    return SimSpec(
        run_id=f"20261203T000000Z-scale-{case.name}",
        duration_s=case.duration_s,
        users=case.users,
        incident="gc",
        incident_start_s=case.duration_s / 2,
        incident_duration_s=10.0,
        collectors=True,
        seed=7,
    )


def _segment_tables(spec: SimSpec) -> dict[str, pa.Table]:
    """simulate() over the whole measured load, SEGMENT_S at a time, tables appended."""
    if spec.duration_s <= SEGMENT_S:
        return simulate(spec)
    parts: dict[str, list[pa.Table]] = defaultdict(list)
    n_seg = int(-(-spec.duration_s // SEGMENT_S))
    step_offset = 0
    for i in range(n_seg):
        seg_t0 = spec.t0_ns + int(i * SEGMENT_S * 1e9)
        seg = SimSpec(
            **{
                **spec.__dict__,
                "t0_ns": seg_t0,
                "warmup_s": spec.warmup_s if i == 0 else 0.0,
                "duration_s": min(SEGMENT_S, spec.duration_s - i * SEGMENT_S),
                "incident_start_s": spec.incident_start_s - i * SEGMENT_S,
                "seed": spec.seed + i,
            }
        )
        tables = simulate(seg)
        prefix = f"s{i}-"
        for stem, segment in tables.items():
            if stem == "faults" and i > 0:
                continue
            table = segment
            if "request_id" in table.column_names:
                rid = pc.binary_join_element_wise(prefix, table["request_id"], "")
                table = table.set_column(
                    table.schema.get_field_index("request_id"), "request_id", rid
                )
            if stem == "steps" and table.num_rows:
                col = table.schema.get_field_index("step")
                table = table.set_column(col, "step", pc.add(table["step"], step_offset))
                step_offset = int(pc.max(table["step"]).as_py()) + 1
            parts[stem].append(table)
    # segment 0's faults row already spans the whole incident (its times are absolute)
    return {stem: pa.concat_tables(ts, promote_options="permissive") for stem, ts in parts.items()}


def build_run(root: Path, case: Case) -> Path:
    """Write (or reuse) the run directory of a case under root; returns it."""
    spec = spec_of(case)
    run_dir = root / spec.run_id
    if (run_dir / "run.json").exists():
        return run_dir
    tmp = root / (spec.run_id + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "run.json").write_text(json.dumps(run_json(spec)))
    for stem, table in _segment_tables(spec).items():
        pq.write_table(table, tmp / f"{stem}.parquet")
    _write_collector_files(tmp, spec)
    tmp.rename(run_dir)
    return run_dir


class StageClock:
    """Seconds per stage, accumulated by wrappers around the functions the analysis calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def stage(self, name: str):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t

    def wrap(self, module, attr: str, stage_of=None):
        """Replace module.attr by a timed wrapper; returns an undo callable (None if absent)."""
        fn = getattr(module, attr, None)
        if fn is None:
            return None

        def timed(*args, **kwargs):
            name = stage_of(args, kwargs) if stage_of else attr
            with self.stage(name):
                return fn(*args, **kwargs)

        setattr(module, attr, timed)
        return lambda: setattr(module, attr, fn)


def _query_stage(args, kwargs) -> str:
    name = kwargs.get("name", args[1] if len(args) > 1 else "?")
    return f"query.{name}"


def _instrument(clock: StageClock) -> list:
    """Wrap the warehouse query runners and the analysis' stages; returns the undo callables."""
    import rca.analyze
    import warehouse.observed_windows
    import warehouse.queries

    undo = []
    for runner in ("query", "query_table"):
        undo.append(clock.wrap(warehouse.queries, runner, _query_stage))
        undo.append(clock.wrap(rca.analyze, runner, _query_stage))
    # the latency windows are read through warehouse.observed_windows (client or histograms)
    undo.append(clock.wrap(warehouse.observed_windows, "query", _query_stage))
    undo.append(clock.wrap(rca.analyze, "step_arrays"))
    undo.append(clock.wrap(rca.analyze, "detect_spikes", lambda a, k: "detect"))
    undo.append(clock.wrap(rca.analyze, "attribute_any", lambda a, k: "attribute"))
    undo.append(clock.wrap(rca.analyze, "result_tables", lambda a, k: "store"))
    undo.append(clock.wrap(rca.analyze, "replace_run_rows", lambda a, k: "store"))
    return [u for u in undo if u is not None]


def _dump(db_path: Path, run_id: str, out: Path) -> None:
    """spikes, attributions and evidence of the run as JSON (for before/after comparison)."""
    from warehouse.db import connect

    tables = {}
    with connect(db_path, read_only=True) as conn:
        for table in ("spikes", "attributions", "evidence"):
            cur = conn.execute(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY ALL", [run_id])
            cols = [d[0] for d in cur.description]
            tables[table] = [dict(zip(cols, row)) for row in cur.fetchall()]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{run_id}.json").write_text(json.dumps(tables, indent=1, sort_keys=True, default=repr))


def measure(run_dir: Path, work: Path, dump: Path | None = None) -> dict:
    """Ingest and analyse one run directory in a fresh warehouse; the figures of one run."""
    from pages.incident import build_incident_context
    from rca.analyze import analyze_run
    from templates.render import render_incident
    from warehouse.ingest import ingest_run

    db = work / "bench.duckdb"
    db.unlink(missing_ok=True)
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    t = time.perf_counter()
    counts = ingest_run(db, run_dir)
    ingest_s = time.perf_counter() - t
    clock = StageClock()
    undo = _instrument(clock)
    try:
        t = time.perf_counter()
        analysis = analyze_run(db, run_id)
        analyse_s = time.perf_counter() - t
    finally:
        for u in reversed(undo):
            u()
    t = time.perf_counter()
    render_incident(build_incident_context(db, run_id), work / "report")
    render_s = time.perf_counter() - t
    rows = int(sum(counts.values()))
    stages = {k: round(v, 3) for k, v in sorted(clock.seconds.items())}
    stages["other"] = round(analyse_s - sum(clock.seconds.values()), 3)
    if dump is not None:
        _dump(db, run_id, dump)
    return {
        "rows": rows,
        "rows_by_table": {k: int(v) for k, v in sorted(counts.items()) if v},
        "spikes": len(analysis.spikes) + len(analysis.suppressed),
        "ingest_s": round(ingest_s, 3),
        "analyse_s": round(analyse_s, 3),
        "render_s": round(render_s, 3),
        "stages_s": stages,
        "analyse_rows_per_s": round(rows / analyse_s) if analyse_s > 0 else None,
        "ingest_rows_per_s": round(rows / ingest_s) if ingest_s > 0 else None,
    }


def run_cases(cases: list[Case], runs_dir: Path, dump: Path | None = None) -> dict:
    """Figures of every case, and the 10-min/1-h cost ratio when both ran."""
    out: dict = {"cases": {}}
    with tempfile.TemporaryDirectory(prefix="analysis-scale-") as tmp:
        for case in cases:
            t = time.perf_counter()
            run_dir = build_run(runs_dir, case)
            build_s = time.perf_counter() - t
            figures = measure(run_dir, Path(tmp), dump)
            out["cases"][case.name] = {
                "duration_s": case.duration_s,
                "users": case.users,
                "build_s": round(build_s, 1),
                **figures,
            }
    c = out["cases"]
    if "10min-8u" in c and "1h-8u" in c:
        out["ratio_1h_over_10min"] = round(c["1h-8u"]["analyse_s"] / c["10min-8u"]["analyse_s"], 2)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument(
        "--runs-dir", type=Path, default=Path(tempfile.gettempdir()) / "analysis-scale-runs"
    )
    parser.add_argument("--dump", type=Path, default=None)
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}
    unknown = [n for n in args.cases.split(",") if n not in by_name]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {sorted(by_name)}")
    cases = [by_name[n] for n in args.cases.split(",")]
    print(json.dumps(run_cases(cases, args.runs_dir, args.dump), indent=1))


if __name__ == "__main__":
    main()
