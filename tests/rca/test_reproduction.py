"""rca.reproduction: an incident's spikes matched with its replay's, said in one line each."""

from rca.reproduction import reproduction


def _spike(spike_id, start, end, cause, peak=400.0, baseline=100.0, metric="ttft_p99", **kw):
    return {
        "spike_id": spike_id,
        "start_s": start,
        "end_s": end,
        "metric": metric,
        "peak_ms": peak,
        "baseline_ms": baseline,
        "top_cause": cause,
        **kw,
    }


def test_a_spike_within_the_tolerance_is_reproduced_with_its_shift_size_and_verdict():
    found = reproduction([_spike(1, 20, 26, "load")], [_spike(3, 23, 30, "load", peak=300.0)])
    assert found[0].replay is not None and found[0].shift_s == 3
    assert found[0].line() == (
        "spike 1 (ttft_p99 20-26 s, 4.0x, load): reproduced at 23-30 s (+3 s), ttft_p99 3.0x,"
        " named load"
    )


def test_a_spike_far_away_or_missing_is_not_reproduced():
    far = reproduction([_spike(1, 20, 26, "load")], [_spike(1, 40, 45, "load")])
    assert far[0].replay is None and far[0].line().endswith("not reproduced")
    assert reproduction([_spike(1, 20, 26, "memory")], [])[0].replay is None


def test_each_replay_spike_reproduces_one_production_spike_and_suppressed_ones_none():
    production = [_spike(1, 10, 14, "load"), _spike(2, 30, 34, "memory")]
    replayed = [_spike(1, 11, 15, "load"), _spike(2, 31, 33, "host", suppressed=True)]
    found = reproduction(production, replayed)
    assert found[0].replay.spike_id == 1 and found[1].replay is None
