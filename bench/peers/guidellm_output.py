"""GuideLLM 0.8.1's benchmarks.json (`--output kind=json,path=FILE`) reduced to a ToolReport.

Per benchmark it holds `metrics` (distributions: `requests_per_second.successful.mean`,
`time_to_first_token_ms.successful.{median, percentiles.p99}`), the measured window
(`scheduler_metrics.measure_start_time` / `measure_end_time`, seconds) and every request under
`requests.successful`: `info.timings.request_start` (headers about to be written) and
`first_token_iteration` (first content line read), both `time.time()` seconds. GuideLLM sends
no request id header; it keeps the response's `id` as `response_id`, and the no-op server names
that `cmpl-<its request id>`, which is what matches the two.
"""

from __future__ import annotations

import json
from pathlib import Path

from .report import ToolReport, ToolRequest

RESPONSE_PREFIX = "cmpl-"


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def parse_benchmarks(path: str | Path, version: str = "0.8.1") -> ToolReport:
    """The first (only) benchmark of a GuideLLM run at one concurrency."""
    data = json.loads(Path(path).read_text())
    benchmarks = data.get("benchmarks") or []
    if not benchmarks:
        raise ValueError(f"{path}: no benchmarks in GuideLLM's output")
    bench = benchmarks[0]
    metrics = bench["metrics"]
    ttft = metrics["time_to_first_token_ms"]["successful"]
    window = bench["scheduler_metrics"]
    requests = []
    for row in bench["requests"]["successful"]:
        timings = row["info"]["timings"]
        if timings.get("first_token_iteration") is None:
            continue
        response_id = row.get("response_id") or ""
        server_id = (
            response_id[len(RESPONSE_PREFIX) :] if response_id.startswith(RESPONSE_PREFIX) else None
        )
        requests.append(
            ToolRequest(
                server_id=server_id,
                sent_ns=_ns(timings["request_start"]),
                first_token_ns=_ns(timings["first_token_iteration"]),
            )
        )
    return ToolReport(
        tool="guidellm",
        version=data.get("metadata", {}).get("guidellm_version", version),
        requests_per_s=metrics["requests_per_second"]["successful"]["mean"],
        completed=len(bench["requests"]["successful"]),
        ttft_p50_ms=ttft["median"],
        ttft_p99_ms=ttft["percentiles"]["p99"],
        window_start_ns=_ns(window["measure_start_time"]),
        window_end_ns=_ns(window["measure_end_time"]),
        requests=requests,
        match_note="response_id = 'cmpl-' + the server's request id (GuideLLM sends no id header)",
    )
