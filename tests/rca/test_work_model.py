"""rca.work_model: what the work the load generator asked predicts of a spike."""

import numpy as np
import pytest

from rca.work_model import WorkSeries, predict_work

N = 20
SPIKE = np.arange(N) >= 15
MASKS = (SPIKE, ~SPIKE)


def _work(in_flight=(4, 4), tokens=(40.0, 40.0), scheduled=(0, 0), arrivals=4.0):
    def series(pair):
        return np.where(SPIKE, pair[1], pair[0]).astype(float)

    return WorkSeries(np.full(N, arrivals), series(tokens), series(scheduled), series(in_flight))


def test_a_closed_loop_predicts_from_its_users_and_the_tokens_they_asked():
    p = predict_work(_work(in_flight=(4, 8), tokens=(40.0, 120.0)), MASKS, 13.0, 0.2)
    assert p.loop == "closed" and (p.intensity_ratio, p.demand_ratio) == (2.0, 3.0)
    assert p.predicted_ratio == 6.0 and p.load_share == pytest.approx(5 / 12)
    assert [e.signal for e in p.evidence()] == [
        "load generator: users in flight",
        "load generator: tokens asked per request",
    ]


def test_an_open_loop_predicts_from_its_schedule_not_from_its_users():
    # requests in flight grew because the engine slowed (3 → 12); the schedule did not
    p = predict_work(_work(in_flight=(3, 12), scheduled=(4, 4)), MASKS, 5.0, 0.2)
    assert p.loop == "open" and p.predicted_ratio == 1.0 and p.load_share == 0.0
    assert p.evidence() == []
    burst = predict_work(_work(in_flight=(3, 12), scheduled=(4, 12)), MASKS, 5.0, 0.2)
    assert burst.intensity_ratio == 3.0 and burst.load_share == pytest.approx(0.5)


def test_changes_within_noise_predict_nothing_and_the_share_stays_in_range():
    # +10 % users, +0.4 scheduled a window on 1: within load_rise and the Poisson slack
    assert predict_work(_work(in_flight=(10, 11)), MASKS, 3.0, 0.2).predicted_ratio == 1.0
    small = predict_work(_work(scheduled=(1, 1.4)), MASKS, 3.0, 0.2)
    assert small.predicted_ratio == 1.0
    # more work than the latency rose: all of it load; no excess: none
    assert predict_work(_work(in_flight=(2, 8)), MASKS, 2.0, 0.2).load_share == 1.0
    assert predict_work(_work(in_flight=(2, 8)), MASKS, 0.9, 0.2).load_share == 0.0


def test_a_run_that_counted_no_requests_predicts_nothing():
    assert predict_work(_work(arrivals=0.0), MASKS, 3.0, 0.2) is None
    # tokens or users not measured (NaN): their ratio is 1
    nan = WorkSeries(np.full(N, 4.0), np.full(N, np.nan), np.zeros(N), np.full(N, np.nan))
    assert predict_work(nan, MASKS, 3.0, 0.2).predicted_ratio == 1.0


def test_a_closed_loops_baseline_is_the_most_users_a_calm_window_carried():
    # users stepped 4 → 8 well before the spike and stayed 8 through it: calm windows carried 8
    stepped = np.where(np.arange(N) >= 5, 8.0, 4.0)
    work = WorkSeries(np.full(N, 4.0), np.full(N, 40.0), np.zeros(N), stepped)
    p = predict_work(work, MASKS, 3.0, 0.2)
    assert p.intensity == (8.0, 8.0) and p.predicted_ratio == 1.0 and p.load_share == 0.0
