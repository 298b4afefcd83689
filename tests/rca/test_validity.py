"""rca.validity: an invalid run's spike gets an engine verdict only when a server-side time rose.

Runs whose load generator saturated (status 'invalid') are built by tests/support/runbuilder.py
(engine faults the server's step times show: their verdicts stand) and by the spike builder
(client-side rises the engine's times do not show: no engine verdict, whatever the queue and
output signals say).
"""

from __future__ import annotations

import dataclasses

import pytest

from rca.analyze import analyze_run
from rca.attribute import attribute_spike
from rca.config import AttributeConfig
from rca.validity import check_validity, server_saw_spike
from tests.support.spikesignals import SpikeRun, spike_signals


@pytest.mark.parametrize("incident,cause", [("gc", "memory"), ("load", "load")])
def test_an_invalid_run_keeps_the_verdicts_its_server_times_show(warehouse_with, incident, cause):
    db, run_id = warehouse_with(incident=incident, status="invalid")
    analysis = analyze_run(db, run_id)
    assert analysis.spikes
    assert {analysis.attributions[s.spike_id].top_cause for s in analysis.spikes} == {cause}


def test_an_invalid_run_without_step_traces_reads_the_servers_own_latency(warehouse_with):
    """/metrics: vLLM's own E2E latency series rose with a GC stall, so the verdict stands."""
    db, run_id = warehouse_with(
        incident="gc", status="invalid", step_trace=False, engine='{"kind": "vllm"}'
    )
    analysis = analyze_run(db, run_id)
    assert analysis.spikes
    top = analysis.attributions[analysis.spikes[0].spike_id]
    assert top.method == "metric_rank" and "run invalid" not in top.summary


def _client_side_only(**run) -> tuple:
    """A TTFT rise the engine's steps do not show and no server socket times (as on vLLM)."""
    spike, signals = spike_signals(SpikeRun(**run))
    return spike, dataclasses.replace(signals, transit_windows=[])


@pytest.mark.parametrize(
    "run,engine_cause",
    [
        (dict(output_growth=2.0), "load"),  # longer outputs, no loops
        (dict(output_growth=2.0, loop_rate=0.5), "penalty"),  # looping outputs
    ],
)
def test_an_invalid_run_gets_no_engine_verdict_from_client_side_times(run, engine_cause):
    spike, signals = _client_side_only(**run)
    config = AttributeConfig()
    valid = attribute_spike(spike, [spike], signals, config)
    assert valid.top_cause == engine_cause  # what the same signals say in a valid run
    assert not server_saw_spike(spike, [spike], signals, config)
    invalid = dataclasses.replace(signals, run_status="invalid")
    out = check_validity({spike.spike_id: valid}, [spike], invalid, config)[spike.spike_id]
    assert out.top_cause == "unexplained" and out.uncovered == 1.0
    assert out.summary.startswith("run invalid (the load generator saturated)")
    assert engine_cause in out.summary  # what the withdrawn signals pointed at is said
    assert (
        check_validity({spike.spike_id: valid}, [spike], signals, config)[spike.spike_id] is valid
    )


def test_an_invalid_run_whose_engine_steps_rose_keeps_its_verdict():
    spike, signals = _client_side_only(stage_rise_ms={"penalty_ms": 15.0})
    config = AttributeConfig()
    valid = attribute_spike(spike, [spike], signals, config)
    invalid = dataclasses.replace(signals, run_status="invalid")
    assert server_saw_spike(spike, [spike], invalid, config)
    assert check_validity({1: valid}, [spike], invalid, config)[1] is valid
