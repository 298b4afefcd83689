"""loadgen's run directory (requests.parquet + the child's summary) reduced to a ToolReport.

Rows of the measured phase with status ok; `request_id` is the X-Request-ID header loadgen sends
(the server records it), `sent_ns` / `first_token_ns` its socket-level stamps, `arrival_clock` whether the first token's packet
was read alone (`kernel`) or merged with a later one (`merged`: its stamp is the later packet's).
The figures the
tool reports are `loadgen.metrics.summarize`'s (request_throughput, vllm.ttft_ms), which the
child writes to CHILD_SUMMARY with the start of measured load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from .report import ToolReport, ToolRequest

CHILD_SUMMARY = "bench_child.json"


def parse_run_dir(run_dir: str | Path, version: str) -> ToolReport:
    run_dir = Path(run_dir)
    child = json.loads((run_dir / CHILD_SUMMARY).read_text())
    rows = pq.read_table(
        run_dir / "requests.parquet",
        columns=["request_id", "phase", "status", "sent_ns", "first_token_ns", "arrival_clock"],
    ).to_pylist()
    requests = [
        ToolRequest(
            server_id=r["request_id"],
            sent_ns=r["sent_ns"],
            first_token_ns=r["first_token_ns"],
            clock=r["arrival_clock"],
        )
        for r in rows
        if r["phase"] == "measure" and r["status"] == "ok" and r["first_token_ns"]
    ]
    start = child["load_started_ns"]
    return ToolReport(
        tool="spikelens",
        version=version,
        requests_per_s=child["request_throughput"],
        completed=child["completed"],
        ttft_p50_ms=child["ttft_p50_ms"],
        ttft_p99_ms=child["ttft_p99_ms"],
        window_start_ns=start,
        window_end_ns=start + int(child["duration_s"] * 1e9),
        requests=requests,
        match_note="X-Request-ID header (loadgen's request_id; the server records it)",
    )
