"""The analysis that scales with the run gives the very results of the one it replaced.

The earlier implementation is kept here as the reference: the stack-window query that joined
every stack segment to every GC pause of its process (fixtures/process_stack_windows_reference.sql,
the file as it was), step arrays built value by value from dict rows, the per-window output series
built with a Python repeated-3-gram rate per request and every spike re-reading the collectors'
rows, per-process series built value by value, and GC time taken out of every step's stages,
paused or not. Each simulated run (tests/support/runbuilder.py: the fault kinds of scenarios/eval/ it can
simulate, with their controls) is analysed both ways on the same warehouse; spikes, baselines,
attributions and evidence must be equal value for value (floats bit for bit), and so must the
intermediate signals the stages hand on. Floats are compared bit for bit except one kind:
the reference's per-window averages of step times (step_stages) summed the steps in whatever
order its joins delivered them, which changed with the plan and the threads, so its own last bits
changed from run to run (seen: 13.792387236111114 / …116 / …118 for one window). The new query
sums in step order, always; those values may differ from a reference run by that much, and what
is computed from them a little more: a Pearson r of a series that is constant up to rounding
(other_ms ≈ 0.2 ms in every window) moved by 1e-11. Hence floats within 1e-9; everything else
(ids, counts, causes, texts) is compared exactly. On the bench's 1-min, 10-min and 1-h runs the
stored results were byte-identical but for one such r (0.011575543394881 vs …888881).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import rca.analyze
import rca.attribute
import rca.outside_causes
import rca.stepcost
import warehouse.queries
from rca.analyze import analyze, load_signals, result_rows
from rca.evidence import output_series
from rca.process_evidence import ProcessSignals
from rca.stepcost import STAGES, STEP_COLUMNS, mean_or_zero
from rca.sweep import repeated_ngram_rate
from warehouse.db import connect
from warehouse.queries import query

_FIXTURES = Path(__file__).parent / "fixtures"
# the old step_gc view, written once, inlined where the step_* references used the view
_STEP_GC = (_FIXTURES / "step_gc_reference.sql").read_text().split("\n", 2)[2]
REFERENCE_SQL = {
    name: (_FIXTURES / f"{name}_reference.sql")
    .read_text()
    .replace("    {step_gc_reference}\n", _STEP_GC)
    for name in ("process_stack_windows", "step_stages", "step_timeline", "history_windows")
}


def reference_step_arrays(rows: list[dict]) -> dict[str, np.ndarray]:
    """rca.stepcost.step_arrays as it was: one Python float per value."""
    cols = {
        c: np.array([np.nan if r.get(c) is None else float(r[c]) for r in rows], dtype=np.float64)
        for c in STEP_COLUMNS
    }
    multi = np.nan_to_num(cols["n_ranks"]) > 1
    if multi.any():
        own_comm = np.nan_to_num(cols["comm_ms"])
        cols["forward_ms"] = np.where(
            multi, np.clip(cols["forward_ms"] - own_comm, 0.0, None), cols["forward_ms"]
        )
        comm = np.where(
            multi,
            np.fmax(np.nan_to_num(cols["comm_max_ms"]), np.nan_to_num(cols["comm_ms"])),
            cols["comm_ms"],
        )
        others = sum(np.nan_to_num(cols[s]) for s in STAGES if s not in ("comm_ms", "other_ms"))
        cols["other_ms"] = np.where(
            multi, np.clip(cols["dur_ms"] - others - comm, 0.0, None), cols["other_ms"]
        )
        cols["comm_ms"] = comm
    return cols


def reference_output_series(request_outputs: list[dict], n_windows: int) -> dict[str, np.ndarray]:
    """rca.evidence.output_series as it was: a Python 3-gram set per request, every call."""
    hit: list[list[float]] = [[] for _ in range(n_windows)]
    rep: list[list[float]] = [[] for _ in range(n_windows)]
    for r in request_outputs:
        w = r["window"]
        if not 0 <= w < n_windows:
            continue
        if r.get("max_tokens") and r.get("output_tokens") is not None:
            hit[w].append(
                float(r["output_tokens"] >= r["max_tokens"] or r.get("finish_reason") == "length")
            )
        ids = r.get("output_token_ids")
        if ids is not None and len(ids) >= 3:
            rep[w].append(repeated_ngram_rate(list(ids)))

    def mean(xs):
        return float(np.mean(xs)) if xs else np.nan

    return {
        "hit_max_tokens": np.array([mean(x) for x in hit]),
        "repeated_3gram_rate": np.array([mean(x) for x in rep]),
    }


def reference_load_signals(conn, run_id: str, window_s: float) -> rca.attribute.RunSignals:
    """load_signals as it was: every result as dict rows."""
    signals = load_signals(conn, run_id, window_s)
    signals.steps = reference_step_arrays(query(conn, "step_timeline", run_id=run_id))
    signals.request_outputs = query(conn, "request_outputs", run_id=run_id, window_s=window_s)
    return signals


@pytest.fixture
def reference(monkeypatch):
    """Switch rca.analyze to the reference implementation for the duration of a test."""

    def use() -> None:
        load = warehouse.queries.load_sql
        monkeypatch.setattr(
            warehouse.queries, "load_sql", lambda name: REFERENCE_SQL.get(name) or load(name)
        )
        monkeypatch.setattr(rca.analyze, "load_signals", reference_load_signals)
        monkeypatch.setattr(rca.attribute, "output_series", reference_output_series)
        monkeypatch.setattr(rca.outside_causes, "per_pid", reference_per_pid)
        monkeypatch.setattr(rca.stepcost, "remove_gc_from_stages", reference_remove_gc)
        monkeypatch.setattr(
            ProcessSignals,
            "by_pid",
            lambda self, rows, key, n, fill=np.nan: reference_per_pid(
                getattr(self, rows), key, n, fill
            ),
        )
        monkeypatch.setattr(
            ProcessSignals,
            "shares",
            lambda self, region, n: _reference_shares(self.stack_windows, region, n),
        )

    return use


def reference_remove_gc(steps, in_base):
    """rca.stepcost.remove_gc_from_stages as it was: every step sorted, paused or not."""
    stage = np.stack([np.nan_to_num(steps[s]) for s in STAGES], axis=1)
    base_mean = np.array([mean_or_zero(steps[s][in_base]) for s in STAGES])
    excess = np.clip(stage - base_mean[None, :], 0.0, None)
    order = np.argsort(-excess, axis=1)
    sorted_excess = np.take_along_axis(excess, order, axis=1)
    before = np.cumsum(sorted_excess, axis=1) - sorted_excess
    gc = np.nan_to_num(steps["gc_ms"])[:, None]
    taken_sorted = np.clip(gc - before, 0.0, sorted_excess)
    taken = np.empty_like(taken_sorted)
    np.put_along_axis(taken, order, taken_sorted, axis=1)
    return {s: stage[:, i] - taken[:, i] for i, s in enumerate(STAGES)}


def reference_per_pid(rows, key, n, fill=np.nan, where=lambda r: True):
    """rca.process_evidence.per_pid as it was: one Python step per row."""
    out: dict[int, tuple[str, np.ndarray]] = {}
    for r in rows:
        if not where(r) or not 0 <= r["window"] < n:
            continue
        pid = int(r["pid"])
        if pid not in out:
            out[pid] = (r.get("role") or "?", np.full(n, fill))
        if r.get(key) is not None:
            out[pid][1][r["window"]] = float(r[key])
    return out


def _reference_shares(rows, region, n):
    from rca.process_evidence import _share_series

    busy = reference_per_pid(rows, "busy_share", n, where=lambda r: r["region"] != "idle")
    return _share_series(rows, region, n, busy)


def _same(new, old) -> bool:
    """Equal, except that floats may differ in their last bits: see the module docstring. NaN
    equals NaN."""
    if isinstance(new, float) and isinstance(old, float):
        return (math.isnan(new) and math.isnan(old)) or math.isclose(
            new, old, rel_tol=1e-9, abs_tol=1e-9
        )
    if isinstance(new, (list, tuple)) and isinstance(old, (list, tuple)):
        return len(new) == len(old) and all(_same(a, b) for a, b in zip(new, old))
    if isinstance(new, dict) and isinstance(old, dict):
        return new.keys() == old.keys() and all(_same(new[k], old[k]) for k in new)
    return new == old


def _results(db, run_id, threads: int | None = None) -> dict[str, list[dict]]:
    conn = connect(db, read_only=True)
    try:
        if threads:
            conn.execute(f"SET threads = {threads}")
        return result_rows(analyze(conn, run_id))
    finally:
        conn.close()


# The fault kinds of scenarios/eval/ the run builder simulates, their collectors' view, and
# controls (noise and box contention that make minor spikes of their own).
RUNS = {
    "gc-storm": dict(incident="gc", collectors=True),
    "gc-storm-long-noisy": dict(
        incident="gc",
        collectors=True,
        duration_s=120.0,
        incident_start_s=70.0,
        contention_p=0.004,
        outlier_p=0.03,
        seed=3,
    ),
    "kv-pressure": dict(incident="kv"),
    "slow-path": dict(incident="penalty", collectors=True),
    "repetition": dict(incident="repetition", magnitude=200.0),
    "burst": dict(incident="load"),
    "straggler": dict(incident="comm", tp=2),
    "alloc-churn": dict(incident="alloc"),
    "cpu-contention": dict(incident="host", collectors=True),
    "control-noisy": dict(contention_p=0.01, seed=5),
}


@pytest.mark.parametrize("case", sorted(RUNS))
def test_results_identical_to_the_reference_implementation(case, warehouse_with, reference):
    db, run_id = warehouse_with(**RUNS[case])
    new = _results(db, run_id)
    reference()
    old = _results(db, run_id, threads=1)
    if RUNS[case].get("incident"):
        assert new["spikes"], f"{case}: the run should have a spike to compare"
    for table in ("analyses", "spikes", "attributions", "evidence"):
        diff = [(a, b) for a, b in zip(new[table], old[table]) if not _same(a, b)]
        assert len(new[table]) == len(old[table]) and not diff, f"{case}: {table} differ: {diff}"


@pytest.mark.parametrize(
    "case", ["gc-storm", "gc-storm-long-noisy", "slow-path", "repetition", "straggler"]
)
def test_signals_identical_to_the_reference_implementation(case, warehouse_with):
    db, run_id = warehouse_with(**RUNS[case])
    conn = connect(db, read_only=True)
    try:
        signals = load_signals(conn, run_id, 1.0)
        old_steps = reference_step_arrays(query(conn, "step_timeline", run_id=run_id))
        old_outputs = query(conn, "request_outputs", run_id=run_id, window_s=1.0)
        new_stacks = query(conn, "process_stack_windows", run_id=run_id, window_s=1.0)
        old_stacks = conn.execute(
            REFERENCE_SQL["process_stack_windows"], {"run_id": run_id, "window_s": 1.0}
        ).fetchall()
        params = {
            "step_stages": {"run_id": run_id, "window_s": 1.0},
            "step_timeline": {"run_id": run_id},
            "history_windows": {"run_id": run_id, "window_s": 1.0},
        }
        conn.execute("SET threads = 1")
        reference_rows = {
            name: conn.execute(REFERENCE_SQL[name], params[name]).fetchall() for name in params
        }
        new_rows = {name: query(conn, name, **params[name]) for name in params}
    finally:
        conn.close()
    assert [tuple(r.values()) for r in new_stacks] == old_stacks
    for name, rows in new_rows.items():
        assert _same([tuple(r.values()) for r in rows], reference_rows[name]), name
    assert set(signals.steps) == set(old_steps)
    for column, values in old_steps.items():
        assert np.array_equal(signals.steps[column], values, equal_nan=True), column
    n = len(signals.windows)
    new_series = output_series(signals.request_outputs, n)
    for name, values in reference_output_series(old_outputs, n).items():
        assert np.array_equal(new_series[name], values, equal_nan=True), name
    # dict rows (as tests build them) give the same series as the Arrow table
    for name, values in output_series(old_outputs, n).items():
        assert np.array_equal(new_series[name], values, equal_nan=True), name
