"""Colours for the HTML heatmap tables of the sweep and evaluation pages (readable with JS off).

Pure: maps numbers to CSS colours; no state.
"""

from __future__ import annotations

from collections.abc import Sequence

# Light yellow → orange → dark red, the same ramp as Plotly's YlOrRd.
_RAMP = ((255, 255, 204), (254, 178, 76), (240, 59, 32), (128, 0, 38))


def ramp_color(value: float | None, lo: float, hi: float, reverse: bool = False) -> tuple[str, str]:
    """(background, text colour) for `value` on [lo, hi]; grey for a missing value."""
    if value is None:
        return "#eaeef2", "#667085"
    frac = 0.0 if hi <= lo else min(max((value - lo) / (hi - lo), 0.0), 1.0)
    if reverse:
        frac = 1.0 - frac
    pos = frac * (len(_RAMP) - 1)
    i = min(int(pos), len(_RAMP) - 2)
    t = pos - i
    r, g, b = (round(a + (c - a) * t) for a, c in zip(_RAMP[i], _RAMP[i + 1]))
    # Dark cells get white text (relative luminance below ~0.45).
    luminance = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255
    return f"rgb({r}, {g}, {b})", "#ffffff" if luminance < 0.45 else "#1f2328"


def grid_rows(
    xs: Sequence, ys: Sequence, cells: list[dict], key: str, higher_is_worse: bool = True
) -> list[dict]:
    """Rows of a heatmap table, one per y value: {y, cells: [{x, value, requests, bg, fg}]}."""
    by_cell = {(c["x"], c["y"]): c for c in cells}
    values = [v for c in cells if (v := c.get(key)) is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
    rows = []
    for y in ys:
        row = []
        for x in xs:
            cell = by_cell.get((x, y), {})
            value = cell.get(key)
            bg, fg = ramp_color(value, lo, hi, reverse=not higher_is_worse)
            row.append(
                {"x": x, "value": value, "requests": cell.get("requests"), "bg": bg, "fg": fg}
            )
        rows.append({"y": y, "cells": row})
    return rows


def matrix_rows(labels: Sequence[str], matrix: Sequence[Sequence[float]]) -> list[dict]:
    """Rows of a confusion-matrix table, shaded per row (share of that truth class); diagonal marked."""
    rows = []
    for i, label in enumerate(labels):
        total = sum(matrix[i]) or 1
        row = []
        for j, value in enumerate(matrix[i]):
            share = value / total
            bg, fg = (
                f"rgba(37, 99, 235, {0.08 + 0.82 * share:.2f})",
                "#ffffff" if share > 0.5 else "#1f2328",
            )
            row.append({"value": value, "share": share, "bg": bg, "fg": fg, "diagonal": i == j})
        rows.append({"truth": label, "cells": row, "total": sum(matrix[i])})
    return rows
