"""rca.intervals: the seeded bootstrap over events and the exact Poisson rate interval."""

import pytest

from rca.intervals import BootstrapOptions, bootstrap, poisson_rate


def _share(events):
    return sum(events) / len(events) if events else None


def test_the_same_seed_gives_the_same_interval_and_another_seed_another():
    events = [(i * 37 % 23) / 7.0 for i in range(23)]  # continuous: percentiles do not tie
    first = bootstrap(events, _share, BootstrapOptions(reps=500, seed=7))
    again = bootstrap(events, _share, BootstrapOptions(reps=500, seed=7))
    other = bootstrap(events, _share, BootstrapOptions(reps=500, seed=8))
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)
    assert first.value == pytest.approx(sum(events) / 23)
    assert first.low < first.value < first.high


def test_bootstrap_covers_a_binomial_share_like_the_normal_approximation():
    events = [1] * 60 + [0] * 40
    iv = bootstrap(events, _share, BootstrapOptions(reps=4000, seed=0))
    half = 1.96 * (0.6 * 0.4 / 100) ** 0.5  # 0.096
    assert iv.low == pytest.approx(0.6 - half, abs=0.02)
    assert iv.high == pytest.approx(0.6 + half, abs=0.02)


def test_undefined_statistic_gives_no_interval_and_counts_undefined_replicates():
    assert bootstrap([], _share).value is None
    # accuracy over the 'detected' events only: undefined when a replicate draws none
    events = ["miss"] * 9 + ["hit"]

    def acc(ev):
        hits = [e for e in ev if e == "hit"]
        return 1.0 if hits else None

    iv = bootstrap(events, acc, BootstrapOptions(reps=1000, seed=1))
    assert iv.value == 1.0 and iv.low == iv.high == 1.0
    assert iv.undefined_share == pytest.approx(0.9**10, abs=0.05)


def test_poisson_exact_interval_including_zero_events():
    zero = poisson_rate(0, 0.5)
    assert zero.value == 0.0 and zero.low == 0.0
    assert zero.high == pytest.approx(3.689 / 0.5, rel=1e-3)  # the "rule of 3.7" for 95 %
    ten = poisson_rate(10, 2.0)  # Garwood: 4.795 .. 18.39 events
    assert ten.value == 5.0
    assert ten.low == pytest.approx(4.795 / 2, rel=1e-3)
    assert ten.high == pytest.approx(18.39 / 2, rel=1e-3)
    assert poisson_rate(3, 0.0).value is None


@pytest.mark.parametrize(
    "kwargs, field",
    [({"reps": 10}, "reps"), ({"level": 1.0}, "level"), ({"reps": 2.5}, "reps")],
)
def test_bad_options_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        BootstrapOptions(**kwargs)
    if field == "level":
        with pytest.raises(ValueError, match="level"):
            poisson_rate(1, 1.0, level=1.5)
    with pytest.raises(ValueError, match="count"):
        poisson_rate(-1, 1.0)


def test_proportion_exact_is_clopper_pearson():
    from rca.intervals import proportion_exact

    all_right = proportion_exact(25, 25)  # a percentile bootstrap says [1, 1] here
    assert all_right.value == 1.0 and all_right.high == 1.0
    assert all_right.low == pytest.approx(0.8628, abs=1e-4)  # (α/2)^(1/n)
    none = proportion_exact(0, 10)
    assert none.low == 0.0 and none.high == pytest.approx(1 - 0.025 ** (1 / 10))
    half = proportion_exact(5, 10)
    assert (half.low, half.high) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert proportion_exact(0, 0).value is None
    with pytest.raises(ValueError, match="k <= n"):
        proportion_exact(3, 2)
