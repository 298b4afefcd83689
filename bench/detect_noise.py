"""Benchmark: false alarms per hour of spike detection on simulated control runs with box noise,
and detection + attribution of GC, penalty and load faults under the same noise.

Runs use the engine simulation of the tests (tests/support/runbuilder.py): stage times with
lognormal noise, scheduler hiccups and bursts of contention from other tenants (every stage slower
by 1.3–2× for 1–3 s), which is what a shared 2-core box does to a real run. Prints JSON.

    .venv/bin/python bench/detect_noise.py --runs 3 --duration 300
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # the repository root: tests.support

from rca.analyze import analyze_run
from rca.evaluate import evaluate
from tests.support.runbuilder import SimSpec, write_run
from warehouse.ingest import ingest_run

# (incident, magnitude): a control, GC storms of 150 and 60 ms pauses, +15 ms penalty per step,
# +10 users; each fault lasts 10 s in the middle of the run.
CASES = ((None, 0.0), ("gc", 150.0), ("gc", 60.0), ("penalty", 15.0), ("load", 10.0))
NOISE = {
    "quiet": {},
    "noisy": {"noise": 0.25, "outlier_p": 0.03, "outlier_ms": 30.0, "contention_p": 0.0005},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=3, help="seeds per noise level (each: a control + 4 faults)"
    )
    parser.add_argument("--duration", type=float, default=300.0, help="measured seconds per run")
    args = parser.parse_args()
    if args.runs < 1 or args.duration < 30:
        parser.error("--runs must be >= 1 and --duration >= 30")
    out = {"runs_per_level": args.runs, "duration_s": args.duration, "levels": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = root / "w.duckdb"
        for level, noise in NOISE.items():
            t = time.perf_counter()
            ids = []
            for seed in range(args.runs):
                for incident, magnitude in CASES:
                    spec = SimSpec(
                        run_id=f"{level}-{incident or 'control'}-{magnitude:g}-{seed}",
                        seed=seed,
                        incident=incident,
                        magnitude=magnitude,
                        duration_s=args.duration,
                        incident_start_s=args.duration / 2,
                        incident_duration_s=10.0,
                        **noise,
                    )
                    ingest_run(db, write_run(root / "runs", spec))
                    analyze_run(db, spec.run_id)
                    ids.append(spec.run_id)
            result = evaluate(db, ids, peers=())
            out["levels"][level] = {
                "noise": noise,
                "controls": result["controls"],
                "detection": result["detection"],
                "attribution_accuracy": result["attribution"]["accuracy"],
                "confusion": {
                    t: {p: n for p, n in row.items() if n}
                    for t, row in result["attribution"]["confusion"].items()
                },
                "seconds": round(time.perf_counter() - t, 1),
            }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
