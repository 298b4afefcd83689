"""rca.confirm: an arm's excess against its own baseline, the share removed with its min–max
over pairs, and the verdict with its exit code."""

import pytest

from rca.confirm import ArmMeasure, measure_arm, share_removed, verdict


def windows(base_ms: float, spike_ms: float, spike=(20, 30), n=35, wobble=2.0):
    """1-s window rows of the windows query: itl p99 base ± wobble, spike_ms inside `spike`."""
    rows = []
    for w in range(n):
        v = spike_ms if spike[0] <= w < spike[1] else base_ms + (wobble if w % 2 else -wobble)
        rows.append({"t_s": float(w), "itl_p99_ms": v, "itl_n": 50})
    return rows


def arm(name, excess, reproduced=True, repeat=1):
    return ArmMeasure(
        name, repeat, f"r-{name}-{repeat}", 50.0, 80.0, 50.0 + excess, excess, 5, reproduced
    )


def test_an_arm_that_reproduces_the_spike_measures_its_excess_over_its_own_baseline():
    m = measure_arm(windows(50.0, 250.0), "itl_p99", (20.0, 30.0), "recorded", 1, "r1")
    assert m.baseline_ms == pytest.approx(50.0, abs=2.0)
    assert m.excess_ms == pytest.approx(200.0, abs=2.0)
    assert m.windows_above == 10 and m.reproduced
    calm = measure_arm(windows(50.0, 55.0), "itl_p99", (20.0, 30.0), "removed", 1, "r2")
    assert not calm.reproduced and calm.excess_ms == pytest.approx(5.0, abs=2.0)


def test_too_short_a_baseline_is_said_not_guessed():
    m = measure_arm(windows(50.0, 250.0, spike=(5, 10)), "itl_p99", (5.0, 10.0), "recorded", 1, "r")
    assert m.excess_ms is None and not m.reproduced and "baseline" in m.note


def test_share_removed_is_the_ratio_of_means_with_the_min_and_max_over_pairs():
    share = share_removed(
        [arm("recorded", 200.0), arm("recorded", 100.0, repeat=2)],
        [arm("removed", 10.0), arm("removed", 20.0, repeat=2)],
    )
    assert share is not None
    assert share.point == pytest.approx(1 - 15.0 / 150.0)
    assert share.low == pytest.approx(0.8) and share.high == pytest.approx(0.95)
    assert share.pairs == 4
    assert share_removed([arm("recorded", -3.0)], [arm("removed", 1.0)]) is None


def test_verdicts_and_exit_codes():
    rec = [arm("recorded", 200.0)]
    good = share_removed(rec, [arm("removed", 20.0)])
    bad = share_removed(rec, [arm("removed", 180.0)])
    assert (v := verdict(rec, good)).verdict == "confirmed" and v.exit_code == 0
    assert (v := verdict(rec, bad)).verdict == "not confirmed" and v.exit_code == 1
    assert "suspect" in v.reason
    quiet = [arm("recorded", 3.0, reproduced=False)]
    v = verdict(quiet, share_removed(quiet, [arm("removed", 1.0)]))
    assert v.verdict == "inconclusive" and v.exit_code == 3 and "did not reproduce" in v.reason
    v = verdict([], None, "no engine knob: network")
    assert v.verdict == "inconclusive" and "no intervention" in v.reason
