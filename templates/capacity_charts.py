"""Plotly figures of the capacity page: throughput and latency percentiles against load, the knee
marked as a band between the capacity and the first failing load, the SLO's objectives as lines.

Same rules as templates/charts.py: plain dicts embedded as JSON, a <noscript> summary per chart.
Pure.
"""

from __future__ import annotations

from templates.charts import base_layout, chart_entry

THROUGHPUT = (
    ("request_throughput", "requests/s", "#2563eb"),
    ("goodput", "goodput (good requests/s)", "#16a34a"),
)
LATENCY = (
    ("ttft_p50_ms", "TTFT p50", "#fdba74"),
    ("ttft_p99_ms", "TTFT p99", "#ea580c"),
    ("tpot_p99_ms", "TPOT p99", "#0f766e"),
    ("e2e_p99_ms", "E2E p99", "#6d28d9"),
)
# SLO objective → the latency series it bounds (the line is drawn in that series' colour).
SLO_SERIES = {"ttft_ms": "ttft_p99_ms", "tpot_ms": "tpot_p99_ms", "e2e_ms": "e2e_p99_ms"}


def knee_shapes(knee: dict) -> list[dict]:
    """A band from the capacity to the first failing load (the knee lies inside it)."""
    if knee["status"] != "found":
        return []
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": knee["capacity"],
            "x1": knee["first_fail"],
            "y0": 0,
            "y1": 1,
            "fillcolor": "rgba(220,38,38,0.10)",
            "line": {"width": 0},
            "layer": "below",
        },
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": knee["capacity"],
            "x1": knee["capacity"],
            "y0": 0,
            "y1": 1,
            "line": {"color": "#cf222e", "width": 2, "dash": "dot"},
        },
    ]


def knee_labels(knee: dict) -> list[dict]:
    if knee["status"] != "found":
        return []
    return [
        {
            "xref": "x",
            "yref": "paper",
            "x": knee["capacity"],
            "y": 1,
            "xanchor": "left",
            "yanchor": "top",
            "showarrow": False,
            "text": f"capacity {knee['capacity']:g}",
            "font": {"color": "#cf222e"},
        }
    ]


def _series(steps: list[dict], key: str) -> list:
    return [s["metrics"].get(key) for s in steps]


def _figure(
    title: str, steps: list[dict], knee: dict, unit: str, series, y_title: str, log: bool
) -> dict:
    x = [s["load"] for s in steps]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": label,
            "x": x,
            "y": _series(steps, key),
            "line": {"color": color, "width": 2},
            "hovertemplate": "%{y:.3g}",
        }
        for key, label, color in series
        if any(v is not None for v in _series(steps, key))
    ]
    layout = base_layout(title, height=320, shapes=knee_shapes(knee), annotations=knee_labels(knee))
    layout["xaxis"].update({"title": {"text": unit}})
    layout["legend"] = {"orientation": "h", "y": -0.28}  # below the axis title
    layout["yaxis"].update({"title": {"text": y_title}, "rangemode": "tozero"})
    if log:
        layout["yaxis"] = {**layout["yaxis"], "type": "log"}
        layout["yaxis"].pop("rangemode")
    return {"data": data, "layout": layout}


def capacity_figures(ctx: dict) -> list[dict]:
    """[throughput vs load, latency percentiles vs load with the SLO lines]: [{id, figure, summary}].

    `ctx`: the page's context as plain data (dataclasses.asdict of pages.capacity.CapacityContext)."""
    steps, knee, unit = ctx["steps"], ctx["knee"], ctx["load_unit"]
    thr = _figure(
        "Throughput and goodput against load", steps, knee, unit, THROUGHPUT, "per second", False
    )
    lat = _figure("Latency percentiles against load", steps, knee, unit, LATENCY, "ms", True)
    colors = {key: color for key, _, color in LATENCY}
    for objective, limit in (ctx.get("slo") or {}).items():
        lat["layout"]["shapes"].append(
            {
                "type": "line",
                "xref": "paper",
                "yref": "y",
                "x0": 0,
                "x1": 1,
                "y0": limit,
                "y1": limit,
                "line": {"color": colors[SLO_SERIES[objective]], "dash": "dash", "width": 1},
            }
        )
    return [
        chart_entry("chart-capacity-throughput", thr),
        chart_entry("chart-capacity-latency", lat),
    ]
