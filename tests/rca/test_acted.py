"""rca.acted: did a fault act, judged from raw client latencies against the run's own
fault-free stretches (never from the detector)."""

import numpy as np

from rca.acted import ActedConfig, fault_free_windows, judge


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
