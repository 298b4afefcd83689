"""Server-side geometry of the latency timeline, drawn as inline SVG by the incident template.

Why on the server: the page must read with JavaScript off and from file://, so the chart is plain
SVG whose path data is computed here from the window percentiles; the template only places it.
The y axis is logarithmic because ITL (tens of ms) and E2E (seconds) share one chart.

Pure functions over plain lists of dicts; nothing is mutated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from templates.formatting import fmt_clock, fmt_ms

# (context key, legend label, CSS class that colours it)
LATENCY_SERIES = (
    ("itl_p50_ms", "ITL p50", "s-itl50"),
    ("itl_p99_ms", "ITL p99", "s-itl99"),
    ("ttft_p99_ms", "TTFT p99", "s-ttft99"),
    ("e2e_p99_ms", "E2E p99", "s-e2e99"),
)
_X_STEPS_S = (
    1,
    2,
    5,
    10,
    15,
    20,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    21600,
    43200,
    86400,
)


@dataclass(frozen=True)
class Layout:
    """Pixel geometry of the chart; the viewBox scales it to the page width."""

    width: int = 960  # viewBox width: wide enough for a minute of 1-s windows to stay legible
    height: int = 260  # total height; the first screen must also hold the headline and the command
    left: int = 62  # room for y labels such as "1,000 ms"
    right: int = 12
    top: int = 16  # room for the strip that marks injected faults above the plot
    bottom: int = 48  # x labels plus the GC lane under the plot
    gc_lane: int = 18  # height of the strip under the plot where GC pauses are ticked

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom


@dataclass
class Timeline:
    """Everything the SVG macro needs: coordinates are already in viewBox pixels."""

    layout: Layout
    series: list[dict] = field(default_factory=list)  # {key, label, css, d}
    bands: list[dict] = field(default_factory=list)  # {x, w, label, title}
    gc_marks: list[dict] = field(default_factory=list)  # {x, y1, y2, title}
    fault_marks: list[dict] = field(
        default_factory=list
    )  # {x, w, title}: injected faults (ground truth)
    x_ticks: list[dict] = field(default_factory=list)  # {x, label}
    y_ticks: list[dict] = field(default_factory=list)  # {y, label}
    empty: bool = True


def _window_width(times: list[float]) -> float:
    """The window length, read from the spacing of window starts (1 s when it cannot be told)."""
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return float(median(gaps)) if gaps else 1.0


def _y_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade inside [lo, hi]; thinned to the decades when there are too many."""
    ticks = []
    for exp in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**exp
            if lo <= value <= hi:
                ticks.append(value)
    if len(ticks) > 7:
        ticks = [t for t in ticks if math.isclose(10 ** round(math.log10(t)), t)]
    return ticks


def _x_step(span_s: float) -> int:
    for step in _X_STEPS_S:
        if span_s / step <= 12:
            return step
    return _X_STEPS_S[-1]


def latency_timeline(
    windows: list[dict],
    spikes: list[dict],
    gc_pauses: list[dict],
    layout: Layout = Layout(),
    faults: Sequence[dict] = (),
) -> Timeline:
    """Lay out window percentiles (lines), spikes (shaded bands), GC pauses (ticks in a lane) and
    injected faults (a strip above the plot), so detection can be checked against the truth."""
    out = Timeline(layout=layout)
    times = sorted(float(w["t_s"]) for w in windows)
    width_s = _window_width(times)
    values = [
        float(w[k])
        for w in windows
        for k, _, _ in LATENCY_SERIES
        if w.get(k) is not None and float(w[k]) > 0
    ]
    if not times or not values:
        return out
    out.empty = False
    t_end = max(
        [times[-1] + width_s]
        + [float(s["end_s"]) for s in spikes]
        + [float(g["t_s"]) for g in gc_pauses]
    )
    t_start = min([times[0]] + [float(s["start_s"]) for s in spikes])
    t_end = max([t_end] + [float(f["end_s"]) for f in faults])
    y_lo = 10 ** math.floor(math.log10(min(values)))
    y_hi = 10 ** math.ceil(math.log10(max(values)))
    if y_hi <= y_lo:
        y_hi = y_lo * 10
    scale = _Scale(layout, t_start, max(t_end - t_start, 1e-9), y_lo, y_hi)
    out.series = _series_paths(windows, width_s, scale)
    out.bands = [_spike_band(s, scale) for s in spikes]
    out.fault_marks = [_fault_mark(f, scale) for f in faults]
    out.gc_marks = _gc_marks(gc_pauses, scale)
    step = _x_step(scale.span_s)
    tick = math.ceil(t_start / step) * step
    while tick <= t_end + 1e-9:
        out.x_ticks.append({"x": scale.x_of(tick), "label": fmt_clock(tick)})
        tick += step
    out.y_ticks = [{"y": scale.y_of(v), "label": fmt_ms(v)} for v in _y_ticks(y_lo, y_hi)]
    return out


@dataclass(frozen=True)
class _Scale:
    """Seconds to x (linear) and milliseconds to y (log) in the plot area of `layout`."""

    layout: Layout
    t_start: float
    span_s: float
    y_lo: float
    y_hi: float

    def x_of(self, t_s: float) -> float:
        return round(self.layout.left + (t_s - self.t_start) / self.span_s * self.layout.plot_w, 1)

    def y_of(self, ms: float) -> float:
        lo, hi = math.log10(self.y_lo), math.log10(self.y_hi)
        frac = (math.log10(ms) - lo) / (hi - lo)
        return round(self.layout.top + (1 - frac) * self.layout.plot_h, 1)

    def band(self, start_s: float, end_s: float, **text: str) -> dict:
        """{x, w, **text} of a time range, at least 1 px wide."""
        x0, x1 = self.x_of(start_s), self.x_of(end_s)
        return {"x": x0, "w": max(round(x1 - x0, 1), 1.0), **text}


def _series_paths(windows: list[dict], width_s: float, scale: _Scale) -> list[dict]:
    """One SVG path per latency series, through the middle of each window."""
    ordered = sorted(windows, key=lambda w: float(w["t_s"]))
    out = []
    for key, label, css in LATENCY_SERIES:
        parts, pen_down = [], False
        for w in ordered:
            v = w.get(key)
            if v is None or float(v) <= 0:
                pen_down = False  # a window without samples breaks the line instead of bridging it
                continue
            cmd = "L" if pen_down else "M"
            parts.append(f"{cmd}{scale.x_of(float(w['t_s']) + width_s / 2)} {scale.y_of(float(v))}")
            pen_down = True
        if parts:
            out.append({"key": key, "label": label, "css": css, "d": " ".join(parts)})
    return out


def _spike_band(s: dict, scale: _Scale) -> dict:
    return scale.band(
        float(s["start_s"]),
        float(s["end_s"]),
        label=f"#{s['spike_id']}",
        title=f"spike #{s['spike_id']}: {s['metric']} {fmt_clock(s['start_s'])}–{fmt_clock(s['end_s'])}, "
        f"peak {fmt_ms(s['peak_ms'])} vs {fmt_ms(s['baseline_ms'])}, {s['top_cause']}",
    )


def _fault_mark(f: dict, scale: _Scale) -> dict:
    return scale.band(
        float(f["start_s"]),
        float(f["end_s"]),
        title=f"injected {f['kind']} ({f['cause']}) {fmt_clock(f['start_s'])}–{fmt_clock(f['end_s'])}",
    )


def _gc_marks(gc_pauses: list[dict], scale: _Scale) -> list[dict]:
    """A tick per GC pause in the lane under the plot, its height growing with the pause."""
    layout = scale.layout
    longest = max((float(g["duration_ms"]) for g in gc_pauses), default=0.0)
    lane_bottom = layout.top + layout.plot_h + layout.gc_lane
    out = []
    for g in gc_pauses:
        dur = float(g["duration_ms"])
        # Tick height grows with the pause (min 3 px so short pauses stay visible).
        h = 3 + (layout.gc_lane - 4) * (dur / longest if longest > 0 else 0)
        gen = g.get("generation")
        out.append(
            {
                "x": scale.x_of(float(g["t_s"])),
                "y1": round(lane_bottom - h, 1),
                "y2": lane_bottom,
                "title": f"GC{' gen ' + str(gen) if gen is not None else ''} at {fmt_clock(g['t_s'])}: {fmt_ms(dur)}",
            }
        )
    return out
