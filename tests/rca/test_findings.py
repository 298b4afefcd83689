"""rca.findings: the normal-vs-spike comparison and the fault verdicts, stored by analyze_run."""

from dataclasses import dataclass

from rca.analyze import analyze_run
from rca.findings import comparison, fault_verdicts
from warehouse.db import connect
from warehouse.queries import query


@dataclass
class Span:
    spike_id: int
    start_s: float
    end_s: float


def test_comparison_guards_each_spike_and_averages_inside_any():
    windows = [
        {"itl_p99_ms": 100.0 if 10 <= t < 13 else 10.0, "arrivals": 4, "output_tokens_mean": 20}
        for t in range(30)
    ]
    pauses = [{"t_s": 11.5, "duration_ms": 200.0}, {"t_s": 25.0, "duration_ms": 2.0}]
    rows = {r.signal: r for r in comparison(windows, [], pauses, [Span(1, 10.0, 13.0)], 1.0)}
    assert (rows["ITL p99"].normal, rows["ITL p99"].spike) == (10.0, 100.0)
    assert rows["mean GC pause"].spike == 200.0 and rows["mean GC pause"].normal == 2.0
    assert rows["GC pauses per minute"].spike == 20.0  # 1 pause in 3 s
    assert rows["arrivals"].normal == 4.0 and rows["TTFT p99"].normal is None  # no sample
    assert "forward" not in rows  # no step windows: no engine rows
    assert comparison(windows, [], pauses, [], 1.0) == []


def test_fault_verdicts_match_one_to_one_within_the_tolerance():
    faults = [
        {"kind": "memory.gc_storm", "cause": "memory", "start_s": 10.0, "end_s": 14.0},
        {"kind": "load.burst", "cause": "load", "start_s": 40.0, "end_s": None},
    ]
    spikes = [Span(1, 11.0, 13.0), Span(2, 60.0, 62.0)]
    found, missed = fault_verdicts(faults, spikes, {1: "memory", 2: "load"}, 1.0)
    assert (found.spike_id, found.attributed_cause) == (1, "memory")
    assert (missed.spike_id, missed.attributed_cause, missed.end_s) == (None, None, 40.0)


def test_analyze_run_stores_the_findings_with_the_spikes(warehouse_with):
    db, run_id = warehouse_with(incident="gc")
    analysis = analyze_run(db, run_id)
    with connect(db, read_only=True) as conn:
        stored = query(conn, "fault_verdicts", run_id=run_id)
        rows = query(conn, "spike_comparison", run_id=run_id)
    (fault,) = stored
    (spike,) = analysis.spikes
    assert fault["spike_id"] == spike.spike_id and fault["attributed_cause"] == "memory"
    assert [r["signal"] for r in rows] == [c.signal for c in analysis.comparison]
    assert rows[0]["signal"] == "ITL p99" and rows[0]["spike"] > rows[0]["normal"]
