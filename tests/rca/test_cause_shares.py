"""rca.cause_shares: an earned 'unexplained', named shares only from measured signals."""

from dataclasses import replace

import pytest

from rca.attribute import attribute_spike
from rca.cause_shares import ShareInputs, cause_shares, verdict
from rca.config import CAUSES, AttributeConfig, attribute_config
from rca.outside_causes import OutsideExcess
from tests.support.spikesignals import SpikeRun, spike_signals


def _attribute(**fields):
    spike, signals = spike_signals(SpikeRun(**fields))
    return attribute_spike(spike, [spike], signals)


def _share(attr, cause):
    return next((c.share for c in attr.causes if c.cause == cause), 0.0)


def test_noise_level_stage_deltas_are_unexplained_not_the_largest_delta():
    # a TTFT spike the engine did not make: only noise-level stage deltas (0.001 ms of GC a step)
    attr = _attribute(stage_rise_ms={"gc_ms": 0.001})
    assert attr.top_cause == "unexplained"
    assert attr.uncovered >= 0.9 and _share(attr, "memory") == 0.0
    assert "cover" in attr.summary


def test_a_real_cause_still_wins_with_its_share_and_the_uncovered_rest():
    attr = _attribute(
        metric="itl_p99", base_latency_ms=22.0, latency_rise_ms=15.0, stage_rise_ms={"gc_ms": 15.0}
    )
    assert attr.top_cause == "memory" and _share(attr, "memory") >= 0.7
    assert attr.uncovered == pytest.approx(
        1.0 - sum(c.share for c in attr.causes if c.cause != "unexplained"), abs=1e-3
    )


def test_longer_outputs_without_loops_are_not_penalty():
    attr = _attribute(metric="e2e_p99", output_growth=2.0, loop_rate=0.0)
    assert attr.top_cause != "penalty" and _share(attr, "penalty") == 0.0
    looped = _attribute(metric="e2e_p99", output_growth=2.0, loop_rate=0.9)
    assert looped.top_cause == "penalty" and _share(looped, "penalty") >= 0.5
    assert looped.summary.startswith("outputs looped")


def test_output_growth_without_token_ids_is_no_loop_evidence():
    attr = _attribute(metric="e2e_p99", output_growth=2.0, loop_rate=None)
    assert _share(attr, "penalty") == 0.0


def _inputs(**kw):
    base = dict(
        components_ms={c: 0.0 for c in CAUSES},
        coverage=0.0,
        step_marked=False,
        queue_cause=None,
        base_step_ms=20.0,
        spike_step_ms=20.0,
        outside=OutsideExcess(),
    )
    return ShareInputs(**{**base, **kw})


def test_shares_sum_to_one_with_the_uncovered_rest():
    comps = {c: 0.0 for c in CAUSES} | {"memory": 6.0, "penalty": 0.1, "unexplained": 2.0}
    shares = cause_shares(
        _inputs(components_ms=comps, coverage=0.8, step_marked=True), AttributeConfig()
    )
    assert sum(shares.values()) == pytest.approx(1.0)
    # penalty's 0.1 ms is under 2 % of the 20-ms step: noise, left uncovered with the residual
    assert shares["penalty"] == 0.0
    # the queue behind the slower steps (0.2) goes to what slowed them: memory's 6 of the 8 ms
    # above the floor; the residual's 2 (a slowdown nothing measured) keeps its part uncovered
    assert shares["memory"] == pytest.approx(0.8 * 6 / 8.1 + 0.2 * 6 / 8)
    assert shares["unexplained"] == pytest.approx(0.8 * 2.1 / 8.1 + 0.2 * 2 / 8)
    assert verdict(shares, AttributeConfig()) == "memory"


def test_queueing_is_not_shared_out_when_the_step_slowdown_is_noise():
    comps = {c: 0.0 for c in CAUSES} | {"memory": 1.0}
    shares = cause_shares(_inputs(components_ms=comps, coverage=0.05), AttributeConfig())
    assert shares["memory"] == pytest.approx(0.05) and shares["unexplained"] == pytest.approx(0.95)
    assert verdict(shares, AttributeConfig()) == "unexplained"


def test_an_itl_rise_beyond_the_step_slowdown_is_no_queue_of_the_step_causes():
    """A CI run's figures (2026-12-03): step P99 rose 32 %, ITL P99 113 %, penalty stage +1.2 ms.
    TTFT/E2E would queue behind the slower steps; one ITL gap does not, so the rest stays
    uncovered unless a queue cause (arrivals, preemptions) was measured."""
    comps = {c: 0.0 for c in CAUSES} | {"penalty": 1.24, "unexplained": 0.40}
    inputs = _inputs(components_ms=comps, coverage=0.28, step_marked=True, queues=False)
    shares = cause_shares(inputs, AttributeConfig())
    assert shares["penalty"] == pytest.approx(0.28 * 1.24 / 1.64)
    assert verdict(shares, AttributeConfig()) == "unexplained"
    queued = cause_shares(replace(inputs, queues=True), AttributeConfig())
    assert verdict(queued, AttributeConfig()) == "penalty"
    loaded = cause_shares(replace(inputs, queue_cause="load"), AttributeConfig())
    assert loaded["load"] == pytest.approx(0.72) and verdict(loaded, AttributeConfig()) == "load"


def test_host_time_comes_out_of_the_residual_first():
    comps = {c: 0.0 for c in CAUSES} | {"unexplained": 8.0, "penalty": 2.0}
    shares = cause_shares(
        _inputs(
            components_ms=comps,
            coverage=1.0,
            spike_step_ms=30.0,
            outside=OutsideExcess(host_step_fraction=1 / 3),
        ),
        AttributeConfig(),
    )
    assert shares["host"] == pytest.approx(1.0) and shares["penalty"] == 0.0


def test_an_engine_short_of_cpu_waits_between_its_steps_too():
    """An ITL rise beyond the steps' slowdown is host's when the engine lost CPU outside itself
    and the server's own chunk writes saw the rise; without the server's times, or without the
    host's part of the step, it stays uncovered."""
    comps = {c: 0.0 for c in CAUSES} | {"unexplained": 1.0}
    seen = OutsideExcess(host_step_fraction=0.2, server_share=0.9)
    inputs = _inputs(
        components_ms=comps, coverage=0.2, spike_step_ms=25.0, outside=seen, queues=False
    )
    shares = cause_shares(inputs, AttributeConfig())
    # 0.2 from the steps, the server-side rest 0.9 - 0.2; the 0.1 the server never saw stays
    assert shares["host"] == pytest.approx(0.9) and shares["unexplained"] == pytest.approx(0.1)
    unstamped = replace(inputs, outside=replace(seen, server_share=None))
    assert cause_shares(unstamped, AttributeConfig())["host"] == pytest.approx(0.2)
    no_host = replace(inputs, outside=replace(seen, host_step_fraction=0.0))
    assert cause_shares(no_host, AttributeConfig())["unexplained"] == pytest.approx(1.0)


def test_min_explained_share_is_checked():
    with pytest.raises(ValueError, match="min_explained_share must be in"):
        attribute_config(min_explained_share=1.5)


def test_a_backlog_batch_goes_to_what_held_the_requests():
    # A GC stall held requests; the batch they made when it ended cost 4 ms a step of forward
    # time (the `load` component) while the client asked no more work: that cost is the stall's.
    comps = {c: 0.0 for c in CAUSES} | {"memory": 6.0, "penalty": 2.0, "load": 4.0}
    inputs = _inputs(components_ms=comps, coverage=1.0, step_marked=True)
    asked_more = cause_shares(replace(inputs, demand_grew=True), AttributeConfig())
    assert asked_more["load"] == pytest.approx(4 / 12)
    backlog = cause_shares(replace(inputs, demand_grew=False), AttributeConfig())
    assert backlog["load"] == 0.0
    assert backlog["memory"] == pytest.approx(9 / 12) and backlog["penalty"] == pytest.approx(
        3 / 12
    )
    # not counted (a run observed through monitoring): the batch's growth keeps standing for load
    assert cause_shares(inputs, AttributeConfig()) == asked_more


def test_a_backlog_goes_to_the_queue_cause_when_one_was_measured():
    comps = {c: 0.0 for c in CAUSES} | {"memory": 1.0, "load": 3.0}
    shares = cause_shares(
        _inputs(
            components_ms=comps,
            coverage=0.5,
            step_marked=True,
            queue_cause="penalty",
            demand_grew=False,
        ),
        AttributeConfig(),
    )
    # the step's 4 ms: 1 memory, the batch's 3 to the loops that held the requests; the queue too
    assert shares["load"] == 0.0
    assert shares["penalty"] == pytest.approx(0.5 * 3 / 4 + 0.5)
    assert shares["memory"] == pytest.approx(0.5 * 1 / 4)


def test_a_batch_that_grew_with_nothing_else_in_the_step_stays_load():
    comps = {c: 0.0 for c in CAUSES} | {"load": 3.0, "unexplained": 0.2}
    inputs = _inputs(components_ms=comps, coverage=1.0, step_marked=True, demand_grew=False)
    # the residual's 0.2 ms is under the floor (2 % of the 20-ms step): nothing else moved
    assert cause_shares(inputs, AttributeConfig())["load"] == pytest.approx(3 / 3.2)
    # a forward slowdown nothing accounts for held the requests: the backlog is that unknown's
    slowed = comps | {"unexplained": 1.0}
    shares = cause_shares(replace(inputs, components_ms=slowed), AttributeConfig())
    assert shares["load"] == 0.0 and shares["unexplained"] == pytest.approx(1.0)
