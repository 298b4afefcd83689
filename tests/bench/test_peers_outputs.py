"""Parsers of GuideLLM's, AIPerf's and loadgen's per-request output (bench/peers/*_output.py),
on trimmed files from real runs, and the TTFT-error matching against the server's stamps."""

import json
from pathlib import Path

import pytest

from bench.peers import aiperf_output, guidellm_output, spikelens_output
from bench.peers.figures import ttft_error
from bench.peers.report import distribution, percentile
from tests.support.sse_server import ServedRequest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def served() -> list[ServedRequest]:
    return [ServedRequest(**row) for row in json.loads((FIXTURES / "served.json").read_text())]


def test_guidellm_benchmarks_json():
    report = guidellm_output.parse_benchmarks(FIXTURES / "guidellm_benchmarks.json")
    raw = json.loads((FIXTURES / "guidellm_benchmarks.json").read_text())["benchmarks"][0]
    assert report.tool == "guidellm" and report.version == "0.8.1"
    assert report.requests_per_s == raw["metrics"]["requests_per_second"]["successful"]["mean"]
    assert report.ttft_p50_ms == raw["metrics"]["time_to_first_token_ms"]["successful"]["median"]
    assert report.completed == len(report.requests) == 4
    first = raw["requests"]["successful"][0]
    assert report.requests[0].server_id == first["response_id"].removeprefix("cmpl-")
    # the tool's own TTFT is first_token_iteration - request_start: the stamps we keep
    ttft_ms = (report.requests[0].first_token_ns - report.requests[0].sent_ns) / 1e6
    assert ttft_ms == pytest.approx(first["time_to_first_token_ms"], abs=1e-3)
    assert report.window_start_ns < report.window_end_ns


def test_aiperf_artifacts():
    report = aiperf_output.parse_artifacts(FIXTURES / "aiperf")
    records = [
        json.loads(line)
        for line in (FIXTURES / "aiperf" / "profile_export.jsonl").read_text().splitlines()
    ]
    assert report.tool == "aiperf" and report.version == "0.13.0"
    assert report.completed == len(report.requests) == 4
    req, rec = report.requests[0], records[0]
    assert req.server_id == rec["metadata"]["x_request_id"]
    assert (req.first_token_ns - req.sent_ns) / 1e6 == pytest.approx(
        rec["metrics"]["time_to_first_token"]["value"], abs=1e-6
    )
    assert report.window_start_ns == min(r["metadata"]["request_start_ns"] for r in records)


def test_aiperf_without_records_is_a_clear_error(tmp_path):
    (tmp_path / "profile_export_aiperf.json").write_text(
        (FIXTURES / "aiperf" / "profile_export_aiperf.json").read_text()
    )
    (tmp_path / "profile_export.jsonl").write_text("")
    with pytest.raises(ValueError, match="no completed profiling records"):
        aiperf_output.parse_artifacts(tmp_path)


def test_guidellm_without_benchmarks_is_a_clear_error(tmp_path):
    (tmp_path / "b.json").write_text(json.dumps({"benchmarks": []}))
    with pytest.raises(ValueError, match="no benchmarks"):
        guidellm_output.parse_benchmarks(tmp_path / "b.json")


def test_spikelens_run_dir():
    report = spikelens_output.parse_run_dir(FIXTURES / "spikelens", version="0.1.0")
    child = json.loads((FIXTURES / "spikelens" / "bench_child.json").read_text())
    assert (
        report.requests_per_s == child["request_throughput"]
        and report.completed == child["completed"]
    )
    assert len(report.requests) == 4 and all(
        r.clock in ("kernel", "merged", "read") for r in report.requests
    )
    assert report.window_end_ns - report.window_start_ns == int(child["duration_s"] * 1e9)


@pytest.mark.parametrize(
    "parse",
    [
        lambda: guidellm_output.parse_benchmarks(FIXTURES / "guidellm_benchmarks.json"),
        lambda: aiperf_output.parse_artifacts(FIXTURES / "aiperf"),
        lambda: spikelens_output.parse_run_dir(FIXTURES / "spikelens", version="0.1.0"),
    ],
)
def test_every_tool_matches_the_server_stamps(parse):
    report, stamps = parse(), served()
    err = ttft_error(report, stamps)
    assert err["matched"] == 4 and err["unmatched"] == 0
    by_id = {s.request_id: s for s in stamps}
    expected = sorted(
        abs(r.first_token_ns - by_id[r.server_id].first_chunk_ns) / 1e6 for r in report.requests
    )
    assert err["first_token_abs_err_ms"]["max"] == pytest.approx(expected[-1])
    assert err["first_token_abs_err_ms"]["p50"] == pytest.approx((expected[1] + expected[2]) / 2)
    # the server's own TTFT (5 ms configured) is never below its delay
    assert err["server_ttft_ms"]["p50"] >= 5.0


def test_unknown_ids_are_counted_not_matched():
    report = aiperf_output.parse_artifacts(FIXTURES / "aiperf")
    err = ttft_error(report, served()[:0])
    assert (
        err["matched"] == 0
        and err["unmatched"] == 4
        and err["first_token_abs_err_ms"]["p99"] is None
    )


def test_percentile_is_linear_like_numpy():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10], 99) == 10
    assert percentile([], 50) is None
    assert distribution([3.0, 1.0])["max"] == 3.0
