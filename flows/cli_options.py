"""Command-line option strings turned into what the flows take: a JSON object, an SLO, a
capacity sweep's steps or search. A bad value exits 2 with one line naming the flag, before any
flow (or Prefect) starts.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flows.cli_run import fail

if TYPE_CHECKING:
    from flows.capacity import CapacityOptions


def json_option(name: str, value: str | None) -> dict | None:
    """`--name '{...}'` → its mapping (None when not given); exits 2 unless a JSON object."""
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        fail(f"{name}: not valid JSON: {e}")
    if not isinstance(parsed, dict):
        fail(f"{name}: must be a JSON object")
    return parsed


DETECTOR_HELP = (
    "Spike detector preset: default (few false alarms on a busy box; tests each window's P99"
    " and P50), thorough (also finds 1.5x slowdowns, at more false alarms), sensitive (quiet,"
    " dedicated hardware), p99 (the default before 2026-12-07: no P50 test), p50 (= default),"
    " local (the default and a test of each stretch against its neighbours, for drifting runs)"
)


def detector_option(value: str | None) -> str | None:
    """`--detector NAME` checked against rca.config.PRESETS; exits 2 naming the valid ones."""
    from rca.config import preset

    if value is not None:
        try:
            preset(value, "--detector")
        except ValueError as e:
            fail(str(e))
    return value


def slo_option(value: str | None) -> dict | None:
    """'ttft_ms=500,tpot_ms=50' → {'ttft_ms': 500.0, 'tpot_ms': 50.0}; checked by loadgen's SLO."""
    from loadgen.errors import SpecError
    from loadgen.metrics import SLO

    if value is None:
        return None
    slo: dict[str, float | None] = {}
    for part in (p for p in value.split(",") if p.strip()):
        key, sep, number = part.partition("=")
        try:
            slo[key.strip()] = float(number) if sep else None
        except ValueError:
            fail(f"--slo: {part!r}: expected NAME=MS, e.g. ttft_ms=500")
    try:
        SLO.from_dict(slo, where="--slo")
    except SpecError as e:
        fail(str(e))
    return slo


@dataclass(frozen=True)
class CapacityFlags:
    """The flags of `spikelens capacity` as given: exactly one of users, rates or search."""

    users: str | None  # closed-loop steps, "2,4,8"
    rates: str | None  # open-loop steps in requests/s, "1,2,4"
    search: str | None  # "users" or "rate": double until the SLO fails, then bisect
    start: float  # search: first load
    max_load: float  # search: highest load tried
    max_steps: int  # search: most runs in all
    slo: str | None  # "ttft_ms=500,tpot_ms=50"; None: the scenario's slo:
    attainment: float  # share of requests that must meet the SLO

    def options(self, scenario: Path) -> CapacityOptions:
        """The sweep's options, checked against `scenario` (its SLO resolved); exits 2 on a bad
        flag or scenario."""
        from flows.capacity import CapacityError, resolve_slo
        from flows.scenario import ScenarioError
        from loadgen.errors import SpecError

        if sum(x is not None for x in (self.users, self.rates, self.search)) != 1:
            fail("give exactly one of --users 2,4,8, --rates 1,2,4 or --search users|rate")
        try:
            options = dataclasses.replace(
                self._steps_or_search(), slo=slo_option(self.slo), attainment=self.attainment
            )
            resolve_slo(str(scenario), options)  # fail fast, before Prefect starts
        except (ValueError, ScenarioError, SpecError, CapacityError) as e:
            fail(str(e))
        return options

    def _steps_or_search(self) -> CapacityOptions:
        from flows.capacity import CapacityOptions
        from rca.capacity import SearchOptions, parse_loads

        if self.search is not None:
            search = SearchOptions(
                kind=self.search,
                start=self.start,
                max_load=self.max_load,
                max_steps=self.max_steps,
                resolution=1.0 if self.search == "users" else max(self.start / 4, 0.05),
            )
            return CapacityOptions(kind=self.search, search=search.check())
        kind = "users" if self.users is not None else "rate"
        loads = self.users if self.users is not None else self.rates
        if loads is None:
            fail("give --users 2,4,8 or --rates 1,2,4")
        return CapacityOptions(kind=kind, loads=tuple(parse_loads(loads, kind)))
