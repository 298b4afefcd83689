"""spikelens_common.ground_truth: scheduled windows clipped to the run, one schema, atomic writes."""

import json

import pyarrow.parquet as pq

from spikelens_common.fault_params import BurstParams
from spikelens_common.ground_truth import (
    FAULTS_SCHEMA,
    Scheduled,
    Window,
    params_json,
    scheduled_windows,
    write_windows,
)


def test_windows_are_clipped_to_the_run_and_late_ones_dropped():
    faults = [
        Scheduled("load.burst", "load", 1.0, 2.0, BurstParams()),
        Scheduled("load.burst", "load", 4.0, 10.0, BurstParams(factor=2)),
        Scheduled("load.burst", "load", 9.0, 1.0, BurstParams()),
    ]
    windows = scheduled_windows(faults, t0_ns=10**9, duration_s=8)
    assert [(w.start_ns, w.end_ns) for w in windows] == [
        (2 * 10**9, 4 * 10**9),
        (5 * 10**9, 9 * 10**9),
    ]


def test_rows_have_one_schema_and_params_as_sorted_json(tmp_path):
    path = tmp_path / "faults.x.parquet"
    rows = [
        Window("load.burst", "load", 1, 2, BurstParams(factor=4)),
        Window("memory.gc_storm", "memory", 3, None, {"b": 1, "a": 2}),
    ]
    assert write_windows(rows, path) == 2
    table = pq.read_table(path)
    assert table.schema == FAULTS_SCHEMA
    assert table.to_pylist()[1] == {
        "kind": "memory.gc_storm",
        "cause": "memory",
        "start_ns": 3,
        "end_ns": None,
        "params": '{"a": 2, "b": 1}',
    }
    assert json.loads(params_json(BurstParams())) == {"factor": 3.0}
    assert write_windows([], path) == 0 and pq.read_table(path).num_rows == 0
    assert [p.name for p in tmp_path.iterdir()] == ["faults.x.parquet"]  # no tmp file left
