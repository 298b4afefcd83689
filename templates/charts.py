"""Plotly figure specs (plain dicts) for the incident page's interactive timelines, and the helpers
every page's charts share (layout, spike bands, chart entries, <noscript> summaries).

Why dicts and not plotly.graph_objects: the page embeds them as JSON and the locally shipped
plotly.min.js draws them, so Python only needs the JSON shape (and rendering stays fast). Every
figure also yields a small summary table (min / mean / max per trace) that the page shows inside
<noscript>, so the key figures read with JavaScript off.

Only fixed names (series, stages, causes) become chart labels: Plotly renders a subset of HTML in
labels, so strings from a run (metric names, scenario text) are html-escaped before they go in.

Pure functions over lists of dicts; nothing is mutated.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from statistics import fmean, median
from typing import Any

from templates.timeline_svg import LATENCY_SERIES

PLOTLY_JS = "plotly.min.js"
# Stage columns of steps.parquet, stacked bottom-up in this order (docs/design.md names).
STAGES = (
    ("forward_ms", "forward"),
    ("penalty_ms", "penalty"),
    ("sample_ms", "sample"),
    ("schedule_ms", "schedule"),
    ("comm_ms", "comm"),
)
SERIES_COLORS = {
    "itl_p50_ms": "#5eead4",
    "itl_p99_ms": "#0f766e",
    "ttft_p99_ms": "#ea580c",
    "e2e_p99_ms": "#6d28d9",
}
STAGE_COLORS = {
    "forward_ms": "#94a3b8",
    "penalty_ms": "#d97706",
    "sample_ms": "#facc15",
    "schedule_ms": "#2563eb",
    "comm_ms": "#7c3aed",
}
CAUSE_COLORS = {
    "penalty": "#d97706",
    "memory": "#dc2626",
    "communication": "#7c3aed",
    "load": "#2563eb",
    "client": "#0891b2",
    "network": "#059669",
    "host": "#be185d",
    "unexplained": "#6b7280",
}
_FONT = {"family": "system-ui, sans-serif", "size": 12}


def base_layout(title: str, height: int = 300, **extra) -> dict:
    layout = {
        "title": {"text": html.escape(title), "font": {"size": 14}, "x": 0, "xanchor": "left"},
        "height": height,
        "margin": {"l": 60, "r": 60, "t": 36, "b": 40},
        "font": _FONT,
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.12},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        # No x title: every time axis is seconds from load start, said once above the charts.
        "xaxis": {"gridcolor": "#eaeef2", "zeroline": False},
        "yaxis": {"gridcolor": "#eaeef2", "zeroline": False},
    }
    layout.update(extra)
    return layout


def spike_shapes(spikes: list[dict]) -> list[dict]:
    """A shaded band per spike across the full height of a time-axis chart."""
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": float(s["start_s"]),
            "x1": float(s["end_s"]),
            "y0": 0,
            "y1": 1,
            "fillcolor": "rgba(220,38,38,0.12)",
            "line": {"width": 0},
            "layer": "below",
        }
        for s in spikes
    ]


def spike_labels(spikes: list[dict]) -> list[dict]:
    return [
        {
            "xref": "x",
            "yref": "paper",
            "x": float(s["start_s"]),
            "y": 1,
            "xanchor": "left",
            "yanchor": "top",
            "showarrow": False,
            "text": f"#{int(s['spike_id'])}"
            if str(s["spike_id"]).isdigit()
            else html.escape(str(s["spike_id"])),
            "font": {"color": "#cf222e"},
        }
        for s in spikes
    ]


def _window_width(windows: list[dict]) -> float:
    times = sorted(float(w["t_s"]) for w in windows)
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return float(median(gaps)) if gaps else 1.0


def column_values(rows: list[dict], key: str) -> list[float | None]:
    return [None if r.get(key) is None else float(r[key]) for r in rows]


def _has(rows: list[dict], key: str) -> bool:
    return any(r.get(key) is not None for r in rows)


def fault_shapes(faults: Sequence[dict]) -> list[dict]:
    """A dark strip above the plot per injected fault (the ground truth), as on the SVG timeline."""
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": float(f["start_s"]),
            "x1": float(f["end_s"]),
            "y0": 1.01,
            "y1": 1.04,
            "fillcolor": "rgba(31,35,40,0.75)",
            "line": {"width": 0},
        }
        for f in faults
    ]


def latency_figure(
    windows: list[dict], spikes: list[dict], gc_pauses: list[dict], faults: Sequence[dict] = ()
) -> dict | None:
    """Latency percentiles per window (log axis) over a lane of GC pause durations; faults on top."""
    if not windows:
        return None
    rows = sorted(windows, key=lambda w: float(w["t_s"]))
    half = _window_width(rows) / 2
    x = [float(w["t_s"]) + half for w in rows]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": label,
            "x": x,
            "y": column_values(rows, key),
            "line": {"color": SERIES_COLORS[key], "width": 2},
            "connectgaps": False,
            "hovertemplate": "%{y:.1f} ms",
        }
        for key, label, _ in LATENCY_SERIES
        if _has(rows, key)
    ]
    if gc_pauses:
        data.append(
            {
                "type": "bar",
                "name": "GC pause",
                "x": [float(g["t_s"]) for g in gc_pauses],
                "y": [float(g["duration_ms"]) for g in gc_pauses],
                "yaxis": "y2",
                "marker": {"color": CAUSE_COLORS["memory"]},
                "width": 0.15,
                "hovertemplate": "GC %{y:.1f} ms",
            }
        )
    layout = base_layout(
        "Latency percentiles per window, GC pauses below, injected faults above",
        height=380,
        shapes=spike_shapes(spikes) + fault_shapes(faults),
        annotations=spike_labels(spikes),
    )
    layout["yaxis"].update({"type": "log", "title": {"text": "ms"}, "domain": [0.3, 1]})
    values = [v for trace in data if trace["type"] == "scatter" for v in trace["y"] if v]
    if values and max(values) / min(values) > 30:
        layout["yaxis"]["dtick"] = 1  # decades only: 2-and-5 labels would crowd a wide range
    if gc_pauses:
        # The GC lane sits under the latency plot; the shared x axis is drawn below the lane.
        layout["yaxis2"] = {
            "domain": [0, 0.2],
            "title": {"text": "GC ms"},
            "gridcolor": "#eaeef2",
            "rangemode": "tozero",
            "anchor": "x",
        }
        layout["xaxis"]["anchor"] = "y2"
    else:
        layout["yaxis"]["domain"] = [0, 1]
    return {"data": data, "layout": layout}


def stages_figure(steps: list[dict], spikes: list[dict]) -> dict | None:
    """Stage times per step, stacked: which stage grew during a spike. Rank 0 only when TP > 1."""
    rows = sorted((s for s in steps if s.get("rank") in (None, 0)), key=lambda s: float(s["t_s"]))
    stages = [(key, label) for key, label in STAGES if _has(rows, key)]
    if not rows or not stages:
        return None
    x = [float(s["t_s"]) for s in rows]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "stackgroup": "stages",
            "name": label,
            "x": x,
            "y": [r.get(key) or 0.0 for r in rows],
            "line": {"width": 0.5, "color": STAGE_COLORS[key]},
            "hovertemplate": "%{y:.2f} ms",
        }
        for key, label in stages
    ]
    layout = base_layout("Step time by stage (stacked)", shapes=spike_shapes(spikes))
    layout["yaxis"]["title"] = {"text": "ms per step"}
    return {"data": data, "layout": layout}


def kv_figure(steps: list[dict], spikes: list[dict]) -> dict | None:
    """KV cache occupancy per step, with preemptions as bars on a second axis."""
    rows = sorted(
        (s for s in steps if s.get("rank") in (None, 0) and s.get("kv_blocks_total")),
        key=lambda s: float(s["t_s"]),
    )
    if not rows or not _has(rows, "kv_blocks_used"):
        return None
    x = [float(s["t_s"]) for s in rows]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "KV used %",
            "x": x,
            "y": [
                100.0 * float(s["kv_blocks_used"] or 0) / float(s["kv_blocks_total"]) for s in rows
            ],
            "line": {"color": CAUSE_COLORS["memory"]},
            "hovertemplate": "%{y:.1f}%",
        }
    ]
    if _has(rows, "preempted"):
        data.append(
            {
                "type": "bar",
                "name": "preempted",
                "x": x,
                "y": column_values(rows, "preempted"),
                "yaxis": "y2",
                "marker": {"color": "#111827"},
            }
        )
    if _has(rows, "waiting"):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "waiting",
                "x": x,
                "y": column_values(rows, "waiting"),
                "yaxis": "y2",
                "line": {"color": "#2563eb", "dash": "dot"},
            }
        )
    layout = base_layout(
        "KV cache occupancy, preemptions and waiting sequences", shapes=spike_shapes(spikes)
    )
    layout["yaxis"].update({"title": {"text": "% of KV blocks"}, "range": [0, 100]})
    layout["yaxis2"] = {
        "overlaying": "y",
        "side": "right",
        "title": {"text": "sequences"},
        "rangemode": "tozero",
        "showgrid": False,
    }
    return {"data": data, "layout": layout}


def comm_figure(steps: list[dict], spikes: list[dict]) -> dict | None:
    """Collective wait per step, one line per rank: a straggler shows as the others waiting."""
    ranks = sorted(
        {
            int(s["rank"])
            for s in steps
            if s.get("rank") is not None and s.get("comm_ms") is not None
        }
    )
    if len(ranks) < 2:
        return None
    data = []
    for rank in ranks:
        rows = sorted((s for s in steps if s.get("rank") == rank), key=lambda s: float(s["t_s"]))
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"rank {rank}",
                "x": [float(s["t_s"]) for s in rows],
                "y": column_values(rows, "comm_ms"),
                "hovertemplate": "%{y:.2f} ms",
            }
        )
    layout = base_layout("All-reduce wait per rank", shapes=spike_shapes(spikes))
    layout["yaxis"]["title"] = {"text": "comm ms per step"}
    return {"data": data, "layout": layout}


def nvml_figure(nvml: list[dict], spikes: list[dict]) -> dict | None:
    """GPU utilisation and memory per GPU (left, %), power (right, W), when NVML was sampled."""
    gpus = sorted({int(r["gpu"]) for r in nvml if r.get("gpu") is not None})
    if not gpus:
        return None
    data: list[dict[str, Any]] = []
    for gpu in gpus:
        rows = sorted((r for r in nvml if r.get("gpu") == gpu), key=lambda r: float(r["t_s"]))
        x = [float(r["t_s"]) for r in rows]
        if _has(rows, "util_gpu"):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"GPU {gpu} util %",
                    "x": x,
                    "y": column_values(rows, "util_gpu"),
                }
            )
        if _has(rows, "mem_used") and _has(rows, "mem_total"):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"GPU {gpu} mem %",
                    "x": x,
                    "y": [
                        None
                        if not r.get("mem_total") or r.get("mem_used") is None
                        else 100.0 * float(r["mem_used"]) / float(r["mem_total"])
                        for r in rows
                    ],
                }
            )
        if _has(rows, "power_w"):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"GPU {gpu} power W",
                    "x": x,
                    "y": column_values(rows, "power_w"),
                    "yaxis": "y2",
                    "line": {"dash": "dot"},
                }
            )
    if not data:
        return None
    layout = base_layout("GPU (NVML)", shapes=spike_shapes(spikes))
    layout["yaxis"].update({"title": {"text": "%"}, "range": [0, 100]})
    layout["yaxis2"] = {
        "overlaying": "y",
        "side": "right",
        "title": {"text": "W"},
        "showgrid": False,
    }
    return {"data": data, "layout": layout}


def load_figure(windows: list[dict], spikes: list[dict]) -> dict | None:
    """Arrival rate per window and, when known, concurrency (running / waiting sequences)."""
    rows = sorted(windows, key=lambda w: float(w["t_s"]))
    if not rows or not (_has(rows, "requests") or _has(rows, "running")):
        return None
    width = _window_width(rows)
    x = [float(w["t_s"]) + width / 2 for w in rows]
    data = []
    if _has(rows, "requests"):
        data.append(
            {
                "type": "bar",
                "name": "arrivals / s",
                "x": x,
                "marker": {"color": "#93c5fd"},
                "y": [
                    None if w.get("requests") is None else float(w["requests"]) / width
                    for w in rows
                ],
            }
        )
    for key, color in (("running", "#2563eb"), ("waiting", "#dc2626")):
        if _has(rows, key):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": key,
                    "x": x,
                    "y": column_values(rows, key),
                    "yaxis": "y2",
                    "line": {"color": color},
                }
            )
    layout = base_layout("Arrival rate and concurrency", shapes=spike_shapes(spikes))
    layout["yaxis"]["title"] = {"text": "requests / s"}
    layout["yaxis2"] = {
        "overlaying": "y",
        "side": "right",
        "title": {"text": "sequences"},
        "rangemode": "tozero",
        "showgrid": False,
    }
    return {"data": data, "layout": layout}


def summarize(figure: dict) -> list[dict]:
    """min / mean / max of each trace's values (z for heatmaps, else y): the <noscript> stand-in.

    Names are unescaped here because the page's autoescape escapes them again.
    """
    out = []
    for trace in figure["data"]:
        raw = [v for row in trace["z"] for v in row] if "z" in trace else trace.get("y", [])
        ys = [float(v) for v in raw if v is not None and not math.isnan(float(v))]
        if ys:
            out.append(
                {
                    "name": html.unescape(trace.get("name", "")),
                    "min": min(ys),
                    "mean": fmean(ys),
                    "max": max(ys),
                    "n": len(ys),
                }
            )
    return out


def chart_entry(chart_id: str, figure: dict, summary: list[dict] | None = None) -> dict:
    """What a page gets per chart: {id, title (plain text), figure, summary}."""
    title = html.unescape(figure["layout"].get("title", {}).get("text", ""))
    return {
        "id": chart_id,
        "title": title,
        "figure": figure,
        "summary": summarize(figure) if summary is None else summary,
    }


def incident_figures(ctx: dict) -> list[dict]:
    """The incident page's interactive charts, in page order: [{id, figure, summary}]."""
    candidates = [
        (
            "chart-latency",
            latency_figure(ctx["windows"], ctx["spikes"], ctx["gc_pauses"], ctx["faults"]),
        ),
        ("chart-stages", stages_figure(ctx["steps"], ctx["spikes"])),
        ("chart-kv", kv_figure(ctx["steps"], ctx["spikes"])),
        ("chart-comm", comm_figure(ctx["steps"], ctx["spikes"])),
        ("chart-nvml", nvml_figure(ctx.get("nvml") or [], ctx["spikes"])),
        ("chart-load", load_figure(ctx["windows"], ctx["spikes"])),
    ]
    return [chart_entry(cid, fig) for cid, fig in candidates if fig]
