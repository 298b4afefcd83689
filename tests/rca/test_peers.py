"""rca.peers: the peers' frame is cleaned the way spikelens' own attribution reads the signals."""

import pytest

from rca.analyze import analyze_run, load_signals
from rca.peers import UNAVAILABLE_PEERS, peer_answer, peer_frame
from warehouse.db import connect
from warehouse.queries import query


def _spike_frame(db, run_id):
    analyze_run(db, run_id)
    conn = connect(db, read_only=True)
    try:
        spikes = [s for s in query(conn, "spikes", run_id=run_id) if not s["suppressed"]]
        signals = load_signals(conn, run_id, 1.0)
    finally:
        conn.close()
    s = spikes[0]
    return signals, (s["start_s"], s["end_s"]), peer_frame(signals, (s["start_s"], s["end_s"]))


def _rise(frame, col, start_s):
    before, during = frame[frame["time"] < start_s][col], frame[frame["time"] >= start_s][col]
    return float(during.mean() - before.mean())


def test_gc_time_is_its_own_column_taken_out_of_the_stages(warehouse_with):
    db, run_id = warehouse_with(incident="gc")
    _, (start, end), frame = _spike_frame(db, run_id)
    gc_rise = _rise(frame, "gc_ms", start)
    assert gc_rise > 5.0
    # the pauses were taken out of the stage they landed in: no stage rose by the GC time
    for stage in ("forward_ms", "schedule_ms", "penalty_ms", "sample_ms", "other_ms"):
        assert _rise(frame, stage, start) < 0.25 * gc_rise, stage
    # the anomaly segment ends with the spike
    assert frame["time"].max() < end and frame["time"].max() >= end - 1.0


def test_a_signal_that_is_zero_before_the_spike_is_kept_and_ranked(warehouse_with):
    pytest.importorskip("RCAEval")
    db, run_id = warehouse_with(incident="kv", magnitude=0.6)  # the spike starts with preemption
    _, (start, _), frame = _spike_frame(db, run_id)
    before = frame[frame["time"] < start]["preemptions"]
    assert (before == 0).all() and _rise(frame, "preemptions", start) > 0
    # RCAEval's own preprocessing (dataset='custom') would drop it: constant before the spike
    from RCAEval.io.time_series import preprocess

    assert "preemptions" not in preprocess(frame[frame["time"] < start], dataset="custom")
    answer = peer_answer("baro", frame, start)
    assert "preemptions" in answer.metrics


def test_each_ranks_all_reduce_is_not_counted_again_inside_forward(warehouse_with):
    import dataclasses

    from rca.stepcost import step_arrays

    db, run_id = warehouse_with(incident="comm", tp=2)
    signals, (start, _), _ = _spike_frame(db, run_id)
    conn = connect(db, read_only=True)
    try:
        rows = query(conn, "step_timeline", run_id=run_id)
    finally:
        conn.close()
    # as the real engine reports it: each rank's own all-reduce wait runs inside its forward
    inside = [{**r, "forward_ms": (r["forward_ms"] or 0) + (r["comm_ms"] or 0)} for r in rows]
    real = dataclasses.replace(signals, steps=step_arrays(inside))
    frame = peer_frame(real, (start, start + 8))
    comm_rise = _rise(frame, "comm_ms", start)
    assert comm_rise > 5.0
    assert _rise(frame, "forward_ms", start) < 0.25 * comm_rise


def test_other_spikes_are_left_out_of_the_normal_period(warehouse_with):
    db, run_id = warehouse_with(incident="load")
    analyze_run(db, run_id)
    conn = connect(db, read_only=True)
    try:
        signals = load_signals(conn, run_id, 1.0)
    finally:
        conn.close()
    frame = peer_frame(signals, (30.0, 33.0), other_spikes=[(5.0, 8.0)])
    assert not ((frame["time"] >= 5.0) & (frame["time"] < 8.0)).any()
    assert frame["time"].max() == 32.0


@pytest.mark.parametrize("method", ["baro", "nsigma", "circa"])
def test_each_peer_answers_a_ranked_cause_list_without_failing(warehouse_with, method):
    pytest.importorskip("RCAEval")
    db, run_id = warehouse_with(incident="gc")
    _, (start, _), frame = _spike_frame(db, run_id)
    answer = peer_answer(method, frame, start)
    assert not answer.failed and answer.causes
    assert len(set(answer.causes)) == len(answer.causes)
    if method in ("baro", "nsigma"):
        assert answer.causes[0] == "memory"  # GC time, visible now that zeros are kept


def test_unavailable_peers_say_why():
    assert set(UNAVAILABLE_PEERS) == {"rcd", "e_diagnosis"}
    with pytest.raises(ValueError, match="peer method must be one of"):
        peer_answer("rcd", None, 0.0)
