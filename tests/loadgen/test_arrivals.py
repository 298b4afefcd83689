"""Open-loop schedules: rate, burst windows, determinism and the split over workers."""

import pytest

from loadgen.arrivals import arrival_times, for_worker
from loadgen.spec import LoadSpec
from loadgen.traffic_faults import traffic_faults


def test_open_is_evenly_spaced_at_the_rate():
    times = list(arrival_times(LoadSpec(shape="open", rate=4.0), warmup_s=1, duration_s=2, seed=0))
    assert times == pytest.approx([i * 0.25 for i in range(12)])


def test_poisson_count_and_mean_gap_follow_the_rate():
    times = list(
        arrival_times(LoadSpec(shape="poisson", rate=50.0), warmup_s=0, duration_s=200, seed=1)
    )
    assert times == sorted(times) and all(0 <= t < 200 for t in times)
    assert len(times) / 200 == pytest.approx(50, rel=0.02)  # 10,000 arrivals: ±2% is > 3 sigma
    assert times == list(arrival_times(LoadSpec(shape="poisson", rate=50.0), 0, 200, seed=1))
    assert times != list(arrival_times(LoadSpec(shape="poisson", rate=50.0), 0, 200, seed=2))


def test_bursts_multiply_the_rate_inside_their_window_after_warmup():
    faults = traffic_faults(
        [{"kind": "load.burst", "start_s": 10, "duration_s": 10, "params": {"factor": 4}}]
    )
    times = list(
        arrival_times(
            LoadSpec(shape="poisson", rate=20.0), warmup_s=5, duration_s=30, seed=3, faults=faults
        )
    )
    inside = sum(15 <= t < 25 for t in times)
    before = sum(5 <= t < 15 for t in times)
    assert inside / 10 == pytest.approx(80, rel=0.15) and before / 10 == pytest.approx(20, rel=0.3)
    evenly = list(
        arrival_times(
            LoadSpec(shape="open", rate=2.0),
            0,
            4,
            0,
            traffic_faults([{"kind": "load.burst", "start_s": 1, "duration_s": 1}]),
        )
    )
    # rate 2/s, then 6/s (default factor 3) in [1, 2), then 2/s again
    assert evenly == pytest.approx(
        [0, 0.5, *[1 + i / 6 for i in range(6)], 2.0, 2.5, 3.0, 3.5], abs=1e-9
    )


def test_workers_share_the_schedule_round_robin():
    times = [0.0, 0.1, 0.2, 0.3, 0.4]
    assert list(for_worker(times, 0, 2)) == [(0, 0.0), (2, 0.2), (4, 0.4)]
    assert list(for_worker(times, 1, 2)) == [(1, 0.1), (3, 0.3)]


def test_closed_loop_shapes_have_no_schedule():
    with pytest.raises(ValueError, match="no rate schedule"):
        next(arrival_times(LoadSpec(shape="constant"), 0, 1, 0))
