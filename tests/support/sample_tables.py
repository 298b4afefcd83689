"""Hand-built requests/tokens tables in loadgen's run-file schemas, for tests of the latency
definitions (loadgen.metrics) and of what benchmarks compute from them. Times are given in ms."""

import pyarrow as pa

from loadgen.recorder import REQUESTS_SCHEMA, TOKENS_SCHEMA

MS = 1_000_000


def requests_table(rows: list[dict]) -> pa.Table:
    """requests.parquet rows; columns a row does not name are null."""
    full = [{name: row.get(name) for name in REQUESTS_SCHEMA.names} for row in rows]
    return pa.Table.from_pylist(full, schema=REQUESTS_SCHEMA)


def tokens_table(chunks: dict[str, list[float]]) -> pa.Table:
    """tokens.parquet from {request_id: [arrival_ms, ...]}: one token per chunk."""
    rows = [
        {"request_id": rid, "index": i, "arrival_ns": t * MS, "n_tokens": 1}
        for rid, times in chunks.items()
        for i, t in enumerate(times)
    ]
    return pa.Table.from_pylist(rows, schema=TOKENS_SCHEMA)
