"""flows.confirm_source on a real warehouse: a simulated GC-storm run, ingested and analysed, is
read for confirmation; bad input (unknown run, spike out of range, unknown cause) is a one-line
usage error naming the field, and the CLI exits 2 on it before any work."""

import pytest
from typer.testing import CliRunner

from flows.confirm_source import (
    ConfirmUsageError,
    memory_kind,
    outputs_looped,
    read_source,
    runtime_kind,
)
from rca.analyze import analyze_run
from tests.support.runbuilder import SimSpec, write_run
from warehouse.ingest import ingest_run

RUN = "20261201T000000Z-incident-gc-0001"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("state")
    spec = SimSpec(run_id=RUN, incident="gc", magnitude=150.0, duration_s=40, users=6)
    ingest_run(home / "warehouse.duckdb", write_run(home / "runs", spec))
    analyze_run(home / "warehouse.duckdb", RUN)
    return home


def read(home, run_id=RUN, spike=None, cause=None):
    return read_source(home / "warehouse.duckdb", home / "runs" / run_id, run_id, spike, cause)


def test_the_most_severe_spike_its_verdict_and_the_trace_clock(home):
    source = read(home)
    assert source.cause == source.stored_cause == "memory" and source.memory_kind == "gc"
    assert not source.loops  # a GC storm's outputs did not loop
    assert 17 <= source.spike_start_s <= 22 and source.spike_end_s > source.spike_start_s
    assert source.metric in ("itl_p99", "ttft_p99", "e2e_p99")
    # the simulated load starts at t0; its first request a warm-up request after it starts
    assert 0 <= source.t0_offset_s <= 3.0 + 1.0 and source.trace_end_s > 40
    assert source.runtime_kind == "engine" and source.warmup_s == 3.0
    assert read(home, cause="penalty").cause == "penalty"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"spike": 99}, "--spike: 99 is out of range; run .* has spikes 1..\\d+"),
        ({"cause": "gremlins"}, "--cause: unknown cause 'gremlins'; valid: penalty"),
        ({"run_id": "nope"}, "RUN_ID: unknown run 'nope'"),
    ],
)
def test_bad_input_names_the_field_and_the_valid_range(home, kwargs, field):
    with pytest.raises(ConfirmUsageError, match=field):
        read(home, **kwargs)


def test_the_cli_exits_2_with_one_line_on_bad_input(home, monkeypatch):
    from flows.cli import app

    monkeypatch.setenv("SPIKELENS_HOME", str(home))
    result = CliRunner().invoke(app, ["confirm", RUN, "--spike", "99"])
    assert result.exit_code == 2, result.output
    assert "error: --spike: 99 is out of range" in result.output


def test_memory_kind_and_runtime_kind():
    rows = [{"cause": "memory", "signal": "preemptions_per_window", "value": 3.0, "baseline": 0.0}]
    assert memory_kind(rows) == "kv" and memory_kind([]) == "gc"
    assert runtime_kind({"target": "http://x"}) == "target"
    assert runtime_kind({"engine": {"kind": "vllm"}}) == "vllm"
    assert runtime_kind({"engine": {"model": "small"}}) == "engine"


def test_outputs_looped_when_repeated_3grams_rose_by_the_analysis_threshold():
    def row(value, baseline):
        return {
            "cause": "penalty",
            "signal": "repeated_3gram_rate",
            "value": value,
            "baseline": baseline,
        }

    assert outputs_looped([row(0.55, 0.05)])
    assert not outputs_looped([row(0.10, 0.05)])  # a rise of 0.05: below loop_rate_rise 0.2
    assert not outputs_looped([row(None, 0.05)]) and not outputs_looped([])


def test_an_observed_window_has_nothing_to_replay(home, tmp_path):
    run_dir = tmp_path / "obs"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    with pytest.raises(ConfirmUsageError, match="no recorded requests to replay"):
        read_source(home / "warehouse.duckdb", run_dir, "obs", None, None)
