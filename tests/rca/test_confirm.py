"""rca.confirm: an arm's excess against its own baseline, the share removed with its min–max
over pairs, and the verdict with its exit code."""

import pytest

from rca.config import PRESETS, DetectConfig
from rca.confirm import (
    ArmMeasure,
    measure_arm,
    measure_outside,
    outside_verdict,
    share_removed,
    verdict,
)


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


def transit(client_spike_ms: float, server_spike_ms: float, spike=(20, 30), n=35, metric="ttft"):
    """1-s rows of query transit_windows: client 40 ± 1 ms and server 30 ± 1 ms outside
    `spike`, the given p99s inside; the other pair of columns empty."""
    rows = []
    for w in range(n):
        inside = spike[0] <= w < spike[1]
        wob = 1.0 if w % 2 else -1.0
        row = {"window": w, "client_ttft_p99_ms": None, "server_ttft_p99_ms": None}
        row |= {"client_e2e_p99_ms": None, "server_e2e_p99_ms": None}
        row |= {"client_itl_p99_ms": None, "server_itl_p99_ms": None}
        row[f"client_{metric}_p99_ms"] = client_spike_ms if inside else 40.0 + wob
        row[f"server_{metric}_p99_ms"] = server_spike_ms if inside else 30.0 + wob
        rows.append(row)
    return rows


def test_a_client_side_rise_the_server_did_not_see_is_confirmed_outside_the_engine():
    m = measure_outside(transit(240.0, 35.0), "ttft_p99", (20.0, 30.0))
    assert m is not None and m.compared == "TTFT" and m.reproduced
    assert m.client_excess_ms == pytest.approx(200.0, abs=1.5)
    assert m.server_excess_ms == pytest.approx(5.0, abs=1.5)
    assert m.share_outside is not None and m.share_outside.point == pytest.approx(0.975, abs=0.01)
    v = outside_verdict(m, "network")
    assert v.verdict == "confirmed" and "measured, not re-run" in v.reason and "98%" in v.reason


def test_an_itl_rise_is_compared_gap_for_gap_where_the_server_stamped_its_chunks():
    m = measure_outside(transit(240.0, 35.0, metric="itl"), "itl_p99", (20.0, 30.0))
    assert m is not None and m.compared == "ITL" and m.reproduced
    assert outside_verdict(m, "client").verdict == "confirmed"


def test_a_rise_the_server_saw_too_is_not_outside_the_engine():
    """ITL without the server's chunk stamps (an older run): the whole stream (E2E) instead."""
    m = measure_outside(transit(240.0, 210.0, metric="e2e"), "itl_p99", (20.0, 30.0))
    assert m is not None and m.compared == "the whole stream"
    v = outside_verdict(m, "client")
    assert v.verdict == "not confirmed" and "client is suspect" in v.reason


def test_no_client_side_spike_or_no_pairs_is_inconclusive():
    flat = measure_outside(transit(41.0, 31.0), "ttft_p99", (20.0, 30.0))
    assert flat is not None and not flat.reproduced
    assert outside_verdict(flat, "client").verdict == "inconclusive"
    assert measure_outside(transit(240.0, 35.0, spike=(3, 8)), "ttft_p99", (3.0, 8.0)) is None
    assert measure_outside([], "ttft_p99", (20.0, 30.0)) is None
    v = outside_verdict(None, "network")
    assert v.verdict == "inconclusive" and v.exit_code == 3 and "both" in v.reason


def noisy_windows(spike_ms: float, spike=(20, 30), n=35):
    """itl p99 rows around 50 ms with a ±15 ms wobble (a wide per-window threshold), spike_ms
    inside `spike`."""
    wobble = (0.0, 15.0, -12.0, 8.0, -15.0, 12.0, -8.0)
    return [
        {
            "t_s": float(w),
            "itl_p99_ms": spike_ms if spike[0] <= w < spike[1] else 50.0 + wobble[w % 7],
            "itl_n": 50,
        }
        for w in range(n)
    ]


def test_a_sustained_rise_reproduces_as_the_detector_found_it():
    thorough = PRESETS["thorough"][0]  # the sustained test is off by default
    m = measure_arm(noisy_windows(85.0), "itl_p99", (20.0, 30.0), "recorded", 1, "r1", thorough)
    assert m.threshold_ms is not None and m.threshold_ms > 85.0  # no window above it
    assert m.windows_above == 0 and m.reproduced  # ten windows 1.7x: the sustained test's
    mad_only = DetectConfig(detectors=("mad",))
    assert not measure_arm(
        noisy_windows(85.0), "itl_p99", (20.0, 30.0), "recorded", 1, "r1", mad_only
    ).reproduced
    calm = measure_arm(noisy_windows(60.0), "itl_p99", (20.0, 30.0), "removed", 1, "r2")
    assert not calm.reproduced  # 1.2x: under the relative floor
