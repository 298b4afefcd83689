"""Geometry of the small confidence-interval bars in the nightly table (inline SVG, JS-free).

Each row is scaled on its own, symmetric around zero, so the bar shows at a glance whether the
interval of the delta lies above zero, below it, or across it. Pure.
"""

from __future__ import annotations

WIDTH = 160  # px of the SVG in the table cell
PAD = 6


def ci_bar(delta: float | None, ci_low: float | None, ci_high: float | None) -> dict | None:
    """{zero, lo, hi, point} x positions in [PAD, WIDTH-PAD]; None when the interval is unknown."""
    if delta is None or ci_low is None or ci_high is None:
        return None
    reach = max(abs(ci_low), abs(ci_high), abs(delta)) * 1.1 or 1.0
    half = (WIDTH - 2 * PAD) / 2

    def x_of(v: float) -> float:
        return round(PAD + half + v / reach * half, 1)

    return {
        "width": WIDTH,
        "zero": x_of(0.0),
        "lo": x_of(ci_low),
        "hi": x_of(ci_high),
        "point": x_of(delta),
    }
