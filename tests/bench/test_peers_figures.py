"""The peers comparison's JSON (bench/peers/figures.py, process_tree.py): every documented
field, CPU counted over a whole process tree, medians over rounds and the ratios to the best peer."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.peers import aiperf_output, guidellm_output, spikelens_output
from bench.peers.figures import MEDIAN_KEYS, median_of_runs, peer_ratios, tool_figures
from bench.peers.process_tree import TreeSampler
from tests.support.sse_server import ServedRequest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIELDS = {
    "version",
    "returncode",
    "wall_s",
    "requests_per_s",
    "completed",
    "server_requests_per_s",
    "measured_window_s",
    "processes_seen",
    "active_processes",
    "active",
    "requests_per_s_per_process",
    "cpu_s_measured",
    "cpu_s_total",
    "cpu_percent_measured",
    "cpu_ms_per_request",
    "ttft_ms_reported",
    "ttft_error",
    "server_cpu_percent",
}

# A parent that starts a child burning ~0.2 s of CPU, then waits for it: both are the "tool".
BURN = (
    "import subprocess, sys; subprocess.run([sys.executable, '-c', "
    "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.2: pass'])"
)


def test_sampler_counts_the_children():
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    with TreeSampler(proc.pid, interval_s=0.02, also=lambda: 1.0) as sampler:
        proc.wait(timeout=60)
    start, end = sampler.times[0], time.time_ns()
    assert len(sampler.names) >= 2
    assert sampler.cpu_between(start, end) >= 0.15  # the child's burn, seen from outside
    assert any(share > 0 for share in sampler.active_processes(start, end, min_share=1e-4).values())
    assert sampler.also_between(start, end) == 0.0


def _sampler() -> TreeSampler:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    with TreeSampler(proc.pid, interval_s=0.02) as sampler:
        proc.wait(timeout=60)
    return sampler


def test_figures_have_every_field():
    served = [ServedRequest(**row) for row in json.loads((FIXTURES / "served.json").read_text())]
    reports = {
        "guidellm": guidellm_output.parse_benchmarks(FIXTURES / "guidellm_benchmarks.json"),
        "aiperf": aiperf_output.parse_artifacts(FIXTURES / "aiperf"),
        "spikelens": spikelens_output.parse_run_dir(FIXTURES / "spikelens", version="0.1.0"),
    }
    sampler = _sampler()
    runs = {
        tool: [tool_figures(report, served, sampler, returncode=0, wall_s=1.0)]
        for tool, report in reports.items()
    }
    for (row,) in runs.values():
        assert set(row) >= FIELDS, FIELDS - set(row)
        assert row["ttft_error"]["matched"] == 4
        assert row["requests_per_s_per_process"] == row["requests_per_s"] / row["active_processes"]
    assert "first_token_abs_err_ms_by_clock" in runs["spikelens"][0]["ttft_error"]
    median = median_of_runs(runs)
    assert set(median["aiperf"]) == set(MEDIAN_KEYS)
    ratio = peer_ratios(median)
    assert ratio["best_peer"] in ("guidellm", "aiperf")
    assert ratio["requests_per_s"] == pytest.approx(
        median["spikelens"]["requests_per_s"] / median[ratio["best_peer"]]["requests_per_s"]
    )
    assert set(ratio["goal"]) == {
        "per_process_at_least",
        "ttft_error_p99_ms_at_most",
        "per_process_met",
        "ttft_error_met",
    }


def _row(rps, processes, err_p99):
    return {
        "requests_per_s": rps,
        "requests_per_s_per_process": rps / processes,
        "ttft_error.first_token_abs_err_ms.p99": err_p99,
    }


def test_ratios_take_the_best_peer_raw_and_per_process():
    median = {
        "spikelens": _row(1000, 1, 0.05),
        "guidellm": _row(300, 12, 20),
        "aiperf": _row(400, 4, 100),
    }
    ratio = peer_ratios(median)
    assert ratio["best_peer"] == "aiperf" and ratio["requests_per_s"] == 2.5
    assert ratio["best_peer_per_process"] == "aiperf" and ratio["requests_per_s_per_process"] == 10
    assert ratio["goal"]["per_process_met"] and ratio["goal"]["ttft_error_met"]
    assert not peer_ratios({**median, "spikelens": _row(1000, 1, 0.2)})["goal"]["ttft_error_met"]
    with pytest.raises(ValueError, match="at least one peer"):
        peer_ratios({"spikelens": median["spikelens"]})
