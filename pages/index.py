"""The index page of every report, built from the reports folder itself.

Why: every render writes a small `report.json` beside its `index.html` (run id, kind, date,
verdict, top cause, headline), so the index of all runs can be rebuilt from the folder alone,
without the warehouse, and a folder copied from another machine indexes itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pages.fields import ContextError, one_of, relative_href
from pages.run_header import RunHeader

MANIFEST = "report.json"
RUN_KINDS = (
    "incident",
    "nightly",
    "replay",
    "sweep",
    "evaluation",
    "capacity",
    "compare",
    "confirm",
)


@dataclass(frozen=True)
class ReportEntry:
    """What a page's report.json says (its index row minus the href); every page context builds
    its own (`context.entry()`), the renderer only writes it."""

    run_id: str
    kind: str  # one of RUN_KINDS
    started_at: str | None
    scenario_name: str = ""
    verdict: str | None = None
    top_cause: str | None = None
    headline: str = ""
    confirmation: str | None = None  # the top cause's `spikelens confirm` result, in words

    def __post_init__(self) -> None:
        one_of(self.kind, RUN_KINDS, "kind")

    @classmethod
    def of(cls, run: RunHeader, kind: str, **row: Any) -> ReportEntry:
        """The entry of a page about `run` (its id, start and scenario) with `row`'s words."""
        return cls(run.run_id, kind, run.started_at, run.scenario_name or "", **row)


@dataclass(frozen=True)
class IndexRow:
    """One page in the index."""

    run_id: str
    kind: str  # one of RUN_KINDS
    started_at: str | None  # ISO-8601 UTC ("" when unknown)
    href: str  # the page, relative to the index (percent-encoded)
    scenario_name: str = ""
    verdict: str | None = None  # matched / wrong cause / missed, or a nightly verdict
    top_cause: str | None = None
    headline: str = ""
    confirmation: str | None = None  # e.g. "confirmed: 92 % [84, 96] of the excess went away"

    def __post_init__(self) -> None:
        one_of(self.kind, RUN_KINDS, "kind")
        object.__setattr__(self, "started_at", self.started_at or "")
        object.__setattr__(self, "href", relative_href(self.href, "href"))


@dataclass(frozen=True)
class IndexContext:
    """The index page: its rows newest first (ISO-8601 UTC strings sort as times)."""

    runs: tuple[IndexRow, ...]
    title: str = "spikelens reports"
    generated_at: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "runs", tuple(sorted(self.runs, key=lambda r: r.started_at, reverse=True))
        )


def _row(entry: dict, href: str) -> IndexRow | None:
    if not isinstance(entry, dict) or entry.get("kind") not in RUN_KINDS or not entry.get("run_id"):
        return None
    try:
        return IndexRow(
            run_id=str(entry["run_id"]),
            kind=entry["kind"],
            started_at=str(entry.get("started_at") or ""),
            scenario_name=str(entry.get("scenario_name") or ""),
            verdict=entry.get("verdict"),
            top_cause=entry.get("top_cause"),
            headline=str(entry.get("headline") or ""),
            confirmation=str(entry["confirmation"]) if entry.get("confirmation") else None,
            href=href,
        )
    except ContextError:
        return None


def build_index_context(root: str | Path, title: str = "spikelens reports") -> IndexContext:
    """The index of every report.json under `root`.

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
        row = _row(entry, page.relative_to(root).as_posix())
        if row is not None:
            runs.append(row)
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return IndexContext(runs=tuple(runs), title=title, generated_at=generated)
