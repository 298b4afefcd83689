"""Nightly comparison: a real shift is flagged with the right sign; noise is not."""

import numpy as np

from rca.compare import Samples, between_run_noise, compare_metric


def groups(rng, n_requests, scale, per=20):
    return Samples.from_groups([rng.gamma(4.0, scale, size=per) for _ in range(n_requests)])


def test_same_distribution_is_unchanged():
    rng = np.random.default_rng(1)
    v = compare_metric("itl_p99", groups(rng, 200, 5.0), groups(rng, 200, 5.0), 0.99)
    assert v.verdict == "unchanged" and v.ci_low < 0 < v.ci_high


def test_slower_candidate_regresses_and_faster_improves():
    rng = np.random.default_rng(2)
    base = groups(rng, 200, 5.0)
    slow = compare_metric("itl_p50", base, groups(rng, 200, 7.0), 0.5)
    fast = compare_metric("itl_p50", base, groups(rng, 200, 3.5), 0.5)
    assert slow.verdict == "regressed" and slow.ci_low > 0 and slow.rel_delta > 0.3
    assert fast.verdict == "improved" and fast.ci_high < 0


def test_throughput_drop_is_a_regression():
    rng = np.random.default_rng(3)
    base = Samples.from_groups([[x] for x in rng.normal(1000, 30, 60)])
    cand = Samples.from_groups([[x] for x in rng.normal(700, 30, 60)])
    assert compare_metric("throughput", base, cand, None).verdict == "regressed"


def test_small_but_significant_change_below_threshold_is_unchanged():
    rng = np.random.default_rng(4)
    base = groups(rng, 400, 5.0)
    cand = groups(rng, 400, 5.1)  # +2 %: below the 10 % threshold
    assert compare_metric("e2e_p50", base, cand, 0.5).verdict == "unchanged"


def test_error_rate_uses_an_absolute_threshold():
    base = Samples.from_groups([[0.0]] * 200)
    cand = Samples.from_groups([[1.0]] * 20 + [[0.0]] * 180)
    v = compare_metric("error_rate", base, cand, None, threshold=0.01, absolute=True)
    assert v.verdict == "regressed" and abs(v.candidate - 0.1) < 1e-9


def test_too_few_samples_is_insufficient_not_a_verdict():
    rng = np.random.default_rng(5)
    v = compare_metric("ttft_p99", groups(rng, 3, 5.0), groups(rng, 200, 9.0), 0.99)
    assert v.verdict == "insufficient"


def test_p99_of_a_few_requests_is_insufficient():
    rng = np.random.default_rng(6)
    base = Samples.from_groups([[x] for x in rng.gamma(4, 5, 60)])  # 60 requests, one E2E each
    cand = Samples.from_groups([[x] for x in rng.gamma(4, 6, 60)])
    assert compare_metric("e2e_p99", base, cand, 0.99).verdict == "insufficient"
    assert compare_metric("e2e_p50", base, cand, 0.5).verdict != "insufficient"


def test_a_change_below_the_absolute_floor_is_unchanged():
    rng = np.random.default_rng(7)
    base = groups(rng, 400, 5.0)  # values ~20 ms
    cand = groups(rng, 400, 5.75)  # +15 %, statistically clear, but ~3 ms
    assert compare_metric("itl_p50", base, cand, 0.5).verdict == "regressed"
    assert compare_metric("itl_p50", base, cand, 0.5, min_abs=5.0).verdict == "unchanged"


def test_run_noise_is_the_largest_leave_one_out_gap():
    # Three runs whose medians are ~20, ~20 and ~26 ms: the odd one is ~30 % off the other two.
    rng = np.random.default_rng(8)
    runs = [groups(rng, 200, 5.0), groups(rng, 200, 5.0), groups(rng, 200, 6.5)]
    noise = between_run_noise(runs, 0.5, absolute=False)
    assert 0.22 < noise < 0.38
    assert np.isnan(between_run_noise(runs[:1], 0.5, absolute=False))  # one run: unknown
    few = Samples.from_groups([[1.0]] * 3)  # too few requests
    assert np.isnan(between_run_noise([runs[0], few], 0.5, absolute=False))


def test_a_change_within_the_run_noise_is_unchanged_and_beyond_it_regresses():
    rng = np.random.default_rng(9)
    base = groups(rng, 400, 5.0)
    cand = groups(rng, 400, 6.5)  # +30 %: clear against the 10 % threshold alone
    assert compare_metric("itl_p50", base, cand, 0.5).verdict == "regressed"
    within = compare_metric("itl_p50", base, cand, 0.5, run_noise=0.40)
    assert within.verdict == "unchanged" and within.run_noise == 0.40 and within.ci_low > 0
    beyond = compare_metric("itl_p50", base, groups(rng, 400, 10.0), 0.5, run_noise=0.40)
    assert beyond.verdict == "regressed"
