"""latency_timeline: log-scaled lines, broken at empty windows, spike bands and GC ticks in place."""

from __future__ import annotations

import re

import pytest

from templates.timeline_svg import Layout, latency_timeline


def _windows(values: list[float | None]) -> list[dict]:
    return [{"t_s": float(i), "itl_p99_ms": v} for i, v in enumerate(values)]


def test_no_windows_gives_an_empty_chart():
    assert latency_timeline([], [], []).empty
    assert latency_timeline(_windows([None, None]), [], []).empty


def test_points_sit_at_window_centres_on_a_log_axis():
    layout = Layout()
    tl = latency_timeline(_windows([10.0, 100.0]), [], [], layout)
    (series,) = tl.series
    (x0, y0), (x1, y1) = [
        tuple(map(float, xy)) for xy in re.findall(r"[ML]([\d.]+) ([\d.]+)", series["d"])
    ]
    assert x0 == pytest.approx(layout.left + 0.25 * layout.plot_w, abs=0.1)
    assert x1 == pytest.approx(layout.left + 0.75 * layout.plot_w, abs=0.1)
    # 10 → 100 ms spans the whole 10..100 decade: bottom to top of the plot.
    assert y0 == pytest.approx(layout.top + layout.plot_h) and y1 == pytest.approx(layout.top)
    assert [t["label"] for t in tl.y_ticks] == ["10 ms", "20 ms", "50 ms", "100 ms"]


def test_missing_windows_break_the_line():
    (series,) = latency_timeline(_windows([40.0, 41.0, None, 39.0, 0.0, 42.0]), [], []).series
    assert series["d"].count("M") == 3 and series["d"].count("L") == 1


def test_bands_and_gc_marks():
    spikes = [
        {
            "spike_id": 4,
            "metric": "itl_p99",
            "start_s": 2.0,
            "end_s": 6.0,
            "peak_ms": 250.0,
            "baseline_ms": 45.0,
            "top_cause": "memory",
        }
    ]
    gcs = [{"t_s": 3.0, "duration_ms": 200.0, "generation": 2}, {"t_s": 9.5, "duration_ms": 2.0}]
    layout = Layout()
    tl = latency_timeline(_windows([45.0] * 10), spikes, gcs, layout)
    (band,) = tl.bands
    assert band["x"] == pytest.approx(layout.left + 0.2 * layout.plot_w, abs=0.1)
    assert band["w"] == pytest.approx(0.4 * layout.plot_w, abs=0.2)
    assert band["label"] == "#4" and "memory" in band["title"]
    long_mark, short_mark = tl.gc_marks
    assert long_mark["y2"] - long_mark["y1"] > short_mark["y2"] - short_mark["y1"] >= 3
    assert long_mark["title"] == "GC gen 2 at 00:03: 200 ms"
    assert short_mark["title"] == "GC at 00:10: 2 ms"
    assert [t["label"] for t in tl.x_ticks] == [
        "00:00",
        "00:01",
        "00:02",
        "00:03",
        "00:04",
        "00:05",
        "00:06",
        "00:07",
        "00:08",
        "00:09",
        "00:10",
    ]
