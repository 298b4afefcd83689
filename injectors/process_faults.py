"""Faults the GC hook applies inside a chosen process of an engine's tree: `memory.gc_storm`.

What: for an engine spikelens starts but cannot change (vLLM), `memory.gc_storm` is applied in
every process whose role is `params.role` (default `EngineCore`) by a daemon thread
(`injectors/process_churn.py`) that the GC hook (`collectors/site/sitecustomize.py`) starts at
interpreter start when SPIKELENS_FAULT_HOOK names that file: the thread allocates
`objects_per_tick` small reference cycles every `tick_s`, keeps them alive `live_ticks` ticks
(so they are promoted and full collections run often) and drops them, for the fault window
only. The pauses are real collections of that process, under its GIL, so its own loop stalls;
the hook's GC rows (telemetry the analysis reads) record them like any other collection. The
churn itself writes nothing, and its thread's stack samples are dropped by the collectors
(collectors/regions.py INJECTOR_FILES).
How the clock reaches the process: the launcher sets SPIKELENS_FAULT_SCHEDULE to a file in the
collect directory and SPIKELENS_FAULT_HOOK to the churn module (`schedule_env`); at load start
the flow writes that file atomically with the load's t0 and the windows (`arm`); the thread
waits for the file, then for each window.
Ground truth: `arm` writes the windows to `faults.process.parquet` (spikelens_common.ground_truth),
read only by scoring and the report's "injected" line.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from spikelens_common.fault_catalogue import CATALOGUE, Applier, build_params, kinds_applied_by
from spikelens_common.fault_params import ProcessGcStormParams
from spikelens_common.ground_truth import (
    GROUND_TRUTH_FILES,
    Scheduled,
    scheduled_windows,
    write_windows,
)

SCHEDULE_ENV = "SPIKELENS_FAULT_SCHEDULE"
HOOK_ENV = "SPIKELENS_FAULT_HOOK"  # the file the GC hook loads to start the churn thread
CHURN_FILE = Path(__file__).resolve().parent / "process_churn.py"
SCHEDULE_FILE = "fault-schedule.json"
GROUND_TRUTH_FILE = GROUND_TRUTH_FILES["gc_hook"]
KINDS = tuple(kinds_applied_by(Applier.GC_HOOK))

__all__ = ["KINDS", "ProcessGcStormParams", "arm", "make_params", "schedule_env"]


def make_params(kind: str, values: dict | None):
    """The params dataclass of a process fault; unknown keys raise naming the key and the kind."""
    return build_params(kind, Applier.GC_HOOK, values)


def schedule_env(collect_dir: str | Path, env: dict[str, str]) -> dict[str, str]:
    """`env` plus the variables that tell the GC hook which churn module to start and where the
    schedule will appear."""
    schedule = str(Path(collect_dir).resolve() / SCHEDULE_FILE)
    return {**env, SCHEDULE_ENV: schedule, HOOK_ENV: str(CHURN_FILE)}


def arm(
    faults: list[dict], t0_ns: int, duration_s: float, collect_dir: str | Path, run_dir: str | Path
) -> int:
    """Write the schedule of `faults` (scenario dicts; the flows route only the GC hook's kinds
    here) for the churn thread, and their ground truth; returns how many windows were armed."""
    for f in faults:
        if f["kind"] not in KINDS:
            raise ValueError(f"the GC hook applies {', '.join(KINDS)} only, got {f['kind']!r}")
    mine = [(f, make_params(f["kind"], f.get("params"))) for f in faults]
    schedule = {
        "t0_ns": t0_ns,
        "faults": [
            {
                "kind": f["kind"],
                "start_s": float(f["start_s"]),
                "duration_s": float(f["duration_s"]),
                "params": dataclasses.asdict(p),
            }
            for f, p in mine
        ],
    }
    path = Path(collect_dir) / SCHEDULE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(schedule))
    os.replace(tmp, path)  # the hook never reads half a file
    _write_ground_truth(mine, t0_ns, duration_s, Path(run_dir) / GROUND_TRUTH_FILE)
    return len(mine)


def _write_ground_truth(mine, t0_ns: int, duration_s: float, path: Path) -> None:
    scheduled = [
        Scheduled(
            f["kind"],
            CATALOGUE[f["kind"]].cause,
            float(f["start_s"]),
            float(f["duration_s"]),
            params,
        )
        for f, params in mine
    ]
    write_windows(scheduled_windows(scheduled, t0_ns, duration_s), path)
