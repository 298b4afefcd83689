"""rca.placebo: clean stretches attributed as spikes say how often each cause's signals fire."""

from rca.analyze import load_signals
from rca.placebo import Placebo, PlaceboConfig, placebo_rates, run_placebos
from warehouse.db import connect


def _placebos(db, run_id, options=None):
    conn = connect(db, read_only=True)
    try:
        return run_placebos(load_signals(conn, run_id, 1.0), options=options)
    finally:
        conn.close()


def test_a_clean_run_mostly_says_unexplained_and_a_gc_stretch_says_memory(warehouse_with):
    db, clean = warehouse_with(incident=None, duration_s=60.0)
    found = _placebos(db, clean)
    assert found and all(p.last - p.first + 1 == PlaceboConfig().windows for p in found)
    assert all(p.first >= PlaceboConfig().skip_windows for p in found)
    rates = placebo_rates(found, 1)
    assert rates["by_cause"]["unexplained"]["share"] >= 0.8
    # the same cut over a run whose stretch 20-25 s holds 40-ms GC pauses: that stretch, a
    # placebo as far as the cut knows, is named memory: the placebos do fire where a signal moves
    db, gc = warehouse_with(incident="gc", magnitude=40.0, duration_s=60.0, incident_start_s=20.0)
    inside = [p for p in _placebos(db, gc) if p.first == 20 and p.metric == "itl_p99"]
    assert [p.verdict for p in inside] == ["memory"]


def test_placebo_rates_count_every_answer_and_the_share_that_named_a_cause():
    found = [
        Placebo("itl_p99", 10, 14, "unexplained"),
        Placebo("itl_p99", 15, 19, "load"),
        Placebo("ttft_p99", 10, 14, "unexplained"),
        Placebo("ttft_p99", 15, 19, "unexplained"),
    ]
    rates = placebo_rates(found, 2)
    assert (rates["runs"], rates["placebos"], rates["named"]) == (2, 4, 0.25)
    assert rates["by_cause"]["load"] == {"n": 1, "share": 0.25}
    assert rates["by_cause"]["memory"] == {"n": 0, "share": 0.0}
    assert rates["by_metric"] == {"itl_p99": 2, "ttft_p99": 2}
    assert placebo_rates([], 0)["named"] is None
