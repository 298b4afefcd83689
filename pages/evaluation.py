"""The evaluation page: a suite's confusion matrix, per-cause scores, spikelens against its peer
methods side by side, and every labelled case, from rca.evaluate.evaluate()'s result.

Scoring stays in rca.evaluate; this module only lays its figures out for the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pages.fields import ContextError, need_share, one_of, relative_href
from pages.run_header import RunHeader
from rca.config import CAUSES
from rca.evaluate import MISSED, per_cause_scores


@dataclass(frozen=True)
class CauseScore:
    cause: str
    precision: float | None  # each in [0, 1]; None: undefined (nothing predicted)
    recall: float | None
    f1: float | None
    support: int | None = None  # faults of this cause

    def __post_init__(self) -> None:
        for name in ("precision", "recall", "f1"):
            if getattr(self, name) is not None:
                need_share(getattr(self, name), name)


@dataclass(frozen=True)
class MethodColumn:
    key: str  # a MethodRow.scores key
    label: str
    unit: str = ""
    better: Literal["higher", "lower"] = "higher"  # which end of the column is bold

    def __post_init__(self) -> None:
        one_of(self.better, ("higher", "lower"), "better")


@dataclass(frozen=True)
class MethodRow:
    method: str
    scores: Mapping[str, float | None]  # column key → value (None: not measured)
    note: str = ""


@dataclass(frozen=True)
class Case:
    run_id: str
    truth: str
    predicted: str
    fault_kind: str | None = None
    detected: bool | None = None
    href: str | None = None  # relative link to the case's incident page

    def __post_init__(self) -> None:
        if self.href is not None:
            object.__setattr__(self, "href", relative_href(self.href, "href"))


@dataclass(frozen=True)
class EvaluationContext:
    """Everything the evaluation page shows; the confusion matrix is labels × labels."""

    run: RunHeader
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]  # [truth][predicted] counts
    per_cause: tuple[CauseScore, ...]
    method_columns: tuple[MethodColumn, ...]
    methods: tuple[MethodRow, ...]
    cases: tuple[Case, ...] = ()
    headline: str = ""

    def __post_init__(self) -> None:
        if len(self.confusion) != len(self.labels):
            raise ContextError(
                "confusion", f"{len(self.confusion)} rows for {len(self.labels)} labels"
            )
        for i, row in enumerate(self.confusion):
            if len(row) != len(self.labels):
                raise ContextError(
                    f"confusion[{i}]", f"{len(row)} columns for {len(self.labels)} labels"
                )


def _per_cause(confusion: dict) -> tuple[CauseScore, ...]:
    return tuple(CauseScore(**row) for row in per_cause_scores(confusion))


_PEER_NOTES = {
    "baro": "rcaeval BARO, top metric → cause",
    "nsigma": "rcaeval NSigma, top metric → cause",
    "random": "uniform random cause (floor)",
}
METHOD_COLUMNS = (
    MethodColumn("accuracy", "attribution accuracy"),
    MethodColumn("macro_f1", "macro-F1 (detected events)"),
    MethodColumn("detection_f1", "spike F1"),
    MethodColumn("false_alarms_per_hour", "false alarms", "/h", "lower"),
)


def _methods(result: dict) -> tuple[MethodRow, ...]:
    det, ctl = result["detection"], result["controls"]
    rows = [
        MethodRow(
            "spikelens",
            {
                "accuracy": result["attribution"]["accuracy"],
                "macro_f1": result["attribution"]["macro_f1"],
                "detection_f1": det["f1"],
                "false_alarms_per_hour": ctl["false_alarms_per_hour"],
            },
            "stage decomposition + evidence",
        )
    ]
    for name, peer in result["peers"].items():
        rows.append(
            MethodRow(
                name,
                {
                    "accuracy": peer["accuracy"],
                    "macro_f1": peer["macro_f1"],
                    "detection_f1": None,
                    "false_alarms_per_hour": None,
                },
                _PEER_NOTES.get(name, "")
                + (f"; {peer['failures']} failed" if peer.get("failures") else ""),
            )
        )
    return tuple(rows)


def build_evaluation_context(result: dict, run: RunHeader) -> EvaluationContext:
    """The evaluation page of rca.evaluate.evaluate()'s `result`; `run` is the suite as a run."""
    labels = (*CAUSES, MISSED)
    confusion = result["attribution"]["confusion"]
    det, ctl = result["detection"], result["controls"]
    cases = tuple(
        Case(
            r["run_id"],
            v["cause"],
            v["attributed_cause"] or MISSED,
            v["kind"],
            v["detected"],
            f"../{r['run_id']}/index.html",
        )  # the case's incident report, beside this page
        for r in result["per_run"]
        for v in r["verdicts"]
    )
    right = sum(c.truth == c.predicted for c in cases)
    headline = f"{right} of {len(cases)} injected faults found and attributed to the right cause"
    if det["f1"] is not None and ctl["false_alarms_per_hour"] is not None:
        headline += f"; spike F1 {det['f1']:.2f}, {ctl['false_alarms_per_hour']:.1f} false alarms/hour on controls"
    return EvaluationContext(
        run=run,
        headline=headline + ".",
        labels=labels,
        confusion=tuple(tuple(confusion.get(t, {}).get(p, 0) for p in labels) for t in labels),
        per_cause=_per_cause(confusion),
        method_columns=METHOD_COLUMNS,
        methods=_methods(result),
        cases=cases,
    )
