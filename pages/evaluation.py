"""The evaluation page: a suite's confusion matrix, per-cause scores, spikelens against its peer
methods side by side, and every labelled case, from rca.evaluate.evaluate()'s result.

Scoring stays in rca.evaluate; this module only lays its figures out for the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pages.fields import ContextError, finite, need_share, one_of, relative_href
from pages.index import ReportEntry
from pages.run_header import RunHeader
from rca.evaluate import ANSWERS, MISSED, per_cause_scores


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
    # column key → (low, high) of the value's 95 % interval; a key absent: no interval
    intervals: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)
    events: int | None = None  # events the row was scored on (the same for every method)


@dataclass(frozen=True)
class Case:
    run_id: str
    truth: str
    predicted: str
    fault_kind: str | None = None
    detected: bool | None = None
    href: str | None = None  # relative link to the case's incident page
    shared: bool = False  # answered by the spike its partner fault was paired with

    def __post_init__(self) -> None:
        if self.href is not None:
            object.__setattr__(self, "href", relative_href(self.href, "href"))


@dataclass(frozen=True)
class ConfirmationScore:
    """`evaluate --confirm`: how often confirm proved a right verdict and caught a wrong one
    (rca.confirm_eval), each share with its exact 95 % interval."""

    right: int
    right_confirmed: int
    right_interval: tuple[float | None, float | None]
    wrong: int
    wrong_swapped: int  # of the wrong verdicts, those a harness swapped from a right one
    wrong_not_confirmed: int
    wrong_interval: tuple[float | None, float | None]
    inconclusive: int
    minutes_per_confirmed: float | None


@dataclass(frozen=True)
class ActedScore:
    """Attribution over the faults that acted on the clients' raw latencies (rca.acted): the
    accuracy with a miss counted wrong, its exact 95 % interval, and macro-F1."""

    faults: int  # acted, or undecided (counted as acted)
    not_acted: int
    undecided: int
    accuracy: float | None
    interval: tuple[float | None, float | None] | None
    macro_f1: float | None


@dataclass(frozen=True)
class MaterialScore:
    """Attribution over the faults that acted less the minor partners of pairs: those whose solo
    twin made under a third of the pair's shared excess (rca.solo_twins), rightly unsaid."""

    faults: int
    partners_measured: int  # partners with a share from their twins
    minor: int  # of them, the minor ones that acted (left out of `faults`)
    minor_answers: tuple[tuple[str, int], ...]  # what the minor ones were answered, most first
    accuracy: float | None  # a miss counted wrong
    interval: tuple[float | None, float | None] | None
    macro_f1: float | None


@dataclass(frozen=True)
class ExcessElsewhere:
    """How much of a detected fault's spike went to causes its run did not inject
    (rca.evaluate.excess_elsewhere): the mean and median share, how many spikes gave over 10 %,
    and the mean share left 'unexplained'."""

    spikes: int
    mean: float
    median: float
    over_10pct: int
    unexplained_mean: float


@dataclass(frozen=True)
class PlaceboScore:
    """The controls' clean stretches attributed as if they were spikes (rca.placebo): how often
    each cause would have been named, i.e. how often its signals fire on clean runs."""

    runs: int
    placebos: int
    named: float | None  # share of placebos that named a cause ('unexplained' is the honest one)
    by_cause: tuple[tuple[str, int, float], ...]  # (cause, placebos naming it, share), named > 0
    by_engine: tuple[tuple[str, int, float | None], ...] = ()  # (engine, placebos, named share)

    def __post_init__(self) -> None:
        if self.named is not None:
            need_share(self.named, "named")


@dataclass(frozen=True)
class StrictScore:
    """The attribution scored one-to-one: a spike answers only the fault it was paired with, and
    a second fault under the same spike counts as missed (rca.evaluate `attribution_one_to_one`)."""

    accuracy: float | None  # over every fault, a miss counted wrong
    interval: tuple[float | None, float | None] | None  # its exact 95 % interval
    macro_f1: float | None  # over every fault


@dataclass(frozen=True)
class EngineScore:
    """One engine's runs of a suite scored alone (rca.evaluate.per_engine_scores)."""

    engine: str  # 'spikelens' | 'vllm'
    runs: int
    faults: int
    detected: int
    accuracy: float | None  # over every fault, a miss counted wrong
    interval: tuple[float | None, float | None] | None  # its exact 95 % interval
    macro_f1: float | None  # over every fault
    acted: ActedScore | None
    control_minutes: float
    false_alarms: int


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
    skipped: tuple[str, ...] = ()  # suite cases not run: their fault kind is not registered
    # exact (Clopper–Pearson) 95 % interval of the accuracy over every fault, a miss counted
    # wrong; None in an evaluation.json written before it was scored
    accuracy_interval: tuple[float | None, float | None] | None = None
    confirmation: ConfirmationScore | None = None  # evaluate --confirm
    acted: ActedScore | None = None  # None in an evaluation.json written before it was judged
    material: MaterialScore | None = None  # None: the suite ran no solo twins
    engines: tuple[EngineScore, ...] = ()  # per engine; () in an older evaluation.json
    excess_elsewhere: ExcessElsewhere | None = None  # None: no detected fault, or an older file
    one_to_one: StrictScore | None = None  # None in an evaluation.json written before it
    placebo: PlaceboScore | None = None  # None: no control, or an older evaluation.json

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
        if not self.headline.strip():
            object.__setattr__(
                self,
                "headline",
                f"{self.correct} of {self.total} cases attributed to the right cause."
                if self.total
                else "No labelled case was evaluated.",
            )

    @property
    def total(self) -> int:
        """Cases in the confusion matrix."""
        return sum(sum(row) for row in self.confusion)

    @property
    def correct(self) -> int:
        """Cases on its diagonal: attributed to the right cause."""
        return sum(self.confusion[i][i] for i in range(len(self.labels)))

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.total if self.total else None

    def best(self) -> dict[str, float | None]:
        """The best score per method column (bold on the page); None: no method scored it."""
        best: dict[str, float | None] = {}
        for col in self.method_columns:
            values = [v for m in self.methods if (v := m.scores.get(col.key)) is not None]
            best[col.key] = (
                (max(values) if col.better == "higher" else min(values)) if values else None
            )
        return best

    def entry(self) -> ReportEntry:
        """The page's report.json: an evaluation has no verdict."""
        return ReportEntry.of(self.run, "evaluation", headline=self.headline)


def _per_cause(confusion: dict) -> tuple[CauseScore, ...]:
    return tuple(CauseScore(**row) for row in per_cause_scores(confusion))


_PEER_NOTES = {
    "baro": "RCAEval BARO on the cleaned per-spike frame; ranked metrics → causes",
    "nsigma": "RCAEval NSigma on the cleaned per-spike frame; ranked metrics → causes",
    "circa": "RCAEval CIRCA (PC graph + regression hypothesis tests); ranked metrics → causes",
    "random": "causes in a uniformly random order (floor)",
}
METHOD_COLUMNS = (
    MethodColumn("accuracy", "attribution accuracy (AC@1)"),
    MethodColumn("macro_f1", "macro-F1 (detected events)"),
    MethodColumn("ac_at_3", "AC@3"),
    MethodColumn("avg_at_5", "Avg@5"),
    MethodColumn(
        "accuracy_lead", "spikelens' lead in accuracy", better="lower"
    ),  # bold: closest peer
    MethodColumn("detection_f1", "spike F1"),
    MethodColumn("false_alarms_per_hour", "false alarms", "/h", "lower"),
)
_RANK_KEYS = ("accuracy", "macro_f1", "ac_at_3", "avg_at_5")


def _span(interval: Mapping | None) -> tuple[float | None, float | None] | None:
    if not interval or interval.get("low") is None:
        return None
    return (interval["low"], interval["high"])


def _rank_row(name: str, scores: Mapping, note: str) -> MethodRow:
    values: dict[str, float | None] = {k: scores.get(k) for k in _RANK_KEYS}
    spans = {k: _span(scores.get(f"{k}_interval")) for k in _RANK_KEYS}
    lead = scores.get("accuracy_lead")
    if lead is not None:
        values["accuracy_lead"] = lead.get("value")
        spans["accuracy_lead"] = _span(lead)
    return MethodRow(
        name,
        values,
        note,
        {k: v for k, v in spans.items() if v is not None},
        scores.get("events"),
    )


def _methods(result: dict) -> tuple[MethodRow, ...]:
    det, ctl, iv = result["detection"], result["controls"], result.get("intervals", {})
    ours = result.get("spikelens") or {
        "accuracy": result["attribution"]["accuracy"],
        "macro_f1": result["attribution"]["macro_f1"],
    }
    row = _rank_row("spikelens", ours, "stage decomposition + evidence; its causes by share")
    spans = dict(row.intervals)
    for key, src in (("detection_f1", "f1"), ("false_alarms_per_hour", "false_alarms_per_hour")):
        if _span(iv.get(src)) is not None:
            spans[key] = _span(iv.get(src))  # type: ignore[assignment]
    rows = [
        MethodRow(
            "spikelens",
            {
                **row.scores,
                "detection_f1": det["f1"],
                "false_alarms_per_hour": ctl["false_alarms_per_hour"],
            },
            row.note,
            spans,
            row.events,
        )
    ]
    for name, peer in result["peers"].items():
        note = _PEER_NOTES.get(name, "")
        if peer.get("failures"):
            note += f"; {peer['failures']} failed"
        rows.append(_rank_row(name, peer, note))
    return tuple(rows)


def build_evaluation_context(result: dict, run: RunHeader) -> EvaluationContext:
    """The evaluation page of rca.evaluate.evaluate()'s `result`; `run` is the suite as a run."""
    labels = ANSWERS  # every cause a fault can stand for, 'unexplained' and 'missed'
    confusion = result["attribution"]["confusion"]
    det, ctl = result["detection"], result["controls"]
    cases = tuple(
        Case(
            r["run_id"],
            v["cause"],
            v["attributed_cause"] or MISSED,
            v["kind"],
            v["detected"],
            f"../{r['run_id']}/index.html",  # the case's incident report, beside this page
            bool(v.get("shared", False)),
        )
        for r in result["per_run"]
        for v in r["verdicts"]
    )
    right = sum(c.truth == c.predicted for c in cases)
    headline = f"{right} of {len(cases)} injected faults found and attributed to the right cause"
    if det["f1"] is not None and ctl["false_alarms_per_hour"] is not None:
        headline += (
            f"; spike F1 {det['f1']:.2f}, {ctl['false_alarms_per_hour']:.1f} false alarms/hour"
        )
        fa = result.get("intervals", {}).get("false_alarms_per_hour") or {}
        if fa.get("high") is not None:
            headline += f" (95 % ≤ {fa['high']:.1f})"
        headline += f" over {ctl['hours'] * 60:.0f} min of controls"
        if ctl.get("false_alarms_in_invalid_runs"):
            headline += (
                f" ({ctl['false_alarms_in_invalid_runs']} of them in"
                f" {ctl['invalid_runs']} whose load generator saturated)"
            )
    return EvaluationContext(
        run=run,
        headline=headline + ".",
        labels=labels,
        confusion=tuple(tuple(confusion.get(t, {}).get(p, 0) for p in labels) for t in labels),
        per_cause=_per_cause(confusion),
        method_columns=METHOD_COLUMNS,
        methods=_methods(result),
        cases=cases,
        skipped=tuple(
            f"{s['scenario']} ({', '.join(s['unregistered_kinds'])})"
            for s in result.get("skipped", ())
        ),
        accuracy_interval=_span(result["attribution"].get("accuracy_all_faults_exact")),
        confirmation=_confirmation(result.get("confirmation")),
        acted=_acted(result.get("acted")),
        material=_material(result.get("material")),
        engines=tuple(_engine(e, s) for e, s in (result.get("per_engine") or {}).items()),
        excess_elsewhere=_excess_elsewhere(result.get("excess_elsewhere")),
        one_to_one=_strict(result.get("attribution_one_to_one")),
        placebo=_placebo(result.get("placebo")),
    )


def _placebo(scores: dict | None) -> PlaceboScore | None:
    if not scores or not scores.get("placebos"):
        return None
    return PlaceboScore(
        runs=int(scores["runs"]),
        placebos=int(scores["placebos"]),
        named=finite(scores.get("named")),
        by_cause=tuple(
            (cause, int(c["n"]), float(c["share"]))
            for cause, c in scores["by_cause"].items()
            if c["n"]
        ),
        by_engine=tuple(
            (engine, int(e["placebos"]), finite(e.get("named")))
            for engine, e in (scores.get("by_engine") or {}).items()
        ),
    )


def _strict(scores: dict | None) -> StrictScore | None:
    if not scores:
        return None
    every = scores.get("accuracy_all_faults_exact") or {}
    return StrictScore(
        accuracy=finite(every.get("value")),
        interval=_span(every),
        macro_f1=finite(scores.get("macro_f1_all_faults")),
    )


def _excess_elsewhere(scores: dict | None) -> ExcessElsewhere | None:
    if not scores or not scores.get("spikes"):
        return None
    return ExcessElsewhere(
        spikes=int(scores["spikes"]),
        mean=float(scores["mean"]),
        median=float(scores["median"]),
        over_10pct=int(scores["over_10pct"]),
        unexplained_mean=float(scores["unexplained_mean"]),
    )


def _engine(engine: str, scores: dict) -> EngineScore:
    every = scores["attribution"].get("accuracy_all_faults_exact") or {}
    return EngineScore(
        engine=engine,
        runs=int(scores["runs"]),
        faults=int(scores["faults"]),
        detected=int(scores["detection"]["tp"]),
        accuracy=finite(every.get("value")),
        interval=_span(every),
        macro_f1=finite(scores["attribution"].get("macro_f1_all_faults")),
        acted=_acted(scores.get("acted")),
        control_minutes=float(scores["controls"]["hours"]) * 60.0,
        false_alarms=int(scores["controls"]["false_alarms"]),
    )


def _acted(scores: dict | None) -> ActedScore | None:
    if not scores:
        return None
    every = scores["attribution"].get("accuracy_all_faults_exact") or {}
    return ActedScore(
        faults=int(scores["faults"]),
        not_acted=int(scores["not_acted"]),
        undecided=int(scores["undecided"]),
        accuracy=finite(every.get("value")),
        interval=_span(every),
        macro_f1=finite(scores["attribution"].get("macro_f1_all_faults")),
    )


def _material(scores: dict | None) -> MaterialScore | None:
    if not scores or not scores.get("partners_measured"):
        return None
    every = scores["attribution"].get("accuracy_all_faults_exact") or {}
    answers = sorted((scores.get("minor_answers") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    return MaterialScore(
        faults=int(scores["faults"]),
        partners_measured=int(scores["partners_measured"]),
        minor=int(scores["minor"]),
        minor_answers=tuple((str(a), int(n)) for a, n in answers),
        accuracy=finite(every.get("value")),
        interval=_span(every),
        macro_f1=finite(scores["attribution"].get("macro_f1_all_faults")),
    )


def _confirmation(scores: dict | None) -> ConfirmationScore | None:
    if not scores:
        return None
    return ConfirmationScore(
        right=int(scores["right"]),
        right_confirmed=int(scores["right_confirmed"]),
        right_interval=_span(scores["right_confirmed_exact"]) or (None, None),
        wrong=int(scores["wrong"]),
        wrong_swapped=int(scores["wrong_swapped"]),
        wrong_not_confirmed=int(scores["wrong_not_confirmed"]),
        wrong_interval=_span(scores["wrong_not_confirmed_exact"]) or (None, None),
        inconclusive=int(scores["inconclusive"]),
        minutes_per_confirmed=finite(scores.get("minutes_per_confirmed")),
    )
