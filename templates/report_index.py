"""The report index built from the reports folder itself: each render leaves a `report.json`
beside its page; `rebuild_index(reports_root)` after each render keeps root/index.html current
(pages.index.build_index_context reads the manifests back).
"""

from __future__ import annotations

import json
from pathlib import Path

from pages.index import MANIFEST, build_index_context


def write_manifest(out_dir: Path, entry: dict) -> Path:
    """Write out_dir/report.json (atomically); `entry` holds the index row minus its href."""
    path = out_dir / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(entry, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def rebuild_index(root: str | Path, title: str = "spikelens reports") -> Path:
    """Render root/index.html from the manifests under root; returns its path."""
    from templates.render import render_index  # render imports this module

    return render_index(build_index_context(root, title), root)
