"""What `spikelens confirm` reads of a recorded run before it runs anything: the spike, its
verdict, the scenario as recorded, and the clock facts that place the spike in a replay trace.

Reading it is quick (the warehouse, read-only), so the CLI does it before Prefect starts and a
bad run id or spike index costs nothing: `ConfirmUsageError` names the field and the valid range.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rca.config import CAUSES, AttributeConfig


class ConfirmUsageError(ValueError):
    """Bad input (an unknown run, a spike index out of range, an unknown cause): exit 2."""


@dataclass(frozen=True)
class ConfirmSource:
    """The recorded run and spike a confirmation replays."""

    run_id: str
    run_dir: Path
    spike_id: int
    metric: str  # itl_p99 | ttft_p99 | e2e_p99
    spike_start_s: float  # seconds from the recorded load start
    spike_end_s: float
    stored_cause: str | None  # the analysis' verdict
    cause: str  # the cause confirmed (the stored one, or --cause)
    memory_kind: str  # 'gc' | 'kv': which memory intervention (from the spike's evidence)
    loops: bool  # the spike's outputs looped (from its penalty evidence)
    scenario: dict[str, Any]  # as recorded in run.json
    runtime_kind: str  # engine | vllm | target
    warmup_s: float
    t0_offset_s: float  # the recorded load start on the trace's clock
    trace_end_s: float


def read_source(
    db_path: Path, run_dir: Path, run_id: str, spike: int | None, cause: str | None
) -> ConfirmSource:
    """The run and spike to confirm; raises ConfirmUsageError on bad input. `spike` None: the
    most severe reported spike; `cause` None: the spike's stored verdict."""
    from warehouse.db import connect
    from warehouse.queries import query

    if cause is not None and cause not in CAUSES:
        raise ConfirmUsageError(f"--cause: unknown cause {cause!r}; valid: {', '.join(CAUSES)}")
    if not db_path.exists():
        raise ConfirmUsageError(f"RUN_ID: no warehouse at {db_path}: run a scenario first")
    if not (run_dir / "run.json").is_file():
        raise ConfirmUsageError(f"RUN_ID: unknown run {run_id!r} (no run.json in {run_dir})")
    if not (run_dir / "requests.parquet").is_file():
        raise ConfirmUsageError(
            f"RUN_ID: run {run_id!r} has no recorded requests to replay (an observed window"
            " from Prometheus has none): confirm re-runs a load test's requests"
        )
    with connect(db_path, read_only=True) as conn:
        spikes = query(conn, "spikes", run_id=run_id)
        chosen = _pick_spike(run_id, spikes, spike)
        evidence = [
            e for e in query(conn, "evidence", run_id=run_id) if e["spike_id"] == chosen["spike_id"]
        ]
        facts = query(conn, "confirm_stretch", run_id=run_id, from_s=0.0, to_s=1.0)[0]
    if facts["load_started_ns"] is None or facts["first_send_ns"] is None:
        raise ConfirmUsageError(f"RUN_ID: run {run_id} has no measured load in the warehouse")
    recorded = json.loads((run_dir / "run.json").read_text())
    scenario = dict(recorded.get("scenario") or {})
    return ConfirmSource(
        run_id=run_id,
        run_dir=run_dir,
        spike_id=int(chosen["spike_id"]),
        metric=str(chosen["metric"]),
        spike_start_s=float(chosen["start_s"]),
        spike_end_s=float(chosen["end_s"]),
        stored_cause=chosen["top_cause"],
        cause=cause or chosen["top_cause"] or "unexplained",
        memory_kind=memory_kind(evidence),
        loops=outputs_looped(evidence),
        scenario=scenario,
        runtime_kind=runtime_kind(scenario),
        warmup_s=float(recorded.get("warmup_s") or scenario.get("warmup_s") or 5.0),
        t0_offset_s=(facts["load_started_ns"] - facts["first_send_ns"]) / 1e9,
        trace_end_s=float(facts["trace_end_s"] or 0.0),
    )


def _pick_spike(run_id: str, spikes: list[dict], spike: int | None) -> dict:
    """Spike `spike` (its spike_id, 1..n), or the most severe reported one."""
    if not spikes:
        raise ConfirmUsageError(f"RUN_ID: run {run_id} has no spike to confirm")
    ids = [int(s["spike_id"]) for s in spikes]
    if spike is not None:
        if spike not in ids:
            raise ConfirmUsageError(
                f"--spike: {spike} is out of range; run {run_id} has spikes {min(ids)}..{max(ids)}"
            )
        return next(s for s in spikes if int(s["spike_id"]) == spike)
    reported = [s for s in spikes if not s["suppressed"]] or spikes
    return max(reported, key=lambda s: (s["severity_score"] or 0.0, -int(s["spike_id"])))


def memory_kind(evidence: list[dict]) -> str:
    """'kv' when the spike's memory evidence shows preemptions rising (KV blocks ran out), else
    'gc' (GC pauses)."""
    for e in evidence:
        if e["cause"] == "memory" and e["signal"] == "preemptions_per_window":
            value, base = e["value"] or 0.0, e["baseline"] or 0.0
            if value > 0 and value > base:
                return "kv"
    return "gc"


def outputs_looped(evidence: list[dict], config: AttributeConfig = AttributeConfig()) -> bool:
    """True when the spike's repeated-3-gram rate rose by the analysis' own loop threshold
    (rca.attribute's `loop_rate_rise`): the outputs looped, so the penalty remedy caps them."""
    return any(
        e["signal"] == "repeated_3gram_rate"
        and e["value"] is not None
        and e["value"] - (e["baseline"] or 0.0) >= config.loop_rate_rise
        for e in evidence
    )


def runtime_kind(scenario: dict[str, Any]) -> str:
    """'target', 'vllm' or 'engine' (spikelens' own) from the recorded scenario."""
    if "target" in scenario:
        return "target"
    engine = scenario.get("engine") or {}
    return "vllm" if isinstance(engine, dict) and engine.get("kind") == "vllm" else "engine"
