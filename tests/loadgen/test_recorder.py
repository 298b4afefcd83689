"""Recorder rows, cancelled in-flight requests, and the merge of per-process parts."""

import pyarrow.parquet as pq

from loadgen.recorder import REQUESTS_SCHEMA, TOKENS_SCHEMA, Recorder, merge_parts


def start_row(request_id, intended):
    return {
        "request_id": request_id,
        "user": "w0-u0",
        "worker": "0",
        "phase": "measure",
        "intended_send_ns": intended,
        "prompt_tokens_target": 8,
        "max_tokens": 4,
        "temperature": 0.7,
    }


def test_flush_writes_finished_and_cancelled_rows_and_merge_joins_parts(tmp_path):
    parts = tmp_path / "parts"
    a = Recorder(parts, "p1")
    a.start(start_row("r2", 20))
    a.finish(
        "r2",
        chunk_arrivals_ns=[25, 27],
        chunk_tokens=[1, 1],
        sent_ns=21,
        first_token_ns=25,
        done_ns=28,
        status="ok",
        output_tokens=2,
        token_count_source="usage",
        http_status=200,
    )
    a.start(start_row("r3", 30))  # still streaming when the test stops
    a.flush()
    b = Recorder(parts, "p2")
    b.start(start_row("r1", 10))
    b.finish("r1", chunk_arrivals_ns=[15], chunk_tokens=[1], status="ok", http_status=200)
    b.flush()

    assert merge_parts(parts, tmp_path) == (3, 3)
    requests = pq.read_table(tmp_path / "requests.parquet")
    assert requests.schema == REQUESTS_SCHEMA
    rows = requests.to_pylist()
    assert [r["request_id"] for r in rows] == ["r1", "r2", "r3"]  # by intended send time
    assert rows[2]["status"] == "cancelled" and rows[2]["done_ns"] is not None
    assert rows[1]["temperature"] == 0.7 and rows[1]["top_p"] is None
    tokens = pq.read_table(tmp_path / "tokens.parquet")
    assert tokens.schema == TOKENS_SCHEMA
    assert tokens.to_pylist()[1:] == [
        {"request_id": "r2", "index": 0, "arrival_ns": 25, "n_tokens": 1},
        {"request_id": "r2", "index": 1, "arrival_ns": 27, "n_tokens": 1},
    ]


def test_merge_without_parts_writes_empty_tables(tmp_path):
    assert merge_parts(tmp_path / "none", tmp_path) == (0, 0)
    assert pq.read_table(tmp_path / "requests.parquet").schema == REQUESTS_SCHEMA


def test_start_rejects_missing_and_unknown_columns(tmp_path):
    rec = Recorder(tmp_path, "x")
    import pytest

    with pytest.raises(ValueError, match="missing intended_send_ns"):
        rec.start({k: v for k, v in start_row("r", 1).items() if k != "intended_send_ns"})
    with pytest.raises(ValueError, match="unknown columns colour"):
        rec.start({**start_row("r", 1), "colour": "red"})
