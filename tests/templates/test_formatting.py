"""The report's number filters: units, missing values, clock times."""

from __future__ import annotations

import math

from templates.formatting import (
    fmt_clock,
    fmt_metric,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_ratio,
    fmt_sig,
    fmt_value,
)


def test_missing_values_read_as_a_dash():
    for fn in (fmt_num, fmt_ms, fmt_pct, fmt_clock, fmt_value):
        assert fn(None) == "—" and fn(math.nan) == "—"
    assert fmt_ratio(5.0, 0) == "—" and fmt_ratio(None, 3.0) == "—"


def test_milliseconds_keep_useful_precision():
    assert [fmt_ms(v) for v in (0.423, 7.25, 45.0, 255.4, 1840.0)] == [
        "0.42 ms",
        "7.2 ms",
        "45 ms",
        "255 ms",
        "1,840 ms",
    ]


def test_clock_is_minutes_and_seconds_from_load_start():
    assert [fmt_clock(v) for v in (0, 20, 20.4, 75, 3725, -3)] == [
        "00:00",
        "00:20",
        "00:20",
        "01:15",
        "1:02:05",
        "-00:03",
    ]


def test_shares_units_and_ratios():
    assert fmt_pct(0.78) == "78%" and fmt_pct(0.0712, 1) == "7.1%"
    assert fmt_value(66.0, "/min") == "66 /min" and fmt_value(44.0, "%") == "44%"
    assert fmt_value(187.0, "ms") == "187 ms" and fmt_value("n/a") == "n/a"
    assert fmt_ratio(255.0, 45.0) == "5.7×"


def test_significant_figures_for_heatmap_cells():
    assert [fmt_sig(v) for v in (0.04, 2.9, 3.0, 89.2, 161.0, 1840.0, None)] == [
        "0.04",
        "2.9",
        "3",
        "89.2",
        "161",
        "1,840",
        "—",
    ]


def test_metric_names_get_their_display_label():
    assert [fmt_metric(m) for m in ("itl_p99", "ttft_p99_ms", "e2e_p50", "kv_usage")] == [
        "ITL p99",
        "TTFT p99",
        "E2E p50",
        "kv_usage",
    ]
