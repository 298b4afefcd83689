"""The run header every page starts with (what ran, where, when, how to reproduce it), read once
for all pages from warehouse/queries/run_header.sql.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from pages.fields import iso_utc
from warehouse.db import DbConnection
from warehouse.queries import query


@dataclass(frozen=True)
class RunHeader:
    """One run as the top of a page shows it."""

    run_id: str
    command: str  # the command line that reproduces the run ("" unknown)
    scenario_name: str = ""  # the scenario's name (the run id when it has none)
    started_at: str | None = None  # ISO-8601 UTC, to the second
    duration_s: float | None = None  # measured load, after warm-up
    warmup_s: float | None = None
    engine: Mapping[str, Any] | None = (
        None  # the engine config spikelens started; None: `target:` run
    )
    target: str | None = None  # the URL of an engine spikelens only drove
    model: str | None = None  # the model id the requests named
    endpoint: str | None = None  # the API endpoint the load used (completions, chat)
    stopped_early: Any = None  # why the load stopped before its end, if it did
    server: str | None = None  # a vLLM spikelens started: its distribution and version
    server_argv: str | None = None  # … and the exact command line it ran
    scenario_yaml: str = ""  # the scenario as given, as YAML ("" not shown)
    host: str | None = None
    git_commit: str | None = None
    status: str | None = None  # the run's own status (completed, failed, …)
    errors: tuple[str, ...] = ()  # the run's errors, as text
    # why the load generator judged itself invalid (loadgen.client_health.verdict), if it did
    client_reasons: tuple[str, ...] = ()
    # CPU steal over the measured load (collectors.cpu_steal: share, worst second, cpus, scope)
    cpu_steal: Mapping[str, Any] | None = None


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


def read_run_header(conn: DbConnection, run_id: str, with_scenario: bool = True) -> RunHeader:
    """The header of `run_id`; KeyError when it is not in the warehouse.

    `with_scenario=False` leaves the scenario YAML out (the nightly, replay and sweep pages show
    the run line only).
    """
    rows = query(conn, "run_header", run_id=run_id)
    if not rows:
        raise KeyError(f"run {run_id!r} is not in the warehouse (ingest it first)")
    row = rows[0]
    scenario = _json(row["scenario"])
    errors = _json(row["errors"]) or []
    vllm = _json(row["vllm"]) or {}
    return RunHeader(
        run_id=row["run_id"],
        command=row["command"] or "",
        scenario_name=row["scenario_name"] or (scenario or {}).get("name") or row["run_id"],
        started_at=iso_utc(row["started_ns"]),
        duration_s=row["duration_s"],
        warmup_s=row["warmup_s"],
        engine=_json(row["engine"]),
        target=row["target"],
        model=row["model"],
        endpoint=row["endpoint"],
        stopped_early=_json(row["stopped_early"]),
        server=f"{vllm.get('distribution')} {vllm.get('version')}" if vllm else None,
        server_argv=" ".join(vllm.get("argv") or []) or None,
        scenario_yaml=(
            yaml.safe_dump(scenario, sort_keys=False)
            if with_scenario and isinstance(scenario, dict)
            else ""
        ),
        host=row["host"],
        git_commit=row["git_commit"],
        status=row["status"],
        errors=tuple(str(e) for e in (errors if isinstance(errors, list) else [errors])),
        client_reasons=tuple(str(r) for r in _json(row["client_reasons"]) or ()),
        cpu_steal=_json(row["cpu_steal"]),
    )
