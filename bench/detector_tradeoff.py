"""Benchmark: what the spike detector's settings trade — false alarms per hour on a suite's clean
runs against the faults that acted and were found — replayed on recorded evaluation suites.

Each suite is a warehouse and the evaluation.json `spikelens evaluate` wrote for it. Detection
runs again on every scored run's stored latency windows under each setting of a grid (the default
preset's, then stricter and looser ones); nothing is re-run and nothing is written. A fault is
found when a spike overlaps it within the suite's own tolerance (rca.evaluate.match_events, then
cover_events: a spike over two faults finds both). Which faults acted is the suite's own
judgement from the raw client latencies (an abstention counts as acted), so the detector's
settings do not move the denominator. Every spike in a control counts, as in the suite (suppressed ones
included). Intervals are exact: Clopper–Pearson for the share found, Poisson for the rate.

What it answers: whether any setting reaches a false-alarm goal on this box without giving up the
faults that acted, i.e. whether the goal is a matter of tuning or of the box's own noise. Prints
JSON.

    .venv/bin/python bench/detector_tradeoff.py \\
        --suite /tmp/ev8/warehouse.duckdb:/tmp/ev8/reports/<suite>/evaluation.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

from rca.config import DetectConfig
from rca.detect import detect_spikes
from rca.evaluate import cover_events, match_events
from rca.intervals import poisson_rate, proportion_exact
from warehouse.db import connect
from warehouse.observed_windows import latency_windows
from warehouse.queries import query

WINDOW_S = 1.0


@dataclass(frozen=True)
class RecordedRun:
    """One scored run of a suite: its latency windows and its faults with the suite's judgement."""

    suite: str
    run_id: str
    duration_s: float
    windows: list[dict]
    faults: list[dict]  # kind, cause, start_s, end_s, acted (True / False / None)
    tolerance_windows: int  # the suite's own matching tolerance (evaluation.json)


def load_suite(db_path: str, evaluation_path: str) -> list[RecordedRun]:
    """The suite's scored runs (evaluation.json per_run; twins left out, as the suite did)."""
    suite = json.loads(Path(evaluation_path).read_text())
    conn = connect(db_path, read_only=True)
    try:
        return [_recorded(conn, db_path, evaluation_path, suite, e) for e in suite["per_run"]]
    finally:
        conn.close()


def _recorded(conn, db_path: str, evaluation_path: str, suite: dict, entry: dict) -> RecordedRun:
    """One per_run entry of the suite, with its stored latency windows."""
    rid = entry["run_id"]
    header = query(conn, "run_header", run_id=rid)
    analysis = query(conn, "run_analysis", run_id=rid)
    if not header or not analysis:
        raise KeyError(f"{db_path}: run {rid!r} of {evaluation_path} is not analysed there")
    engine = header[0].get("engine")
    engine = json.loads(engine) if isinstance(engine, str) else (engine or {})
    return RecordedRun(
        suite=Path(evaluation_path).parent.name,
        run_id=rid,
        duration_s=float(analysis[0]["duration_s"] or 0.0),
        windows=latency_windows(conn, rid, WINDOW_S, engine),
        faults=entry["faults"],
        tolerance_windows=int(suite["tolerance_windows"]),
    )


def score_setting(runs: list[RecordedRun], config: DetectConfig) -> dict:
    """False alarms on the controls and acted faults found, under one detector setting."""
    alarms = found = acted = 0
    hours = 0.0
    for run in runs:
        spikes, _ = detect_spikes(run.windows, WINDOW_S, config)
        if not run.faults:
            alarms += len(spikes)
            hours += run.duration_s / 3600.0
            continue
        rows = [{"start_s": s.start_s, "end_s": s.end_s} for s in spikes]
        matches = match_events(run.faults, rows, WINDOW_S, run.tolerance_windows)
        covers = cover_events(run.faults, rows, matches, WINDOW_S, run.tolerance_windows)
        hit = {i for i, _ in (*matches, *covers)}
        for i, fault in enumerate(run.faults):
            if fault.get("acted") is not False:
                acted += 1
                found += i in hit
    return {
        "false_alarms": alarms,
        "control_hours": round(hours, 4),
        "false_alarms_per_hour": poisson_rate(alarms, hours).to_dict(),
        "acted_faults": acted,
        "acted_found": found,
        "acted_found_share": proportion_exact(found, acted).to_dict(),
    }


def grid(base: DetectConfig) -> list[tuple[str, DetectConfig]]:
    """The default preset, the default with the P50 test ('median') toggled and with the
    neighbourhood test ('local') added, then every
    combination of a stricter per-window test, a larger relative floor and a longer (or no)
    sustained test, each with the default's P50 test (on or off)."""
    out = [("default", base)]
    p50 = ("median",) if "median" in base.detectors else ()
    if p50:
        out.append(
            (
                "default-median",
                replace(base, detectors=tuple(d for d in base.detectors if d != "median")),
            )
        )
    else:
        out.append(("default+median", replace(base, detectors=(*base.detectors, "median"))))
    if "local" not in base.detectors:
        out.append(("default+local", replace(base, detectors=(*base.detectors, "local"))))
    for k, rel, sustained in itertools.product((5.0, 6.0, 7.0), (0.5, 0.75, 1.0), (5, 10, 0)):
        detectors = ("mad", "sustained", *p50) if sustained else ("mad", *p50)
        cfg = replace(
            base,
            mad_k=k,
            min_rel_excess=rel,
            detectors=detectors,
            sustained_min_windows=sustained or base.sustained_min_windows,
        )
        if cfg != base:
            name = f"k{k:g}-rel{rel:g}-" + (f"sustained{sustained}" if sustained else "mad-only")
            out.append((name, cfg))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--suite",
        action="append",
        required=True,
        metavar="WAREHOUSE:EVALUATION_JSON",
        help="a recorded suite (repeat for several; they are pooled)",
    )
    args = parser.parse_args(argv)
    runs: list[RecordedRun] = []
    for spec in args.suite:
        db, sep, evaluation = spec.rpartition(":")
        if not sep or not Path(db).is_file() or not Path(evaluation).is_file():
            parser.error(f"--suite {spec!r}: need WAREHOUSE:EVALUATION_JSON, both existing files")
        runs.extend(load_suite(db, evaluation))
    out = {
        "suites": sorted({r.suite for r in runs}),
        "runs": len(runs),
        "controls": sum(not r.faults for r in runs),
        "settings": {name: score_setting(runs, cfg) for name, cfg in grid(DetectConfig())},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
