"""py-spy chrometrace events to classified stack segments."""

import json

import pytest

from collectors.chrometrace import read_chrometrace, segments_from_events


def _ev(ph, name, filename, ts, tid=1, pid=10, line=1):
    return {
        "ph": ph,
        "name": name,
        "args": {"filename": filename, "line": line},
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "cat": "py-spy",
    }


def test_segments_replay_each_threads_stack_between_event_times():
    root = {
        "ph": "B",
        "name": 'process 10:"python x"',
        "args": {"filename": "", "line": 0},
        "pid": 10,
        "tid": 1,
        "ts": 0,
    }
    events = [
        root,
        _ev("B", "main", "/a/x.py", 0),
        _ev("B", "apply", "/r/engine/sampling/penalties.py", 0),
        _ev("E", "apply", "/r/engine/sampling/penalties.py", 30_000),
        _ev("B", "Condition.wait", "/usr/lib/threading.py", 30_000),
        _ev("E", "Condition.wait", "/usr/lib/threading.py", 100_000),
        _ev("E", "main", "/a/x.py", 100_000),
        _ev("B", "forward", "/r/engine/model.py", 0, tid=2),
        _ev("E", "forward", "/r/engine/model.py", 50_000, tid=2),
    ]
    rows = segments_from_events(events, origin_ns=1_000).to_pylist()
    assert [(r["tid"], r["region"], r["start_ns"], r["end_ns"]) for r in rows] == [
        (1, "sampling_penalties", 1_000, 30_001_000),
        (1, "idle", 30_001_000, 100_001_000),
        (2, "model_forward", 1_000, 50_001_000),
    ]
    assert rows[0]["frame"].startswith("apply (") and rows[1]["leaf"].startswith("Condition.wait (")
    assert rows[0]["depth"] == 2


def test_an_injector_threads_samples_give_no_segment():
    events = [
        # the engine's own gc_storm churn thread: allocating, then waiting for its next tick
        _ev("B", "Thread._bootstrap", "/usr/lib/threading.py", 0, tid=3),
        _ev("B", "GcStorm._run", "/r/engine/faults/gc_storm.py", 0, tid=3),
        _ev("B", "churn_batch", "/r/engine/faults/gc_storm.py", 0, tid=3),
        _ev("E", "churn_batch", "/r/engine/faults/gc_storm.py", 20_000, tid=3),
        _ev("B", "Event.wait", "/usr/lib/threading.py", 20_000, tid=3),
        _ev("E", "Event.wait", "/usr/lib/threading.py", 40_000, tid=3),
        _ev("E", "GcStorm._run", "/r/engine/faults/gc_storm.py", 40_000, tid=3),
        _ev("E", "Thread._bootstrap", "/usr/lib/threading.py", 40_000, tid=3),
        # the GC hook's churn thread in a vLLM process
        _ev("B", "body", "/r/injectors/process_churn.py", 0, tid=4, pid=11),
        _ev("E", "body", "/r/injectors/process_churn.py", 50_000, tid=4, pid=11),
        # the engine's step loop stopping the storm: its own work, kept
        _ev("B", "step", "/r/engine/llm_engine.py", 0, tid=1),
        _ev("B", "GcStorm.stop", "/r/engine/faults/gc_storm.py", 0, tid=1),
        _ev("E", "GcStorm.stop", "/r/engine/faults/gc_storm.py", 10_000, tid=1),
        _ev("E", "step", "/r/engine/llm_engine.py", 10_000, tid=1),
    ]
    rows = segments_from_events(events, origin_ns=0).to_pylist()
    assert [(r["pid"], r["tid"]) for r in rows] == [(10, 1)]


def test_unreadable_or_malformed_traces_raise_naming_the_file(tmp_path):
    bad = tmp_path / "pyspy-1.json"
    bad.write_text('[{"ph": "B", "name": "x"')  # truncated
    with pytest.raises(ValueError, match="pyspy-1.json: not a py-spy chrometrace"):
        read_chrometrace(bad, 0)
    bad.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(ValueError, match="expected a JSON list"):
        read_chrometrace(bad, 0)
    bad.write_text(json.dumps([{"ph": "B", "name": "x", "args": {"filename": "/f"}}]))
    with pytest.raises(ValueError, match="malformed trace event"):
        read_chrometrace(bad, 0)
