"""rca.detect on window series built directly (and on a simulated run)."""

from dataclasses import replace

import numpy as np
import pytest

from rca.config import PRESETS, DetectConfig, detect_config
from rca.detect import baseline, detect_spikes, series

# The sustained test and the ×1.5 floor these mechanics were written for (the default before
# 2026-12-06, kept as a preset): they still hold there, whatever the default's thresholds.
THOROUGH = PRESETS["thorough"][0]


def _windows(itl, ttft=None, e2e=None, n_samples=100):
    ttft = ttft if ttft is not None else [15.0] * len(itl)
    e2e = e2e if e2e is not None else [500.0] * len(itl)
    return [
        {
            "itl_p99_ms": a,
            "itl_n": n_samples,
            "ttft_p99_ms": b,
            "ttft_n": 10,
            "e2e_p99_ms": c,
            "e2e_n": 10,
        }
        for a, b, c in zip(itl, ttft, e2e)
    ]


def _noisy(n, level, rel_noise, seed):
    return list(level * (1 + rel_noise * np.random.default_rng(seed).standard_normal(n)))


def test_injected_window_is_found_and_nothing_else():
    itl = _noisy(60, 20.0, 0.1, 0)
    for i in range(30, 36):
        itl[i] = 180.0
    spikes, baselines = detect_spikes(_windows(itl), 1.0)
    assert len(spikes) == 1
    s = spikes[0]
    assert (s.start_s, s.end_s, s.metric, s.metrics) == (30.0, 36.0, "itl_p99", ["itl_p99"])
    assert s.peak_ms == 180.0 and s.baseline_ms == pytest.approx(baselines["itl_p99"].median_ms)
    assert s.severity == "critical"


def test_noise_and_single_window_blips_do_not_spike():
    itl = _noisy(120, 20.0, 0.2, 1)
    itl[40] = 150.0  # one gen-2 pause in one window
    itl[90] = 29.0  # 45% up: under the relative floor
    itl[91] = 29.0
    spikes, _ = detect_spikes(_windows(itl), 1.0)
    assert spikes == []


def test_close_stretches_merge_and_series_join_into_one_incident():
    itl = [20.0] * 50
    ttft = [15.0] * 50
    for i in (20, 21, 24, 25):  # a gap of 2 windows: one spike
        itl[i] = 90.0
    for i in (22, 23, 24, 25, 26, 27):  # TTFT rises over the same incident, a bit later
        ttft[i] = 120.0
    spikes, _ = detect_spikes(_windows(itl, ttft), 1.0)
    assert len(spikes) == 1
    s = spikes[0]
    assert s.metrics == ["itl_p99", "ttft_p99"]
    assert (s.first_window, s.last_window) == (20, 27)
    assert s.metric == "ttft_p99"  # larger relative peak: 120/15 > 90/20


def test_windows_with_too_few_samples_are_ignored():
    itl = [20.0] * 40
    wins = _windows(itl)
    for i in (10, 11, 12):
        wins[i]["itl_p99_ms"] = 500.0
        wins[i]["itl_n"] = 3
    assert detect_spikes(wins, 1.0)[0] == []
    assert np.isnan(series(wins, "itl_p99", DetectConfig())[10])


def test_short_run_has_no_baseline():
    assert baseline(np.array([1.0, 2.0, np.nan]), "itl_p99", DetectConfig()) is None


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="unknown key 'madk'"):
        detect_config(madk=3)
    with pytest.raises(ValueError, match="min_windows must be >= 1"):
        DetectConfig(min_windows=0)
    with pytest.raises(ValueError, match="unknown series"):
        DetectConfig(min_samples={"itl_p98": 3})


def test_changepoint_detector_finds_a_sustained_shift():
    pytest.importorskip("ruptures")
    itl = _noisy(80, 20.0, 0.1, 4)
    for i in range(40, 52):  # a level shift whose windows cross the threshold only now and then
        itl[i] = 40.0 if i % 4 == 0 else 31.0
    mad = replace(THOROUGH, detectors=("mad",))
    assert detect_spikes(_windows(itl), 1.0, mad)[0] == []  # the per-window detector misses it
    config = replace(THOROUGH, detectors=("changepoint",))
    spikes, _ = detect_spikes(_windows(itl), 1.0, config)
    assert [(s.first_window, s.last_window, s.detector) for s in spikes] == [
        (40, 51, "changepoint")
    ]
    quiet, _ = detect_spikes(_windows(_noisy(80, 20.0, 0.2, 5)), 1.0, config)
    assert quiet == []


def test_both_detectors_merge_into_one_incident():
    pytest.importorskip("ruptures")
    itl = _noisy(60, 20.0, 0.1, 6)
    for i in range(30, 36):
        itl[i] = 150.0
    spikes, _ = detect_spikes(_windows(itl), 1.0, DetectConfig(detectors=("mad", "changepoint")))
    assert len(spikes) == 1 and (spikes[0].first_window, spikes[0].last_window) == (30, 35)
    assert spikes[0].detector == "mad+changepoint"


def test_lagging_e2e_does_not_bridge_two_incidents():
    itl, e2e = [20.0] * 60, [500.0] * 60
    for i in range(10, 14):  # first incident
        itl[i] = 150.0
    for i in range(19, 23):  # second incident, 5 windows later
        itl[i] = 150.0
    for i in range(12, 19):  # E2E of the first stays high until the second begins
        e2e[i] = 1500.0
    spikes, _ = detect_spikes(_windows(itl, e2e=e2e), 1.0)
    assert [(s.first_window, s.last_window) for s in spikes] == [(10, 13), (19, 22)]
    assert spikes[0].metrics == ["itl_p99", "e2e_p99"] and spikes[1].metrics == ["itl_p99"]


def _long_fault_ttft():
    """TTFT p99 of a vLLM-CPU-like run: ~190 ms with 30 % jitter and a KV-pressure stretch over 18
    of its 40 windows rising from 650 to 1150 ms."""
    rng = np.random.default_rng(7)
    ttft = list(190.0 * (1 + 0.3 * rng.standard_normal(40)))
    for i, v in zip(range(14, 32), np.linspace(650.0, 1150.0, 18)):
        ttft[i] = float(v)
    return ttft


def test_second_estimate_keeps_a_long_fault_out_of_its_own_spread():
    windows = _windows([20.0] * 40, ttft=_long_fault_ttft())
    one_pass = replace(THOROUGH, trim_k=None, detectors=("mad",))
    wide = baseline(series(windows, "ttft_p99", one_pass), "ttft_p99", one_pass)
    assert wide is not None and wide.trimmed_windows == 0
    assert wide.threshold_ms > 1000.0  # the fault's own windows widened the spread
    missed, _ = detect_spikes(windows, 1.0, one_pass)
    assert [(s.first_window, s.last_window) for s in missed] == [(28, 31)]
    base = baseline(series(windows, "ttft_p99", THOROUGH), "ttft_p99", THOROUGH)
    assert base is not None and base.trimmed_windows >= 15
    assert base.threshold_ms < 650.0
    spikes, _ = detect_spikes(windows, 1.0, THOROUGH)
    assert [(s.metric, s.first_window, s.last_window) for s in spikes] == [("ttft_p99", 14, 31)]


# ITL p99 (ms) of the vLLM-CPU run of 2026-12-02 whose CPU contention (4 hogs on vLLM's CPU)
# covered windows 15-22 of 30: the fault doubled it, over a quarter of the run.
CONTENDED_ITL_P99 = [
    18.5, 17.2, 13.7, 18.0, 22.6, 20.1, 26.5, 22.5, 18.9, 14.9, 18.0, 19.5, 16.7, 15.1, 14.2,
    30.1, 32.9, 38.6, 36.0, 32.4, 33.0, 35.5, 46.6,
    14.8, 13.5, 12.9, 14.6, 14.8, 12.3, 14.1,
]  # fmt: skip


def test_the_trim_repeats_until_a_quarter_long_fault_is_out_of_the_spread():
    windows = _windows(CONTENDED_ITL_P99)
    once = replace(THOROUGH, trim_rounds=1, detectors=("mad",))
    base = baseline(series(windows, "itl_p99", once), "itl_p99", once)
    assert base is not None and base.trimmed_windows == 2 and base.threshold_ms > 38.6
    assert detect_spikes(windows, 1.0, once)[0] == []  # one trim: the fault stays unseen
    settled = baseline(series(windows, "itl_p99", THOROUGH), "itl_p99", THOROUGH)
    assert settled is not None and settled.trimmed_windows >= 8 and settled.threshold_ms < 32.4
    spikes, _ = detect_spikes(windows, 1.0, THOROUGH)
    # 15 (30.1) is under the per-window threshold; the sustained test adds it to the stretch
    assert [(s.first_window, s.last_window) for s in spikes] == [(15, 22)]


def test_second_estimate_leaves_a_clean_series_alone():
    itl = _noisy(600, 20.0, 0.1, 3)
    values = series(_windows(itl), "itl_p99", DetectConfig())
    trimmed = baseline(values, "itl_p99", DetectConfig())
    plain = baseline(values, "itl_p99", detect_config(trim_k=None))
    assert trimmed is not None and plain is not None
    assert trimmed.trimmed_windows == 0  # 3 SDs with the 50 % floor: nothing is cut from noise
    assert trimmed.threshold_ms == plain.threshold_ms


def test_trim_k_must_be_positive():
    with pytest.raises(ValueError, match="trim_k must be > 0 or None"):
        detect_config(trim_k=0)
    with pytest.raises(ValueError, match="trim_rounds must be >= 1"):
        detect_config(trim_rounds=0)


# ITL p99 (ms) of a held-out vLLM-CPU run (ev 1702696454, case 34) whose 2 CPU hogs covered
# windows 22-30 of 40: ~2x for 9 windows in a drifting, noisy series (no window beats 5 robust SDs).
DRIFTING_CONTENDED_ITL_P99 = [
    17, 19, 23, 29, 35, 24, 19, 18, 20, 20, 21, 17, 19, 16, 24, 29, 30, 26, 26, 29, 27, 25,
    43, 43, 46, 40, 39, 42, 52, 50, 44,
    26, 28, 32, 29, 30, 25, 22, 27, 30,
]  # fmt: skip


def test_sustained_detector_finds_a_rise_no_single_window_shows():
    windows = _windows([float(v) for v in DRIFTING_CONTENDED_ITL_P99])
    assert detect_spikes(windows, 1.0, replace(THOROUGH, detectors=("mad",)))[0] == []
    spikes, baselines = detect_spikes(windows, 1.0, THOROUGH)
    assert [(s.first_window, s.last_window, s.detector) for s in spikes] == [(22, 30, "sustained")]
    base = baselines["itl_p99"]
    assert max(DRIFTING_CONTENDED_ITL_P99) < base.threshold_ms  # the per-window test cannot
    # the default leaves it out: a 2x drift of 9 windows is the size of a busy box's own
    # excursions on clean runs (rca.config.DetectConfig.mad_k)
    assert detect_spikes(windows, 1.0)[0] == []


def test_sustained_stretch_needs_its_minimum_length_and_the_relative_floor():
    sustained = replace(THOROUGH, detectors=("sustained",))
    itl = _noisy(60, 20.0, 0.15, 8)
    for i in range(30, 34):  # 4 windows at 1.8x, under the per-window threshold: one too few
        itl[i] = 36.0
    itl[29] = itl[34] = 18.0  # calm neighbours: the stretch is exactly those 4
    assert detect_spikes(_windows(itl), 1.0, sustained)[0] == []
    for i in range(40, 50):  # 10 windows at 1.4x: long, but under the 50 % floor
        itl[i] = 28.0
    assert detect_spikes(_windows(itl), 1.0, sustained)[0] == []
    shorter = replace(sustained, sustained_min_windows=4)
    spikes, _ = detect_spikes(_windows(itl), 1.0, shorter)
    assert [(s.first_window, s.last_window) for s in spikes] == [(30, 33)]


def test_one_blip_cannot_carry_a_sustained_stretch():
    itl = _noisy(60, 20.0, 0.1, 9)
    for i in range(20, 26):  # slightly raised neighbours: every one above the median
        itl[i] = 24.0
    itl[22] = 400.0  # one window 20x: the per-window test's business, dropped as a blip
    assert detect_spikes(_windows(itl), 1.0, DetectConfig(detectors=("sustained",)))[0] == []


def test_sustained_and_per_window_flags_of_one_incident_are_one_spike():
    itl = _noisy(60, 20.0, 0.1, 10)
    for i in range(20, 30):
        itl[i] = 34.0  # the rise
    itl[25], itl[26] = 90.0, 95.0  # its worst two windows clear the per-window threshold
    spikes, _ = detect_spikes(_windows(itl), 1.0, THOROUGH)
    assert [(s.first_window, s.last_window, s.detector) for s in spikes] == [
        (20, 29, "mad+sustained")
    ]


def test_noisy_drifting_series_gives_no_sustained_spike():
    rng = np.random.default_rng(11)
    level, itl = 0.0, []
    for _ in range(1200):  # 20 minutes of AR(1) noise, lag-1 correlation 0.6, 15 % of the level
        level = 0.6 * level + 0.15 * np.sqrt(1 - 0.6**2) * rng.standard_normal()
        itl.append(20.0 * (1 + level))
    assert detect_spikes(_windows(itl), 1.0, DetectConfig(detectors=("sustained",)))[0] == []


def test_unknown_detector_is_named_with_the_valid_ones():
    with pytest.raises(ValueError, match="mad, sustained, changepoint"):
        DetectConfig(detectors=("cusum",))


def _few_samples(n, seed):
    """TTFT windows of a few requests each: a P50 near 43 ms, a P99 (their largest) all over."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        ttfts = 43.0 * (1 + 0.08 * rng.standard_normal(4)) + rng.exponential(15.0, 4)
        rows.append({"ttft_p50_ms": float(np.median(ttfts)), "ttft_p99_ms": float(ttfts.max())})
    return rows


def test_the_median_test_finds_a_shift_of_every_request_the_p99_spread_hides():
    """A 40-ms delay on every request of windows holding 4 each (TTFT P50 ~2×): the P99 rises
    within its own spread, the P50 far outside its own."""
    rows = _few_samples(60, 3)
    for r in rows[30:38]:
        r["ttft_p50_ms"] += 40.0
        r["ttft_p99_ms"] += 40.0
    windows = [
        {**w, "itl_p99_ms": 20.0, "itl_n": 100, "e2e_p99_ms": 500.0, "e2e_n": 4, "ttft_n": 4}
        for w in rows
    ]
    assert detect_spikes(windows, 1.0, replace(DetectConfig(), detectors=("mad",)))[0] == []
    (spike,), baselines = detect_spikes(windows, 1.0)  # the default runs the median test
    assert (spike.metric, spike.detector) == ("ttft_p99", "median")
    assert 29.0 <= spike.start_s <= 31.0 and 37.0 <= spike.end_s <= 39.0
    # reported on the P99 series, against its own baseline, as the other tests report
    assert spike.baseline_ms == pytest.approx(baselines["ttft_p99"].median_ms)


def test_the_median_test_leaves_a_clean_few_sample_series_alone_and_checks_its_settings():
    windows = [
        {**w, "itl_p99_ms": 20.0, "itl_n": 100, "e2e_p99_ms": 500.0, "e2e_n": 4, "ttft_n": 4}
        for w in _few_samples(600, 4)
    ]
    assert detect_spikes(windows, 1.0)[0] == []  # the default runs the median test
    with pytest.raises(ValueError, match="median_min_windows must be >= 1"):
        detect_config(median_min_windows=0)
    with pytest.raises(ValueError, match="median_rel_excess must be >= 0"):
        detect_config(median_rel_excess=-0.1)


def _drifting(rise=None, seed=5):
    """ITL P99 of a run that settles from 20 to 40 ms at window 25 (10 % noise), with an optional
    (first, last, ms) rise: the whole-run spread is that of the two levels."""
    itl = [v * 2 if i >= 25 else v for i, v in enumerate(_noisy(50, 20.0, 0.1, seed))]
    if rise is not None:
        first, last, ms = rise
        for i in range(first, last + 1):
            itl[i] = ms * (1 + 0.05 * np.sin(i))
    return _windows(itl)


LOCAL = PRESETS["local"][0]


def test_the_local_test_finds_a_rise_the_drift_of_its_run_hides_from_the_others():
    """A 2.25× rise for 6 windows before the run settles higher: under the whole-run threshold
    (median of both levels + 6 of their spreads), far above its own neighbours."""
    windows = _drifting(rise=(10, 15, 45.0))
    assert detect_spikes(windows, 1.0)[0] == []
    (spike,), _ = detect_spikes(windows, 1.0, LOCAL)
    assert (spike.metric, spike.detector) == ("itl_p99", "local")
    assert (spike.first_window, spike.last_window) == (10, 15)


def test_the_local_test_leaves_a_drift_a_blip_and_the_runs_ends_alone():
    only = replace(LOCAL, detectors=("local",))
    assert detect_spikes(_drifting(), 1.0, only)[0] == []  # the step up itself
    assert detect_spikes(_drifting(rise=(10, 12, 60.0)), 1.0, only)[0] == []  # 3 < 4 windows
    assert detect_spikes(_drifting(rise=(0, 5, 60.0)), 1.0, only)[0] == []  # no left neighbours
    assert detect_spikes(_drifting(rise=(44, 49, 100.0)), 1.0, only)[0] == []  # nor right ones
    assert len(detect_spikes(_drifting(rise=(38, 43, 100.0)), 1.0, only)[0]) == 1  # 6 to its right


def test_the_local_test_reads_the_p50_too_and_checks_its_settings():
    rows = _few_samples(60, 3)
    for r in rows[30:38]:
        r["ttft_p50_ms"] += 40.0
    windows = [
        {**w, "itl_p99_ms": 20.0, "itl_n": 100, "e2e_p99_ms": 500.0, "e2e_n": 4, "ttft_n": 4}
        for w in rows
    ]
    local_only = replace(LOCAL, detectors=("local",))
    (spike,), _ = detect_spikes(windows, 1.0, local_only)
    assert (spike.metric, spike.detector) == ("ttft_p99", "local")
    assert spike.first_window >= 30 and spike.last_window <= 37
    with pytest.raises(ValueError, match="local_k must be > 0"):
        detect_config(local_k=0.0)
    with pytest.raises(ValueError, match="local_reach_windows must be >= local_side_min"):
        detect_config(local_reach_windows=2, local_side_min=3)
