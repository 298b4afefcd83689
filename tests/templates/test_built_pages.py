"""Every page rendered from contexts the real builders made (tests/support/page_contexts.py):
the renderer writes each context's own words (headline, report.json entry) and draws its charts,
whatever page it is."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from templates import render
from tests.support.page_contexts import GC, STARVED, RealPages


@pytest.fixture
def built(real_pages) -> RealPages:
    return real_pages


PAGES = {
    "incident": (lambda p: p.incident_context(), render.render_incident),
    "nightly": (lambda p: p.nightly_context(), render.render_nightly),
    "sweep": (lambda p: p.sweep_context(), render.render_sweep),
    "evaluation": (lambda p: p.evaluation_context(), render.render_evaluation),
    "capacity": (lambda p: p.capacity_context(), render.render_capacity),
}


@pytest.mark.parametrize("kind", sorted(PAGES))
def test_each_page_says_its_contexts_words(built, kind, tmp_path, parse):
    make, render_page = PAGES[kind]
    ctx = make(built)
    page = render_page(ctx, tmp_path / kind, interactive=False)
    tree = parse(page.read_text(encoding="utf-8"))
    assert ctx.headline and tree.find("p", id="headline").text.endswith(ctx.headline)
    manifest = json.loads((page.parent / "report.json").read_text(encoding="utf-8"))
    assert manifest == asdict(ctx.entry()) and manifest["kind"] == kind
    assert not tree.find_all("script")  # interactive=False: tables and SVG only


def test_incident_charts_come_from_the_built_context(built, tmp_path, parse):
    ctx = built.incident_context(GC)
    tree = parse(render.render_incident(ctx, tmp_path / "gc").read_text(encoding="utf-8"))
    charts = json.loads(tree.find("script", id="chart-data").text)
    assert [c["id"] for c in charts][:1] == ["chart-latency"]
    assert ctx.verdict == "matched" and ctx.top is not None and ctx.top.top_cause == "memory"
    rows = tree.find("table", cls="comparison").find_all("tr")[1:]
    assert [r.find_all("td")[0].text for r in rows] == [c.signal for c in ctx.comparison]


def test_an_invalid_runs_page_says_why(built, tmp_path, parse):
    ctx = built.incident_context(STARVED)
    page = render.render_incident(ctx, tmp_path / "starved", interactive=False)
    headline = parse(page.read_text(encoding="utf-8")).find("p", id="headline").text
    assert headline.startswith("Invalid run: ") and "scheduling lag p99 120.3 ms" in headline
    assert json.loads((page.parent / "report.json").read_text())["verdict"] == "invalid"


def test_templates_import_no_page_builder():
    """templates → pages is one way and only for context types: no builder, no warehouse."""
    import ast
    from pathlib import Path

    root = Path(render.__file__).parent
    imported = {
        (node.module, alias.name)
        for path in root.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    assert not [m for m, _ in imported if m.startswith(("warehouse", "rca", "flows"))]
    assert not [n for m, n in imported if m.startswith("pages") and n.startswith("build_")]
    pages_imports = {
        (path.name, node.module)
        for path in (root.parent / "pages").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not [m for _, m in pages_imports if m.startswith("templates")]
    # the pages read from the warehouse stored analysis only (evaluation is built from
    # rca.evaluate's result, not the warehouse)
    assert not [(f, m) for f, m in pages_imports if m.startswith("rca") and f != "evaluation.py"]
