"""Render report pages from their typed contexts (pages/) into a folder that opens offline
from file://.

The renderer only renders: every word a page says (headline, verdict, its report.json entry) is
written by its context in pages/; here the context becomes HTML, charts and files. The arrow
points one way: templates import pages' context types, never their builders, and pages import
nothing from templates.

Autoescape is on for every template: scenario names, prompts, errors and YAML come from users and
requests and are untrusted. Static assets (CSS) are copied next to each page, so a report folder is
self-contained and can be zipped, mailed or served by templates/serve.py.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import os
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import jinja2

from pages.capacity import CapacityContext
from pages.compare import CompareContext
from pages.confirm import ConfirmContext
from pages.evaluation import EvaluationContext
from pages.incident import IncidentContext
from pages.index import MANIFEST, RUN_KINDS, IndexContext, ReportEntry
from pages.nightly import NightlyContext
from pages.sweep import SweepContext
from templates.capacity_charts import capacity_figures
from templates.charts import PLOTLY_JS, incident_figures
from templates.ci_bars import ci_bar
from templates.formatting import FILTERS
from templates.heatmap_table import grid_rows, matrix_rows
from templates.page_charts import confusion_figure, nightly_trend_figures, sweep_heatmap_figures
from templates.timeline_svg import latency_timeline

TEMPLATE_DIR = Path(__file__).resolve().parent
STATIC_DIR = TEMPLATE_DIR / "static"
STATIC_FILES = ("report.css",)
INDEX_SCRIPT = ("index.js",)
CHART_FILES = ("charts.js",)


def plotly_js_path() -> Path | None:
    """plotly.min.js from the installed plotly package (its package_data), or None if absent."""
    try:
        path = Path(str(importlib.resources.files("plotly") / "package_data" / PLOTLY_JS))
    except ModuleNotFoundError:
        return None
    return path if path.is_file() else None


def _want_charts(interactive: bool | None) -> bool:
    """None: charts when plotly is installed; True: charts or a clear error; False: never."""
    if interactive is False:
        return False
    if plotly_js_path() is None:
        if interactive:
            raise RuntimeError(
                "interactive charts need the `plotly` package (its plotly.min.js is "
                "copied into the report); install it or pass interactive=False"
            )
        return False
    return True


@functools.lru_cache(maxsize=1)
def make_environment() -> jinja2.Environment:
    """The one Jinja environment (cached: templates compile once per process): autoescape always,
    and an unknown variable is an error, not ''."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=True,  # not select_autoescape: our files end in .j2, which it would skip
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    return env


def copy_static(
    out_dir: Path, names: tuple[str, ...] = STATIC_FILES, with_plotly: bool = False
) -> None:
    """Copy the page's assets into out_dir/static/ (overwriting: a re-render refreshes them)."""
    target = out_dir / "static"
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(STATIC_DIR / name, target / name)
    if with_plotly:
        plotly_js = plotly_js_path()
        if plotly_js is None:
            raise RuntimeError(
                "with_plotly: the `plotly` package (its plotly.min.js) is not installed"
            )
        dest = target / PLOTLY_JS
        # 4.8 MB per report: hard-link the installed file when the filesystem allows (every report
        # stays self-contained, the disk holds one copy), else copy; skip when already in place.
        if dest.is_file() and dest.stat().st_size == plotly_js.stat().st_size:
            return
        dest.unlink(missing_ok=True)
        try:
            os.link(plotly_js, dest)
        except OSError:
            shutil.copyfile(plotly_js, dest)


def write_manifest(out_dir: Path, entry: ReportEntry) -> Path:
    """Write out_dir/report.json (atomically): the page's index row minus its href."""
    path = out_dir / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(entry), indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def _write_page(
    out_dir: Path,
    template: str,
    charts: list[dict] | None = None,
    scripts: tuple[str, ...] = (),
    manifest: ReportEntry | None = None,
    **values,
) -> Path:
    """Render `template` into out_dir/index.html (+ report.json when `manifest` is given); copy the
    CSS, plus Plotly and charts.js when the page has charts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    charts = charts or []
    html = make_environment().get_template(template).render(charts=charts, **values)
    names = STATIC_FILES + (CHART_FILES if charts else ()) + scripts
    copy_static(out_dir, names, with_plotly=bool(charts))
    path = out_dir / "index.html"
    # Write then rename, so a server or browser never sees half a page.
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    if manifest is not None:
        write_manifest(out_dir, manifest)
    return path


def render_incident(
    context: IncidentContext,
    out_dir: str | Path,
    index_href: str | None = None,
    interactive: bool | None = None,
) -> Path:
    """Write out_dir/index.html (+ out_dir/static/) for one run; returns the page's path.

    `context` comes from pages.incident.build_incident_context. `index_href`, when given, is the
    relative link to the report index (e.g. "../index.html"); without it the page links nowhere,
    so it never carries a dead link. `interactive`: Plotly timelines (None = when plotly is
    installed); the SVG timeline and the tables are there either way.
    """
    ctx = context
    # the timeline and the charts draw from plain rows; a long run's windows in display buckets
    rows = asdict(replace(ctx, windows=ctx.chart_windows()))
    timeline = latency_timeline(
        rows["windows"], rows["spikes"], rows["gc_pauses"], faults=rows["faults"]
    )
    charts = incident_figures(rows) if _want_charts(interactive) else []
    return _write_page(
        Path(out_dir),
        "incident.html.j2",
        charts=charts,
        ctx=ctx,
        timeline=timeline,
        top=ctx.top,
        index_href=index_href,
        manifest=ctx.entry(),
    )


def render_index(context: IndexContext, out_dir: str | Path) -> Path:
    """Write out_dir/index.html listing every report (context: pages.index.build_index_context)."""
    return _write_page(
        Path(out_dir),
        "index.html.j2",
        scripts=INDEX_SCRIPT,
        ctx=context,
        kinds=RUN_KINDS,
        index_href=None,
    )


def render_nightly(
    context: NightlyContext,
    out_dir: str | Path,
    index_href: str | None = None,
    interactive: bool | None = None,
) -> Path:
    """Write a nightly regression page: verdict, per-metric delta + CI, trends (docs/reports.md)."""
    ctx = context
    rows = [{"metric": m, "bar": ci_bar(m.delta, m.ci_low, m.ci_high)} for m in ctx.metrics]
    charts = (
        nightly_trend_figures(
            [asdict(t) for t in ctx.trend], [asdict(m) for m in ctx.metrics], ctx.run.run_id
        )
        if _want_charts(interactive)
        else []
    )
    return _write_page(
        Path(out_dir),
        "nightly.html.j2",
        charts=charts,
        ctx=ctx,
        metric_rows=rows,
        with_scenario=any(m.scenario for m in ctx.metrics),
        index_href=index_href,
        manifest=ctx.entry(),
    )


def render_sweep(
    context: SweepContext,
    out_dir: str | Path,
    index_href: str | None = None,
    interactive: bool | None = None,
) -> Path:
    """Write a sweep page: one heatmap per metric over the x × y grid (docs/reports.md)."""
    ctx = context
    cells = ctx.cell_rows()
    plain = {
        "x": asdict(ctx.x),
        "y": asdict(ctx.y),
        "metrics": [asdict(m) for m in ctx.metrics],
        "cells": cells,
    }
    charts = sweep_heatmap_figures(plain) if _want_charts(interactive) else []
    heatmaps = [
        {
            "metric": m,
            "rows": grid_rows(ctx.x.values, ctx.y.values, cells, m.key, m.higher_is_worse),
            "chart": charts[i] if charts else None,
        }
        for i, m in enumerate(ctx.metrics)
    ]
    return _write_page(
        Path(out_dir),
        "sweep.html.j2",
        charts=charts,
        ctx=ctx,
        heatmaps=heatmaps,
        index_href=index_href,
        manifest=ctx.entry(),
    )


def render_evaluation(
    context: EvaluationContext,
    out_dir: str | Path,
    index_href: str | None = None,
    interactive: bool | None = None,
) -> Path:
    """Write an evaluation page: confusion matrix, per-cause scores, methods side by side."""
    ctx = context
    charts = (
        [confusion_figure(ctx.labels, ctx.confusion)]
        if _want_charts(interactive) and ctx.total
        else []
    )
    return _write_page(
        Path(out_dir),
        "evaluation.html.j2",
        charts=charts,
        ctx=ctx,
        total=ctx.total,
        accuracy=ctx.accuracy,
        best=ctx.best(),
        confusion_rows=matrix_rows(ctx.labels, ctx.confusion),
        index_href=index_href,
        manifest=ctx.entry(),
    )


def render_compare(
    context: CompareContext, out_dir: str | Path, index_href: str | None = None
) -> Path:
    """Write a run-vs-run page: both runs side by side, B − A per metric with its CI and verdict
    (context: pages.compare.build_compare_context)."""
    ctx = context
    rows = [{"metric": m, "bar": ci_bar(m.delta, m.ci_low, m.ci_high)} for m in ctx.metrics]
    return _write_page(
        Path(out_dir),
        "compare.html.j2",
        ctx=ctx,
        metric_rows=rows,
        index_href=index_href,
        manifest=ctx.entry(),
    )


def render_capacity(
    context: CapacityContext,
    out_dir: str | Path,
    index_href: str | None = None,
    interactive: bool | None = None,
) -> Path:
    """Write a capacity page: throughput and latency against load, the knee, causes past it
    (context: pages.capacity.build_capacity_context)."""
    ctx = context
    charts = capacity_figures(asdict(ctx)) if _want_charts(interactive) else []
    return _write_page(
        Path(out_dir),
        "capacity.html.j2",
        charts=charts,
        ctx=ctx,
        index_href=index_href,
        manifest=ctx.entry(),
    )


def render_confirm(
    context: ConfirmContext, out_dir: str | Path, index_href: str | None = None
) -> Path:
    """Write a confirmation page: the verdict, the intervention, both arms' excess and the share
    removed (context: pages.confirm.build_confirm_context)."""
    return _write_page(
        Path(out_dir),
        "confirm.html.j2",
        ctx=context,
        index_href=index_href,
        manifest=context.entry(),
    )
