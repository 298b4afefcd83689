"""A scheduled fault as written in a scenario / CONFIG.json: kind, start_s, duration_s, params.

`parse_fault_specs` checks the shape of each entry and that its kind is in the catalogue
(`fault_catalogue`); the params are checked by the applier the flows route the fault to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spikelens_common.config_keys import ALL_UNKNOWN, strict_keys
from spikelens_common.fault_catalogue import FAULT_CAUSES

_SPEC_KEYS = ("kind", "start_s", "duration_s", "params")


@dataclass(frozen=True)
class FaultSpec:
    kind: str  # e.g. memory.gc_storm (see FAULT_CAUSES)
    start_s: float  # seconds after the fault clock is armed (start of measured load)
    duration_s: float  # length of the window
    params: dict[str, Any] = field(
        default_factory=dict
    )  # kind-specific magnitudes; defaults per kind

    @property
    def cause(self) -> str:
        return FAULT_CAUSES[self.kind]


def parse_fault_specs(items: Sequence[Mapping[str, Any]] | None) -> list[FaultSpec]:
    """Validate a fault list; errors name the entry index and the field."""
    specs = []
    for i, item in enumerate(items or []):
        where = f"faults[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where}: expected a mapping with {', '.join(_SPEC_KEYS)}")
        strict_keys(
            item,
            _SPEC_KEYS,
            where,
            message=ALL_UNKNOWN,
            error=ValueError,
            sort_unknown=True,
            valid=_SPEC_KEYS,
        )
        kind = item.get("kind")
        if kind not in FAULT_CAUSES:
            raise ValueError(
                f"{where}.kind: unknown fault kind {kind!r}; known: {', '.join(sorted(FAULT_CAUSES))}"
            )
        for key in ("start_s", "duration_s"):
            v = item.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"{where}.{key}: must be a number >= 0, got {v!r}")
        params = item.get("params") or {}
        if not isinstance(params, Mapping):
            raise ValueError(f"{where}.params: must be a mapping, got {params!r}")
        specs.append(
            FaultSpec(kind, float(item["start_s"]), float(item["duration_s"]), dict(params))
        )
    return specs
