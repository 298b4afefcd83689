"""The report index built from the reports folder itself.

Why: every render writes a small `report.json` beside its `index.html` (run id, kind, date,
verdict, top cause, headline), so the index of all runs can be rebuilt from the folder alone,
without the warehouse — `rebuild_index(reports_root)` after each render keeps it current, and a
folder copied from another machine indexes itself.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from templates.page_contexts import RUN_KINDS

MANIFEST = "report.json"


def write_manifest(out_dir: Path, entry: dict) -> Path:
    """Write out_dir/report.json (atomically); `entry` holds the index row minus its href."""
    path = out_dir / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(entry, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def build_index_context(root: str | Path, title: str = "spikelens reports") -> dict:
    """An index context (docs/reports.md "Index") of every report.json under `root`.

    Manifests that cannot be read or name an unknown kind are skipped: one broken folder must not
    hide every other report. Each row's href is the page's path relative to `root`.
    """
    root = Path(root).resolve()
    runs = []
    for manifest in sorted(root.rglob(MANIFEST)):
        page = manifest.parent / "index.html"
        if manifest.parent == root or not page.is_file():
            continue
        try:
            entry = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(entry, dict) or entry.get("kind") not in RUN_KINDS or not entry.get("run_id"):
            continue
        runs.append({
            "run_id": str(entry["run_id"]), "kind": entry["kind"],
            "started_at": str(entry.get("started_at") or ""), "scenario_name": str(entry.get("scenario_name") or ""),
            "verdict": entry.get("verdict"), "top_cause": entry.get("top_cause"),
            "headline": str(entry.get("headline") or ""),
            "href": page.relative_to(root).as_posix(),
        })
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {"title": title, "generated_at": generated, "runs": runs}


def rebuild_index(root: str | Path, title: str = "spikelens reports") -> Path:
    """Render root/index.html from the manifests under root; returns its path."""
    from templates.render import render_index  # render imports this module

    return render_index(build_index_context(root, title), root)
