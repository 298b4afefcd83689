"""Faults the GC hook applies inside a chosen process of an engine's tree: `memory.gc_storm`.

What: for an engine spikelens starts but cannot change (vLLM), `memory.gc_storm` is applied by
the GC hook (`collectors/site/sitecustomize.py`) in every process whose role is `params.role`
(default `EngineCore`): a daemon thread there allocates `objects_per_tick` small reference cycles
every `tick_s`, keeps them alive `live_ticks` ticks (so they are promoted and full collections
run often) and drops them, for the fault window only. The pauses are real collections of that
process, under its GIL, so its own loop stalls; the hook's GC rows (telemetry the analysis reads)
record them like any other collection. The churn itself writes nothing.
How the clock reaches the process: the launcher sets SPIKELENS_FAULT_SCHEDULE to a file in the
collect directory (`schedule_env`); at load start the flow writes that file atomically with the
load's t0 and the windows (`arm`); the hook's thread waits for the file, then for each window.
Ground truth: `arm` writes the windows to `faults.process.parquet` (kind, cause, start_ns,
end_ns, params), read only by scoring and the report's "injected" line.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine.config_keys import strict_keys

SCHEDULE_ENV = "SPIKELENS_FAULT_SCHEDULE"
SCHEDULE_FILE = "fault-schedule.json"
GROUND_TRUTH_FILE = "faults.process.parquet"


@dataclass(frozen=True)
class ProcessGcStormParams:
    role: str = "EngineCore"  # processes whose role (collectors/roles.py) this is churn
    objects_per_tick: int = 20_000  # cycles (two dicts each) allocated per tick
    live_ticks: int = 4  # ticks a cycle stays reachable: it outlives young collections
    tick_s: float = 0.02  # 50 ticks/s: ~1M cycles/s at the default size
    ballast_objects: int = 0  # extra tracked objects kept alive in the window: longer passes

    def __post_init__(self):
        where = "memory.gc_storm.params"
        if not isinstance(self.role, str) or not self.role:
            raise ValueError(
                f"{where}.role: must be a process role such as 'EngineCore', got {self.role!r}"
            )
        for name, lo, hi in (
            ("objects_per_tick", 1, 10_000_000),
            ("live_ticks", 1, 10_000),
            ("ballast_objects", 0, 50_000_000),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{where}.{name}: must be an integer in [{lo}, {hi}], got {v!r}")
        if (
            isinstance(self.tick_s, bool)
            or not isinstance(self.tick_s, (int, float))
            or not 0.001 <= self.tick_s <= 10
        ):
            raise ValueError(
                f"{where}.tick_s: must be a number in [0.001, 10], got {self.tick_s!r}"
            )


KINDS: dict[str, tuple[str, type]] = {"memory.gc_storm": ("memory", ProcessGcStormParams)}


def make_params(kind: str, values: dict | None):
    """The params dataclass of a process fault; unknown keys raise naming the key and the kind."""
    cls = KINDS[kind][1]
    valid = [f.name for f in dataclasses.fields(cls)]
    strict_keys(
        values or {}, valid, f"{kind}.params", error=ValueError, sort_unknown=True, valid=valid
    )
    return cls(**dict(values or {}))


def schedule_env(collect_dir: str | Path, env: dict[str, str]) -> dict[str, str]:
    """`env` plus the variable that tells the GC hook where the schedule will appear."""
    return {**env, SCHEDULE_ENV: str(Path(collect_dir).resolve() / SCHEDULE_FILE)}


def arm(
    faults: list[dict], t0_ns: int, duration_s: float, collect_dir: str | Path, run_dir: str | Path
) -> int:
    """Write the schedule of the process faults in `faults` (scenario dicts) for the hook and
    their ground truth; returns how many windows were armed."""
    mine = [(f, make_params(f["kind"], f.get("params"))) for f in faults if f["kind"] in KINDS]
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
    import pyarrow as pa
    import pyarrow.parquet as pq

    from loadgen.traffic_faults import FAULTS_SCHEMA

    end_of_run = t0_ns + int(duration_s * 1e9)
    rows: dict[str, list] = {name: [] for name in FAULTS_SCHEMA.names}
    for fault, params in mine:
        start = t0_ns + int(float(fault["start_s"]) * 1e9)
        if start >= end_of_run:
            continue
        rows["kind"].append(fault["kind"])
        rows["cause"].append(KINDS[fault["kind"]][0])
        rows["start_ns"].append(start)
        rows["end_ns"].append(min(start + int(float(fault["duration_s"]) * 1e9), end_of_run))
        rows["params"].append(json.dumps(dataclasses.asdict(params)))
    pq.write_table(pa.Table.from_pydict(rows, schema=FAULTS_SCHEMA), path)
