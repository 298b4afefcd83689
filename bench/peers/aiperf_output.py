"""AIPerf 0.13.0's artifacts (`--output-artifact-dir DIR`) reduced to a ToolReport.

`profile_export_aiperf.json` holds the summary (`request_throughput.avg`,
`time_to_first_token.{p50, p99}` in ms, `request_count.avg`); `profile_export.jsonl` one record a
request (the default `--export-level records`): `metadata.x_request_id` (the X-Request-ID header
it sent, which the no-op server records), `metadata.request_start_ns` (`time.time_ns()` taken
with the perf-counter start of its TTFT), `metadata.request_end_ns`, `metadata.benchmark_phase`,
and `metrics.time_to_first_token.value` (ms). The first token's wall time is
request_start_ns + TTFT.
"""

from __future__ import annotations

import json
from pathlib import Path

from .report import ToolReport, ToolRequest

SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"


def parse_artifacts(artifact_dir: str | Path) -> ToolReport:
    """The profiling phase of one AIPerf run."""
    artifact_dir = Path(artifact_dir)
    summary = json.loads((artifact_dir / SUMMARY).read_text())
    requests, starts, ends, completed = [], [], [], 0
    for lineno, line in enumerate((artifact_dir / RECORDS).read_text().splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        meta, metrics = record["metadata"], record.get("metrics") or {}
        if meta.get("benchmark_phase", "profiling") != "profiling" or meta.get("was_cancelled"):
            continue
        starts.append(meta["request_start_ns"])
        ends.append(meta["request_end_ns"])
        ttft = metrics.get("time_to_first_token")
        if ttft is None or record.get("error"):
            continue
        if ttft.get("unit", "ms") != "ms":
            raise ValueError(
                f"{RECORDS}:{lineno}: time_to_first_token unit {ttft.get('unit')!r}, expected 'ms'"
            )
        completed += 1
        requests.append(
            ToolRequest(
                server_id=meta.get("x_request_id"),
                sent_ns=meta["request_start_ns"],
                first_token_ns=meta["request_start_ns"] + round(ttft["value"] * 1e6),
            )
        )
    if not requests:
        raise ValueError(f"{artifact_dir / RECORDS}: no completed profiling records")
    ttft_summary = summary["time_to_first_token"]
    return ToolReport(
        tool="aiperf",
        version=summary.get("aiperf_version", "?"),
        requests_per_s=summary["request_throughput"]["avg"],
        completed=completed,
        ttft_p50_ms=ttft_summary["p50"],
        ttft_p99_ms=ttft_summary["p99"],
        window_start_ns=min(starts),
        window_end_ns=max(ends),
        requests=requests,
        match_note="X-Request-ID header (AIPerf sends one per request; the server records it)",
    )
