"""Jinja filters that turn numbers into the short strings a report shows.

Why a module of its own: every page formats milliseconds, shares and clock times the same way, and
a missing figure (None, NaN) must read as an em dash rather than "None" or "nan".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

MISSING = "—"


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_num(value: Any, digits: int = 1) -> str:
    """A plain number: `digits` decimals below 100, none above, thousands separated."""
    if _is_missing(value):
        return MISSING
    if not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"  # "45 ms", not "45.0 ms"
    return f"{value:,.{digits}f}"


def fmt_sig(value: Any, digits: int = 3) -> str:
    """`digits` significant figures, trailing zeros dropped (heatmap cells): 0.04, 2.9, 89.2, 161, 1,840."""
    if _is_missing(value):
        return MISSING
    if not isinstance(value, (int, float)):
        return str(value)
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def fmt_ms(value: Any) -> str:
    """Milliseconds with a unit: '0.42 ms', '45.3 ms', '255 ms', '1,840 ms'."""
    if _is_missing(value):
        return MISSING
    if isinstance(value, (int, float)) and abs(value) < 1:
        return f"{value:.2f} ms"
    return f"{fmt_num(value)} ms"


def fmt_pct(share: Any, digits: int = 0) -> str:
    """A share in [0, 1] as a percentage: 0.78 → '78%'."""
    if _is_missing(share):
        return MISSING
    return f"{share * 100:.{digits}f}%"


def fmt_clock(t_s: Any) -> str:
    """Seconds from the start of measured load as a clock: 20 → '00:20', 3725 → '1:02:05'."""
    if _is_missing(t_s):
        return MISSING
    total = round(t_s)
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}:{minutes:02d}:{seconds:02d}"
    return f"{sign}{minutes:02d}:{seconds:02d}"


def fmt_value(value: Any, unit: str | None = None) -> str:
    """A figure with its unit as given by the data ('ms', '%', '/min', ...); shares stay as numbers."""
    if _is_missing(value):
        return MISSING
    if unit == "ms":
        return fmt_ms(value)
    text = (
        fmt_num(value, digits=2) if isinstance(value, float) and abs(value) < 10 else fmt_num(value)
    )
    if not unit:
        return text
    return f"{text}{unit}" if unit in ("%", "×", "x") else f"{text} {unit}"


def fmt_ratio(peak: Any, baseline: Any) -> str:
    """How many times the baseline a peak is: '5.7×'; a dash when the baseline is zero or missing."""
    if _is_missing(peak) or _is_missing(baseline) or not baseline:
        return MISSING
    return f"{peak / baseline:.1f}×"


# Display names of rca's metric keys (docs/design.md spelling); other names show as given.
METRIC_LABELS = {
    "itl_p50": "ITL p50",
    "itl_p99": "ITL p99",
    "ttft_p50": "TTFT p50",
    "ttft_p99": "TTFT p99",
    "e2e_p50": "E2E p50",
    "e2e_p99": "E2E p99",
}


def fmt_metric(name: Any) -> str:
    """'itl_p99' → 'ITL p99'; an unknown metric name is shown unchanged."""
    return METRIC_LABELS.get(str(name).removesuffix("_ms"), str(name))


FILTERS: dict[str, Callable[..., str]] = {
    "num": fmt_num,
    "sig": fmt_sig,
    "ms": fmt_ms,
    "pct": fmt_pct,
    "clock": fmt_clock,
    "value": fmt_value,
    "ratio": fmt_ratio,
    "metric": fmt_metric,
}
