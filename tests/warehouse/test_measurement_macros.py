"""The measurement macros (warehouse/macros.sql) against their owner, loadgen.metrics, on the same
run.

loadgen/metrics.py defines TTFT, ITL, E2E and the request counts (vLLM's `bench serve`
definitions); run.json's summary is computed from it, the report from the warehouse's totals
query. They must agree on the same files, including the cases where definitions drift: failed
and cancelled requests, chunks without content, warm-up rows.
"""

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from loadgen.metrics import summarize
from warehouse.db import connect
from warehouse.ingest import ingest_run
from warehouse.queries import query

RUN_ID = "20261201T000000Z-test-0001"


def _with_statuses(run_dir):
    """Give the built run the statuses a real one has: most ok, some failed mid-stream, a few
    cancelled at the end of the load; and an empty (role) chunk ahead of some streams."""
    path = run_dir / "requests.parquet"
    req = pq.read_table(path)
    n = req.num_rows
    status = ["error" if i % 11 == 3 else "cancelled" if i % 17 == 5 else "ok" for i in range(n)]
    error = [
        "HTTP 500" if s == "error" else "load stopped" if s == "cancelled" else "" for s in status
    ]
    for name, values in (
        ("status", status),
        ("error", error),
        ("token_count_source", ["chunks"] * n),
    ):
        if name in req.column_names:
            req = req.drop_columns([name])
        req = req.append_column(name, pa.array(values))
    pq.write_table(req, path)
    tok_path = run_dir / "tokens.parquet"
    tok = pq.read_table(tok_path)
    first = tok.filter(pc.equal(tok["index"], 0))
    first = first.take(list(range(0, first.num_rows, 5)))  # warm-up and measured requests
    empty = pa.table(
        {
            "request_id": first["request_id"],
            "index": pc.subtract(first["index"], 1),
            "arrival_ns": pc.subtract(first["arrival_ns"], 1_000_000),
            "n_tokens": pa.array([0] * first.num_rows, tok.schema.field("n_tokens").type),
        }
    )
    pq.write_table(pa.concat_tables([tok, empty.cast(tok.schema)]), tok_path)
    return pq.read_table(path), pq.read_table(tok_path)


@pytest.fixture
def run(tmp_path, make_run):
    run_dir = make_run(
        incident="gc", duration_s=10.0, incident_start_s=4.0, incident_duration_s=3.0
    )
    requests, tokens = _with_statuses(run_dir)
    db_path = tmp_path / "w.duckdb"
    ingest_run(db_path, run_dir)
    conn = connect(db_path)
    yield conn, requests, tokens
    conn.close()


def test_totals_agree_with_the_run_summary(run):
    conn, requests, tokens = run
    summary = summarize(requests, tokens)
    totals = query(conn, "totals", run_id=RUN_ID)[0]
    assert summary["failed"] > 0 and summary["cancelled"] > 0  # the drift cases are there
    assert totals["requests"] == summary["requests"]
    assert totals["errors"] == summary["failed"]
    assert totals["output_tokens"] == summary["output_tokens"]
    vllm = summary["vllm"]
    for metric in ("ttft", "itl", "e2e"):
        for p in (50, 99):
            assert totals[f"{metric}_p{p}_ms"] == pytest.approx(
                vllm[f"{metric}_ms"][f"p{p}"], rel=1e-9
            )


def test_latency_samples_count_what_the_summary_counts(run):
    conn, requests, tokens = run
    vllm = summarize(requests, tokens)["vllm"]
    rows = query(conn, "latency_samples", run_id=RUN_ID)
    counts = {m: sum(r["metric"] == m for r in rows) for m in ("ttft", "itl", "e2e", "error")}
    assert counts["ttft"] == vllm["ttft_ms"]["count"]
    assert counts["itl"] == vllm["itl_ms"]["count"]
    assert counts["e2e"] == vllm["e2e_ms"]["count"]
    s = summarize(requests, tokens)
    assert counts["error"] == s["completed"] + s["failed"]  # cancelled: neither
    assert sum(r["value_ms"] for r in rows if r["metric"] == "error") == s["failed"]


def test_windows_pool_to_the_same_samples(run):
    conn, requests, tokens = run
    vllm = summarize(requests, tokens)["vllm"]
    windows = query(conn, "windows", run_id=RUN_ID, window_s=1.0)
    # every measured sample lands in a window of the measured phase, none twice
    assert sum(w["ttft_n"] for w in windows) == vllm["ttft_ms"]["count"]
    assert sum(w["e2e_n"] for w in windows) == vllm["e2e_ms"]["count"]
    assert (
        sum(w["itl_n"] for w in windows) <= vllm["itl_ms"]["count"]
    )  # gaps after the end drop out


def test_e2e_ends_at_the_last_token_in_the_warehouse_too(tmp_path):
    """vLLM tests/benchmarks/test_endpoint_request_func_timing.py, through ingest and the macros:
    5 tokens one tick (1 ms) apart after the send, the usage chunk a tick after the last token:
    E2E is 5 ms, not 6, and E2E − TTFT is the sum of the ITL gaps; a usage-only stream is a
    failed request with no latency sample."""
    from tests.support.streams import (
        DONE,
        MS,
        Stream,
        record,
        token_chunk,
        usage_chunk,
        write_run_dir,
    )

    start = 1_800_000_000_000_000_000
    lines = [(token_chunk(i, chat=True), start + (i + 1) * MS) for i in range(5)]
    lines += [(usage_chunk(5), start + 6 * MS), (DONE, start + 6 * MS)]
    usage_only = [(usage_chunk(0), start + MS), (DONE, start + MS)]
    requests, tokens = record({"r": Stream(start, lines), "u": Stream(start, usage_only)})
    db_path = tmp_path / "w.duckdb"
    ingest_run(db_path, write_run_dir(tmp_path / "runs", "vectors", requests, tokens))
    with connect(db_path, read_only=True) as conn:
        rows = query(conn, "latency_samples", run_id="vectors")
    by_metric: dict[str, list[float]] = {}
    for r in rows:
        if r["request_id"] == "r":
            by_metric.setdefault(r["metric"], []).append(r["value_ms"])
    assert by_metric["e2e"] == [5.0] and by_metric["ttft"] == [1.0]
    assert by_metric["e2e"][0] - by_metric["ttft"][0] == sum(by_metric["itl"])
    assert [(r["metric"], r["value_ms"]) for r in rows if r["request_id"] == "u"] == [
        ("error", 1.0)
    ]
