"""Benchmark: how often the evaluation's "did the fault act" judge (rca.acted) says a fault acted
where none was injected.

The judge decides which faults the evaluation's "over the faults that acted" figure counts. Its
false "acted" rate is measured on real clean runs: in every control run of a warehouse (a run
with no fault), pseudo-faults of each length in --lengths are placed at every --every seconds
and judged exactly as a real fault would be (rca.acted.judge, its default ActedConfig). Prints
JSON: per length the pseudo-faults judged, how many were called acted, undecided, and the
rate with its exact 95 % interval.

    PYTHONPATH=$PWD .venv/bin/python bench/acted_null.py WAREHOUSE.duckdb [--lengths 4,8,12] \
        [--every 5]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rca.acted import judge, samples_by_metric
from rca.intervals import proportion_exact
from warehouse.db import connect
from warehouse.queries import query


def control_runs(conn) -> list[tuple[str, float]]:
    """(run_id, measured duration_s) of every run without a ground-truth fault (a confirmation's
    arms left out: they replay a fault run's stretch)."""
    rows = conn.execute(
        "SELECT r.run_id, r.duration_s FROM runs r WHERE r.duration_s IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM faults f WHERE f.run_id = r.run_id)"
        " AND r.run_id NOT LIKE '%-confirm-%' ORDER BY r.run_id"
    ).fetchall()
    return [(str(run_id), float(duration)) for run_id, duration in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--lengths", default="4,8,12", help="pseudo-fault lengths, seconds")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between placements")
    args = parser.parse_args()
    lengths = [float(x) for x in args.lengths.split(",")]
    conn = connect(args.warehouse, read_only=True)
    try:
        runs = control_runs(conn)
        tally = {length: {"judged": 0, "acted": 0, "undecided": 0} for length in lengths}
        for run_id, duration in runs:
            samples = samples_by_metric(query(conn, "client_latency_samples", run_id=run_id))
            for length in lengths:
                for start in np.arange(args.every, duration - length, args.every):
                    window = (float(start), float(start + length))
                    got = judge(samples, window, [window], duration)
                    tally[length]["judged"] += 1
                    tally[length]["acted"] += got.acted is True
                    tally[length]["undecided"] += got.acted is None
    finally:
        conn.close()
    result = {
        "warehouse": str(args.warehouse),
        "control_runs": len(runs),
        "control_minutes": round(sum(d for _, d in runs) / 60.0, 1),
        "per_length": {
            str(length): {
                **t,
                "false_acted": proportion_exact(t["acted"], t["judged"] - t["undecided"]).to_dict(),
            }
            for length, t in tally.items()
        },
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
