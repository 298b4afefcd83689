"""rca.acted: did a fault act, judged from raw client latencies against the run's own
fault-free stretches (never from the detector)."""

import numpy as np

from rca.acted import ActedConfig, fault_free_windows, judge, own_time


def samples(duration_s=60.0, slow=None, factor=3.0, seed=0):
    """ITL every 20 ms with a lognormal tail around 10 ms; inside `slow` (start, end) the gaps
    are `factor` × longer; TTFT every 0.5 s around 30 ms."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s, 0.02)
    itl = 10.0 * rng.lognormal(0.0, 0.25, len(t))
    if slow is not None:
        itl[(t >= slow[0]) & (t < slow[1])] *= factor
    t_ttft = np.arange(0.0, duration_s, 0.5)
    ttft = 30.0 * rng.lognormal(0.0, 0.2, len(t_ttft))
    return {"itl": (t, itl), "ttft": (t_ttft, ttft)}


def test_a_fault_that_tripled_the_gaps_acted_on_itl():
    got = judge(samples(slow=(20, 28)), (20.0, 28.0), [(20.0, 28.0)], 60.0)
    assert got.acted is True and got.metric == "itl" and got.ratio > 2.0
    assert got.placebos >= 20


def test_a_fault_that_changed_nothing_did_not_act():
    for seed in range(5):
        got = judge(samples(seed=seed), (20.0, 28.0), [(20.0, 28.0)], 60.0)
        assert got.acted is False and got.ratio < ActedConfig().margin, (seed, got)


def test_a_fault_with_no_fault_free_stretch_of_its_length_is_undecided():
    got = judge(samples(slow=(5, 50)), (5.0, 50.0), [(5.0, 50.0)], 60.0)
    assert got.acted is None and "fault-free windows" in got.why


def test_placebo_windows_avoid_every_fault_and_its_tail():
    config = ActedConfig(tail_s=3.0, step_s=1.0)
    starts = fault_free_windows([(10.0, 15.0), (30.0, 32.0)], 50.0, 5.0, config)
    assert starts[:6] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and 6.0 not in starts
    assert all(not (s < 18.0 and s + 5.0 > 10.0) for s in starts)  # 10 .. 15 + 3
    assert all(not (s < 35.0 and s + 5.0 > 30.0) for s in starts)  # 30 .. 32 + 3
    assert 18.0 in starts and 35.0 in starts and max(starts) == 45.0


def test_samples_by_metric_splits_the_querys_rows():
    from rca.acted import samples_by_metric

    rows = [
        {"metric": "itl", "t_s": 1.0, "value_ms": 10.0},
        {"metric": "ttft", "t_s": 0.5, "value_ms": 30.0},
        {"metric": "itl", "t_s": 1.5, "value_ms": 12.0},
    ]
    got = samples_by_metric(rows)
    assert got["itl"][0].tolist() == [1.0, 1.5] and got["itl"][1].tolist() == [10.0, 12.0]
    assert got["ttft"][1].tolist() == [30.0] and len(got["e2e"][0]) == 0


def test_own_time_leaves_out_every_other_faults_window_and_tail():
    config = ActedConfig(tail_s=3.0)
    assert own_time((20.0, 28.0), [], config) == [(20.0, 31.0)]
    assert own_time((24.0, 34.0), [(20.0, 28.0)], config) == [(31.0, 37.0)]
    assert own_time((10.0, 30.0), [(15.0, 17.0)], config) == [(10.0, 15.0), (20.0, 33.0)]
    assert own_time((22.0, 26.0), [(20.0, 28.0)], config) == []


def test_a_partner_that_changed_nothing_does_not_take_the_others_slowdown():
    # A triples the gaps over 20-28 s; B overlaps it from 24 s and slows nothing itself. Judged
    # on its whole window B would read A's ratio; on its own time (31-37 s) it did not act.
    data, windows = samples(slow=(20, 28)), [(20.0, 28.0), (24.0, 34.0)]
    a = judge(data, windows[0], windows, 60.0)
    b = judge(data, windows[1], windows, 60.0)
    assert a.acted is True and a.own_s == 4.0  # 20 .. 31 less B's 24 .. 37
    assert b.acted is False and b.own_s == 6.0 and b.ratio < ActedConfig().margin


def test_a_partner_that_slowed_its_own_time_acted():
    data, windows = samples(slow=(20, 37)), [(20.0, 28.0), (24.0, 34.0)]
    assert judge(data, windows[1], windows, 60.0).acted is True


def test_a_fault_nested_in_another_is_undecided():
    windows = [(20.0, 28.0), (22.0, 26.0)]
    got = judge(samples(slow=(20, 28)), windows[1], windows, 60.0)
    assert got.acted is None and got.own_s == 0.0 and "ran alone" in got.why


def test_a_fault_whose_own_time_is_only_its_tail_is_undecided():
    # B (26-32 s) slows its gaps; A (20-30 s) covers B's run up to 33 s with its tail, so B's own
    # time 33-35 s is after B stopped: judged there it would read as having done nothing.
    windows = [(20.0, 30.0), (26.0, 32.0)]
    got = judge(samples(slow=(26, 32)), windows[1], windows, 60.0)
    assert got.acted is None and got.own_s == 2.0 and "ran alone" in got.why
