"""The confirmation page: did removing a spike's verdict's cause take its excess away?

Built from the result `spikelens confirm` stored beside the run (flows.confirm.ConfirmResult as a
mapping: the arms' measures, the share removed and its min–max over pairs, the verdict and why,
the intervention and what it leaves); the page does no analysis of its own (rca.confirm judged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pages.fields import one_of, relative_href
from pages.index import ReportEntry
from pages.run_header import RunHeader

VERDICTS = ("confirmed", "not confirmed", "inconclusive")
METRIC_LABELS = {"itl_p99": "ITL p99", "ttft_p99": "TTFT p99", "e2e_p99": "E2E p99"}


@dataclass(frozen=True)
class ArmRow:
    """One arm run: as recorded or with the cause removed."""

    arm: str  # recorded | removed
    repeat: int
    run_id: str
    baseline_ms: float | None
    spike_ms: float | None
    excess_ms: float | None
    threshold_ms: float | None
    reproduced: bool
    wall_s: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        one_of(self.arm, ("recorded", "removed"), "arm")


@dataclass(frozen=True)
class OutsideRow:
    """A client or network cause measured on the recorded run: the client's and the server's
    p99 over the same requests, each against its own baseline windows (rca.confirm)."""

    compared: str  # 'TTFT' | 'the whole stream'
    client_baseline_ms: float
    client_excess_ms: float
    server_baseline_ms: float
    server_excess_ms: float
    windows_above: int
    reproduced: bool


@dataclass(frozen=True)
class ConfirmContext:
    """Everything the confirmation page shows."""

    run_id: str
    spike_id: int
    metric: str
    cause: str
    stored_cause: str | None
    verdict: str
    reason: str
    intervention_name: str
    intervention_does: str
    intervention_leaves: str
    intervention_available: bool
    share: float | None
    share_low: float | None
    share_high: float | None
    pairs: int
    arms: tuple[ArmRow, ...]
    command: str
    headline: str = ""
    incident_href: str | None = None  # the run's incident page, relative to this one
    outside: OutsideRow | None = None  # client/network: measured instead of re-run

    def __post_init__(self) -> None:
        one_of(self.verdict, VERDICTS, "verdict")
        if self.incident_href is not None:
            object.__setattr__(self, "incident_href", relative_href(self.incident_href, "href"))
        if not self.headline:
            object.__setattr__(self, "headline", self._headline())

    @property
    def metric_label(self) -> str:
        return METRIC_LABELS.get(self.metric, self.metric)

    @property
    def forced(self) -> bool:
        """The cause confirmed is not the stored verdict (`--cause`)."""
        return self.cause != self.stored_cause

    def _headline(self) -> str:
        if self.share is None:
            return f"{self.cause}: {self.reason}"
        if self.outside is not None:
            return f"{self.cause}: {self.reason}"
        return (
            f"{self.cause}: with {self.intervention_name}, {self.share:.0%} "
            f"[{self.share_low:.0%}, {self.share_high:.0%}] of the {self.metric_label} excess "
            f"went away — {self.reason}"
        )

    def mean_ms(self, arm: str, key: str) -> float | None:
        values = [getattr(a, key) for a in self.arms if a.arm == arm]
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    @property
    def run(self) -> RunHeader:
        return RunHeader(run_id=self.run_id, command=self.command, scenario_name="")

    def entry(self) -> ReportEntry:
        return ReportEntry.of(
            self.run,
            "confirm",
            verdict=self.verdict,
            top_cause=self.cause,
            headline=f"spike {self.spike_id}: {self.headline}",
        )


def build_confirm_context(
    result: Mapping[str, Any], incident_href: str | None = None
) -> ConfirmContext:
    """From a confirmation's stored result (flows.confirm.ConfirmResult as a mapping);
    `incident_href`: the run's incident page, relative to this page (None: no link)."""
    share = result.get("share") or {}
    intervention = result["intervention"]
    forced = result["cause"] != result.get("stored_cause")
    return ConfirmContext(
        run_id=result["run_id"],
        spike_id=int(result["spike_id"]),
        metric=result["metric"],
        cause=result["cause"],
        stored_cause=result.get("stored_cause"),
        verdict=result["verdict"],
        reason=result["reason"],
        intervention_name=intervention["name"],
        intervention_does=intervention["does"] or intervention["reason"],
        intervention_leaves=intervention.get("leaves") or "",
        intervention_available=bool(intervention["available"]),
        share=share.get("point"),
        share_low=share.get("low"),
        share_high=share.get("high"),
        pairs=int(share.get("pairs") or 0),
        arms=tuple(
            ArmRow(
                arm=a["arm"],
                repeat=int(a["repeat"]),
                run_id=a["run_id"],
                baseline_ms=a["baseline_ms"],
                spike_ms=a["spike_ms"],
                excess_ms=a["excess_ms"],
                threshold_ms=a["threshold_ms"],
                reproduced=bool(a["reproduced"]),
                wall_s=a.get("wall_s"),
                note=a.get("note") or "",
            )
            for a in result.get("arms") or []
        ),
        command=f"spikelens confirm {result['run_id']} --spike {result['spike_id']}"
        + (f" --repeats {n}" if (n := _repeats(result)) else "")
        + (f" --cause {result['cause']}" if forced else ""),
        incident_href=incident_href,
        outside=OutsideRow(**result["outside"]) if result.get("outside") else None,
    )


def _repeats(result: Mapping[str, Any]) -> int:
    """The K of the confirmation (0: no arm ran)."""
    return sum(1 for a in result.get("arms") or [] if a["arm"] == "recorded")
