"""Page contexts made by the real builders (pages/) over a warehouse of simulated runs
(tests/support/runbuilder.py), for tests of the renderer: what a template test renders is what
the flows render, not a hand-made dict.

`RealPages.build(root)` ingests and analyses a gc incident, a kv incident on two ranks, two
control runs and an invalid (starved) run, judges the controls as nightlies, and stores a
capacity sweep over three of them; each `*_context` method then builds one page's context.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pages.capacity import CapacityContext
from pages.evaluation import EvaluationContext
from pages.incident import IncidentContext
from pages.nightly import NightlyContext
from pages.sweep import SweepContext
from tests.support.runbuilder import SimSpec, write_run

GC, KV, CONTROL, CONTROL_2, STARVED = "p-gc", "p-kv", "p-control", "p-control-2", "p-starved"
SWEEP_ID = "p-capacity-sweep"
STARVED_HEALTH = {
    "valid": False,
    "reasons": ["client 0 scheduling lag p99 120.3 ms > 50 ms"],
    "workers": [],
}
SPECS = (
    SimSpec(run_id=GC, incident="gc"),
    SimSpec(run_id=KV, incident="kv", tp=2),
    SimSpec(run_id=CONTROL, incident=None),
    SimSpec(run_id=CONTROL_2, incident=None, seed=1, t0_ns=1_800_000_100_000_000_000),
    SimSpec(run_id=STARVED, incident=None, client_health=STARVED_HEALTH),
)


@dataclass(frozen=True)
class RealPages:
    """A warehouse of analysed simulated runs and the builders of each page over it."""

    db: Path

    @classmethod
    def build(cls, root: Path) -> RealPages:
        from rca.analyze import analyze_run
        from warehouse.ingest import ingest_run

        db = root / "w.duckdb"
        for spec in SPECS:
            ingest_run(db, write_run(root / "runs", spec))
            analyze_run(db, spec.run_id)
        pages = cls(db)
        pages._judge_nightlies()
        pages._store_sweep()
        return pages

    def _judge_nightlies(self) -> None:
        from flows.nightly import compare
        from flows.nightly_config import NightlyConfig, default_config_dir

        config = NightlyConfig.load(default_config_dir())
        compare.fn(self.db, "sim-control", CONTROL, [], config)
        compare.fn(self.db, "sim-control", CONTROL_2, [CONTROL], config)

    def _store_sweep(self) -> None:
        """A capacity sweep whose steps are three of the runs, stored as flows.capacity does."""
        from flows.capacity import CapacityOptions, SweepRecord, _rows, step_evidence, store
        from rca.capacity import StepOutcome

        figures = {"request_throughput": 3.0, "goodput": 2.8, "ttft_p99_ms": 120.0}
        steps = [
            StepOutcome(2.0, CONTROL, 40, 39, 0.975, True, figures),
            StepOutcome(4.0, GC, 40, 30, 0.75, False, {**figures, "ttft_p99_ms": 400.0}),
            StepOutcome(8.0, KV, 40, 10, 0.25, False, {**figures, "ttft_p99_ms": 900.0}),
        ]
        evidence = {s.run_id: step_evidence.fn(self.db, s.run_id) for s in steps}
        record = SweepRecord(SWEEP_ID, "sim", {"ttft_ms": 150}, 1_800_000_000_000_000_000, "cmd")
        store.fn(self.db, _rows(record, CapacityOptions(loads=(2, 4, 8)), steps, evidence))

    def incident_context(self, run_id: str = GC) -> IncidentContext:
        from pages.incident import build_incident_context

        return build_incident_context(self.db, run_id)

    def nightly_context(self, run_id: str = CONTROL_2) -> NightlyContext:
        from pages.nightly import build_nightly_context

        return build_nightly_context(self.db, run_id)

    def sweep_context(self, run_id: str = GC) -> SweepContext:
        from flows.sweep import summarise_cells
        from pages.sweep import build_sweep_context

        cells = summarise_cells.fn(self.db, run_id)
        temperatures = sorted({c["temperature"] for c in cells})
        penalties = sorted({c["frequency_penalty"] for c in cells})
        return build_sweep_context(self.db, run_id, temperatures, penalties, cells)

    def evaluation_context(self) -> EvaluationContext:
        from pages.evaluation import build_evaluation_context
        from pages.run_header import RunHeader
        from rca.evaluate import evaluate

        runs = [GC, KV, CONTROL]
        scores = evaluate(self.db, runs, tolerance_windows=2, peers=(), seed=0)
        suite = RunHeader(run_id="p-suite", command="spikelens evaluate suite")
        return build_evaluation_context(scores, suite)

    def capacity_context(self) -> CapacityContext:
        from pages.capacity import build_capacity_context

        return build_capacity_context(self.db, SWEEP_ID)
