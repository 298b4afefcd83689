"""Score analysed runs against their ground-truth faults, side by side with peer methods.

Event level, per run: faults and spikes are matched one-to-one (Hungarian assignment maximising
overlap), a pair counting only if the spike overlaps the fault widened by `tolerance_windows` on
each side. Then over all runs:
  detection    precision, recall, F1 (TP = matched pairs, FP = unmatched spikes, FN = unmatched
               faults); detection delay = spike start − fault start of matched pairs (s);
  controls     false alarms per hour over runs without faults; those in controls whose load
               generator saturated (runs.status 'invalid') are counted, and also counted apart;
  attribution  accuracy = matched pairs whose top cause is the fault's cause / matched pairs;
               macro-F1 over causes and the confusion matrix, where a missed fault is predicted
               'missed' (so misses cost attribution recall too). A fault the one-to-one pairing
               left out but that a matched spike overlaps (two faults at once, one spike) is
               answered by that spike, not missed: a spike over k faults answers each with the
               fault's cause where it is among its first k said causes (the verdict, and every
               cause that like it covers a third of the excess: spikelens_common.said_causes),
               else with its verdict. The strict one-to-one figures stay beside them
               (`attribution_one_to_one`).
  acted        the same attribution figures over the faults that acted: judged per fault from
               the run's raw client latencies against its own fault-free stretches (rca.acted),
               not from the detector; a fault the judge cannot decide counts as acted, unless
               the suite ran its solo twin (rca.solo_twins): then the twin's judgement decides.
  material     the same over the faults that acted less the *minor* partners of a pair: those
               whose twin made under a third of the pair's shared excess, which the product
               rightly leaves unsaid. Twin runs are not scored as runs of the suite.
  intervals    every figure with its 95 % interval (rca.intervals): a seeded bootstrap over
               events for detection and attribution, the exact Poisson interval for false alarms
               per hour on the controls' hours.
Ranking, as RCAEval scores it (rca.rank_scores): AC@1 (= accuracy), AC@3, Avg@5 over ranked
causes — spikelens' verdict then its other causes by share; each peer's ranked metrics mapped to
causes. Peers (rca.peers: BARO, NSigma and the other RCAEval methods asked for, and a random
floor) rank the same matched events, with the spike as the anomaly segment, so the comparison
isolates attribution; `accuracy_lead` is spikelens' accuracy minus the peer's on those events,
with a paired bootstrap interval.

Placebos (rca.placebo): each control's clean stretches attributed as if they were spikes, and
how often each cause would have been named — how often its signals fire on clean runs.

Reads analyses/spikes/faults through the warehouse; pure otherwise. Output is JSON-able.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rca.acted import judge, samples_by_metric
from rca.intervals import BootstrapOptions, bootstrap, poisson_rate, proportion_exact
from rca.peers import DEFAULT_PEERS, PEER_METHODS
from rca.placebo import Placebo, placebo_rates, run_placebos
from rca.rank_scores import RankedEvent, ac_at, avg_at
from rca.solo_twins import Twin, partner_solos
from rca.validity import INVALID
from spikelens_common.said_causes import said_causes
from warehouse.db import connect
from warehouse.queries import query

MISSED = "missed"
# The causes a fault can stand for: macro-F1 and the confusion matrix run over these (those the
# suite injects), 'unexplained' is a possible answer and 'missed' a fault no spike matched.
EVAL_CAUSES = ("penalty", "memory", "communication", "load", "client", "network", "host")
ANSWERS = (*EVAL_CAUSES, "unexplained", MISSED)


@dataclass
class RunOutcome:
    run_id: str
    duration_s: float
    window_s: float
    faults: list[dict]  # kind, cause, start_s, end_s
    spikes: list[dict]  # spike_id, start_s, end_s, top_cause
    matches: list[tuple[int, int]] = field(default_factory=list)  # (fault index, spike index)
    # faults left unmatched that a matched spike overlaps: (fault index, spike index)
    covers: list[tuple[int, int]] = field(default_factory=list)
    engine: str = "spikelens"  # the engine that served the run: 'spikelens' | 'vllm'
    # False when its load generator saturated (runs.status 'invalid'): scored like any run, and
    # counted apart so a reader sees how much of a figure rests on runs that measured their client
    valid: bool = True
    # spike_id → cause → share of its excess (attributions; 'unexplained' included)
    shares: dict[int, dict[str, float]] = field(default_factory=dict)


def match_events(
    faults: list[dict], spikes: list[dict], window_s: float, tolerance_windows: int = 2
) -> list[tuple[int, int]]:
    """One-to-one (fault index, spike index) pairs maximising total overlap within the tolerance."""
    if not faults or not spikes:
        return []
    from scipy.optimize import linear_sum_assignment

    tol = tolerance_windows * window_s
    overlap = np.zeros((len(faults), len(spikes)))  # [n_faults, n_spikes] seconds
    for i, f in enumerate(faults):
        for j, s in enumerate(spikes):
            overlap[i, j] = max(
                0.0, min(f["end_s"] + tol, s["end_s"]) - max(f["start_s"] - tol, s["start_s"])
            )
    rows, cols = linear_sum_assignment(-overlap)
    return [(int(i), int(j)) for i, j in zip(rows, cols) if overlap[i, j] > 0]


def _overlap_s(fault: dict, spike: dict, tol_s: float) -> float:
    return max(
        0.0,
        min(fault["end_s"] + tol_s, spike["end_s"])
        - max(fault["start_s"] - tol_s, spike["start_s"]),
    )


def cover_events(
    faults: list[dict],
    spikes: list[dict],
    matches: list[tuple[int, int]],
    window_s: float,
    tolerance_windows: int = 2,
) -> list[tuple[int, int]]:
    """(fault index, spike index) for each fault the one-to-one pairing left unmatched that a
    matched spike overlaps within the tolerance (the one overlapping it most): two faults at once
    make one spike, and that spike is the answer to both."""
    tol = tolerance_windows * window_s
    matched_faults, matched_spikes = {i for i, _ in matches}, sorted({j for _, j in matches})
    out = []
    for i, f in enumerate(faults):
        if i in matched_faults:
            continue
        best = max(matched_spikes, key=lambda j: _overlap_s(f, spikes[j], tol), default=None)
        if best is not None and _overlap_s(f, spikes[best], tol) > 0:
            out.append((i, best))
    return out


def fault_answers(o: RunOutcome) -> list[str]:
    """Each fault's answer (a cause, 'unexplained' or 'missed'): its spike's, where a spike over k
    faults (matched or covered) names a fault's cause when it is among its first k said causes,
    else its verdict (see the module docstring)."""
    by_spike: dict[int, list[int]] = {}
    for i, j in (*o.matches, *o.covers):
        by_spike.setdefault(j, []).append(i)
    answers = [MISSED] * len(o.faults)
    for j, faults in by_spike.items():
        spike = o.spikes[j]
        top = str(spike["top_cause"])
        said = said_causes(top, o.shares.get(int(spike["spike_id"]), {}))[: len(faults)]
        for i in faults:
            answers[i] = o.faults[i]["cause"] if o.faults[i]["cause"] in said else top
    return answers


def one_to_one_answers(o: RunOutcome) -> list[str]:
    """Each fault's answer under the strict pairing: its matched spike's verdict, else 'missed'."""
    matched = dict(o.matches)
    return [
        o.spikes[matched[i]]["top_cause"] if i in matched else MISSED for i in range(len(o.faults))
    ]


def load_outcome(
    conn, run_id: str, tolerance_windows: int = 2, count_suppressed: bool = False
) -> RunOutcome:
    """A run's faults and stored spikes (it must have been analysed), matched. Suppressed spikes
    (minor or uniform slowdowns no signal explains: stored, not reported) are left out, or with
    `count_suppressed` taken as what they are — an 'unexplained' answer, matched to a fault like
    any spike, and a false alarm in a control."""
    analysis = query(conn, "run_analysis", run_id=run_id)
    if not analysis:
        raise KeyError(f"run {run_id!r} has not been analysed (rca.analyze.analyze_run first)")
    window_s, duration_s = float(analysis[0]["window_s"]), float(analysis[0]["duration_s"] or 0.0)
    faults = [
        {k: f[k] for k in ("kind", "cause", "start_s", "end_s")}
        for f in query(conn, "faults", run_id=run_id)
    ]
    spikes = [
        {k: s[k] for k in ("spike_id", "start_s", "end_s", "top_cause")}
        for s in query(conn, "spikes", run_id=run_id)
        if count_suppressed or not s["suppressed"]
    ]
    if faults:
        _judge_acted(conn, run_id, faults, duration_s)
    engine = analysis[0].get("engine_kind") or "spikelens"
    valid = analysis[0].get("status") != INVALID
    out = RunOutcome(run_id, duration_s, window_s, faults, spikes, engine=engine, valid=valid)
    for a in query(conn, "attributions", run_id=run_id):
        out.shares.setdefault(int(a["spike_id"]), {})[str(a["cause"])] = float(a["share"])
    out.matches = match_events(faults, spikes, window_s, tolerance_windows)
    out.covers = cover_events(faults, spikes, out.matches, window_s, tolerance_windows)
    return out


def _judge_acted(conn, run_id: str, faults: list[dict], duration_s: float) -> None:
    """Each fault's `acted` (True, False, or None: the judge abstained) and `acted_by`, from the
    run's raw client latencies (rca.acted), not from its spikes."""
    samples = samples_by_metric(query(conn, "client_latency_samples", run_id=run_id))
    windows = [(float(f["start_s"]), float(f["end_s"])) for f in faults]
    for f, window in zip(faults, windows):
        judged = judge(samples, window, windows, duration_s)
        f["acted"], f["acted_by"] = judged.acted, judged.to_dict()


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _f1(p: float | None, r: float | None) -> float | None:
    if p is None or r is None:
        return None
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _macro_f1(y_true: list[str], y_pred: list[str]) -> float | None:
    """Mean F1 over the causes that were injected (scikit-learn's `f1_score(average="macro",
    labels=sorted(set(y_true)), zero_division=0)`): each cause's F1 is 2·tp / (2·tp + fp + fn).
    Counted here rather than by scikit-learn, whose input checks cost ~10 ms a call: the
    bootstrap calls it 2,000 times an interval."""
    if not y_true:
        return None
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for t, p in zip(y_true, y_pred, strict=True):
        if t == p:
            tp[t] += 1
        else:
            fn[t] += 1
            fp[p] += 1
    labels = sorted(set(y_true))  # one order, so the float sum is the same in every process
    return sum(2 * tp[c] / (2 * tp[c] + fp[c] + fn[c]) for c in labels) / len(labels)


def attribution_scores(y_true: list[str], y_pred: list[str]) -> dict:
    """Accuracy and macro-F1 over the faults that were detected — the events the peer methods
    rank too, so the figures compare side by side — plus accuracy and macro-F1 over every fault
    with a miss counted wrong (detection and attribution together), exact intervals for both
    accuracies, the support per cause and the confusion matrix."""
    detected = [(t, p) for t, p in zip(y_true, y_pred) if p != MISSED]
    labels = sorted(set(y_true))
    confusion = {t: {p: 0 for p in ANSWERS} for t in labels}
    for t, p in zip(y_true, y_pred):
        row = confusion[t]
        row[p] = row.get(p, 0) + 1
    right = sum(t == p for t, p in detected)
    return {
        "accuracy": _ratio(right, len(detected)),
        # exact intervals: over the detected faults, and over every fault (a miss counts wrong)
        "accuracy_exact": proportion_exact(right, len(detected)).to_dict(),
        "accuracy_all_faults_exact": proportion_exact(right, len(y_true)).to_dict(),
        "support": {t: sum(row.values()) for t, row in confusion.items()},
        "macro_f1": _macro_f1([t for t, _ in detected], [p for _, p in detected]),
        "macro_f1_all_faults": _macro_f1(y_true, y_pred),
        "confusion": confusion,
    }


def score(outcomes: list[RunOutcome]) -> dict:
    """Detection and attribution figures over runs (see module docstring)."""
    tp = sum(len(o.matches) for o in outcomes)
    fp = sum(len(o.spikes) - len(o.matches) for o in outcomes)
    fn = sum(len(o.faults) - len(o.matches) for o in outcomes)
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    delays = [
        o.spikes[j]["start_s"] - o.faults[i]["start_s"] for o in outcomes for i, j in o.matches
    ]
    controls = [o for o in outcomes if not o.faults]
    control_hours = sum(o.duration_s for o in controls) / 3600.0
    y_true = [f["cause"] for o in outcomes for f in o.faults]
    y_pred = [p for o in outcomes for p in fault_answers(o)]
    y_strict = [p for o in outcomes for p in one_to_one_answers(o)]
    # the faults that acted on the raw client latencies (an abstention counts as acted)
    judged = [acted_judgement(f) for o in outcomes for f in o.faults]
    acted = [a is not False for a in judged]
    kept = [(t, p, q) for t, p, q, a in zip(y_true, y_pred, y_strict, acted) if a]
    minor = [bool((f.get("solo") or {}).get("minor")) for o in outcomes for f in o.faults]
    material = [(t, p) for t, p, a, m in zip(y_true, y_pred, acted, minor) if a and not m]
    return {
        "runs": len(outcomes),
        "faults": tp + fn,
        "spikes": tp + fp,
        "detection": {
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": precision,
            "recall": recall,
            "f1": _f1(precision, recall),
            "delay_s_mean": float(np.mean(delays)) if delays else None,
            "delay_s_median": float(np.median(delays)) if delays else None,
            # faults a spike answers: matched, or overlapping a matched spike (`cover_events`)
            "faults_covered": tp + sum(len(o.covers) for o in outcomes),
        },
        "controls": {
            "runs": len(controls),
            "hours": control_hours,
            "false_alarms": sum(len(o.spikes) for o in controls),
            "false_alarms_per_hour": _ratio(sum(len(o.spikes) for o in controls), control_hours),
            # of which in controls whose load generator saturated (counted above all the same)
            "invalid_runs": sum(not o.valid for o in controls),
            "false_alarms_in_invalid_runs": sum(len(o.spikes) for o in controls if not o.valid),
            # what the analysis named them: a control's spike named host is still counted above
            # (nothing was injected), but it says the box itself moved (e.g. the hypervisor's steal)
            "false_alarms_by_cause": dict(
                Counter(str(s.get("top_cause")) for o in controls for s in o.spikes)
            ),
        },
        "invalid_runs": sum(not o.valid for o in outcomes),
        "attribution": attribution_scores(y_true, y_pred),
        "attribution_one_to_one": attribution_scores(y_true, y_strict),
        "excess_elsewhere": excess_elsewhere(outcomes),
        "acted": {
            "faults": len(kept),
            "not_acted": sum(a is False for a in judged),
            "undecided": sum(a is None for a in judged),
            # undecided in their own run, decided by their solo twin
            "decided_by_twin": sum(
                f.get("acted") is None and a is not None
                for f, a in zip((f for o in outcomes for f in o.faults), judged)
            ),
            "attribution": attribution_scores([t for t, _, _ in kept], [p for _, p, _ in kept]),
            "attribution_one_to_one": attribution_scores(
                [t for t, _, _ in kept], [q for _, _, q in kept]
            ),
        },
        "material": material_scores(outcomes, material, minor, acted, y_pred),
    }


def acted_judgement(fault: dict) -> bool | None:
    """The fault's own judgement (rca.acted), or its solo twin's where its own abstained."""
    own = fault.get("acted")
    return own if own is not None else (fault.get("solo") or {}).get("acted")


def material_scores(
    outcomes: list[RunOutcome],
    material: list[tuple[str, str]],
    minor: list[bool],
    acted: list[bool],
    answers: list[str],
) -> dict:
    """Attribution over the faults that acted less the minor partners (module docstring), and
    what the minor ones were answered: their partner's cause is the right verdict of the
    stretch they shared."""
    faults = [f for o in outcomes for f in o.faults]
    measured = sum((f.get("solo") or {}).get("share") is not None for f in faults)
    minor_answers: dict[str, int] = {}
    for m, a, answer in zip(minor, acted, answers):
        if m and a:
            minor_answers[answer] = minor_answers.get(answer, 0) + 1
    return {
        "faults": len(material),
        "partners_measured": measured,  # partners with a share from their twins
        "minor": sum(m and a for m, a in zip(minor, acted)),
        "minor_answers": minor_answers,
        "attribution": attribution_scores([t for t, _ in material], [p for _, p in material]),
    }


def excess_elsewhere(outcomes: list[RunOutcome]) -> dict:
    """How much of a detected fault's spike went to causes its run did not inject: per matched
    spike, the summed share of every cause other than the run's injected ones and 'unexplained'
    ("we could not tell" is no claim, and is reported apart). A right verdict can still hand a
    third of the excess to a consequence read as a cause; this says how much, on average."""
    elsewhere, unexplained = [], []
    for o in outcomes:
        injected = {f["cause"] for f in o.faults}
        for _, j in o.matches:
            parts = o.shares.get(int(o.spikes[j]["spike_id"]), {})
            elsewhere.append(
                sum(v for c, v in parts.items() if c not in injected and c != "unexplained")
            )
            unexplained.append(parts.get("unexplained", 0.0))
    if not elsewhere:
        return {
            "spikes": 0,
            "mean": None,
            "median": None,
            "over_10pct": 0,
            "unexplained_mean": None,
        }
    return {
        "spikes": len(elsewhere),
        "mean": float(np.mean(elsewhere)),
        "median": float(np.median(elsewhere)),
        "over_10pct": sum(v > 0.1 for v in elsewhere),
        "unexplained_mean": float(np.mean(unexplained)),
    }


def _ranked_spikes(conn, o: RunOutcome) -> dict[int, tuple[str, ...]]:
    """spike_id → spikelens' causes, its verdict first, then the others by share."""
    by_spike: dict[int, list[str]] = {}
    for a in query(conn, "attributions", run_id=o.run_id):
        by_spike.setdefault(int(a["spike_id"]), []).append(str(a["cause"]))
    out = {}
    for s in o.spikes:
        rest = [c for c in by_spike.get(int(s["spike_id"]), []) if c != s["top_cause"]]
        out[int(s["spike_id"])] = (str(s["top_cause"]), *rest)
    return out


def spikelens_events(db_path: str | Path, outcomes: list[RunOutcome]) -> list[RankedEvent]:
    """spikelens' ranked causes for every matched fault, in suite order."""
    conn = connect(db_path, read_only=True)
    try:
        events = []
        for o in outcomes:
            ranked = _ranked_spikes(conn, o) if o.matches else {}
            for i, j in sorted(o.matches):
                events.append(
                    RankedEvent(o.faults[i]["cause"], ranked[int(o.spikes[j]["spike_id"])])
                )
        return events
    finally:
        conn.close()


def peer_events(
    db_path: str | Path, outcomes: list[RunOutcome], methods: tuple[str, ...], seed: int = 0
) -> dict[str, dict]:
    """Each peer's ranked causes for the same matched faults (rca.peers), plus the random floor.
    Returns method → {events: [RankedEvent], failures, seconds, top_metrics}."""
    from rca.analyze import load_signals
    from rca.peers import peer_answer, peer_frame, random_ranking

    rng = random.Random(seed)
    out: dict[str, dict[str, Any]] = {
        m: {"events": [], "failures": 0, "seconds": 0.0, "top_metrics": {}}
        for m in (*methods, "random")
    }
    conn = connect(db_path, read_only=True)
    try:
        for o in outcomes:
            if not o.matches:
                continue
            signals = load_signals(conn, o.run_id, o.window_s) if methods else None
            transit = query(conn, "peer_transit_windows", run_id=o.run_id, window_s=o.window_s)
            for i, j in sorted(o.matches):
                truth, spike = o.faults[i]["cause"], o.spikes[j]
                others = [(s["start_s"], s["end_s"]) for k, s in enumerate(o.spikes) if k != j]
                frame = (
                    peer_frame(signals, (spike["start_s"], spike["end_s"]), others, transit)
                    if signals is not None
                    else None
                )
                for m in methods:
                    answer = peer_answer(m, frame, spike["start_s"])
                    r = out[m]
                    r["events"].append(RankedEvent(truth, answer.causes))
                    r["failures"] += answer.failed
                    r["seconds"] += answer.seconds
                    top = answer.metrics[0] if answer.metrics else None
                    r["top_metrics"][str(top)] = r["top_metrics"].get(str(top), 0) + 1
                out["random"]["events"].append(RankedEvent(truth, random_ranking(rng, EVAL_CAUSES)))
    finally:
        conn.close()
    return out


def _accuracy(events: Sequence[RankedEvent]) -> float | None:
    return _ratio(sum(e.top == e.truth for e in events), len(events))


def _events_macro_f1(events: Sequence[RankedEvent]) -> float | None:
    return _macro_f1([e.truth for e in events], [e.top for e in events])


def method_scores(events: list[RankedEvent], options: BootstrapOptions) -> dict:
    """One method on its events: accuracy (= AC@1), macro-F1 over the causes present, AC@3, Avg@5,
    each with its bootstrap interval over the events, and the confusion matrix."""
    stats = {
        "accuracy": _accuracy,
        "macro_f1": _events_macro_f1,
        "ac_at_1": lambda ev: ac_at(ev, 1),
        "ac_at_3": lambda ev: ac_at(ev, 3),
        "avg_at_5": lambda ev: avg_at(ev, 5),
    }
    out: dict = {"events": len(events)}
    for name, fn in stats.items():
        interval = bootstrap(events, fn, options)
        out[name] = interval.value
        out[f"{name}_interval"] = interval.to_dict()
    out["confusion"] = attribution_scores([e.truth for e in events], [e.top for e in events])[
        "confusion"
    ]
    return out


def accuracy_lead(
    ours: list[RankedEvent], theirs: list[RankedEvent], options: BootstrapOptions
) -> dict:
    """spikelens' accuracy minus a peer's on the same events, with a paired bootstrap interval."""
    if len(ours) != len(theirs):
        raise ValueError(f"paired events differ in number: {len(ours)} vs {len(theirs)}")
    pairs = list(zip(ours, theirs))

    def lead(ps: Sequence[tuple[RankedEvent, RankedEvent]]) -> float | None:
        if not ps:
            return None
        return sum((a.top == a.truth) - (b.top == b.truth) for a, b in ps) / len(ps)

    return bootstrap(pairs, lead, options).to_dict()


def detection_intervals(outcomes: list[RunOutcome], options: BootstrapOptions) -> dict:
    """Bootstrap intervals of detection precision, recall and F1 over events (each fault a TP or
    FN, each unmatched spike an FP) and the exact Poisson interval of false alarms per hour."""
    events = []
    for o in outcomes:
        events += ["tp"] * len(o.matches) + ["fn"] * (len(o.faults) - len(o.matches))
        events += ["fp"] * (len(o.spikes) - len(o.matches))

    def counts(ev: Sequence[str]) -> tuple[int, int, int]:
        return ev.count("tp"), ev.count("fp"), ev.count("fn")

    def f1(ev: Sequence[str]) -> float | None:
        tp, fp, fn = counts(ev)
        return _ratio(2 * tp, 2 * tp + fp + fn)

    controls = [o for o in outcomes if not o.faults]
    hours = sum(o.duration_s for o in controls) / 3600.0
    return {
        "precision": bootstrap(
            events, lambda ev: _ratio(counts(ev)[0], sum(counts(ev)[:2])), options
        ).to_dict(),
        "recall": bootstrap(
            events, lambda ev: _ratio(counts(ev)[0], counts(ev)[0] + counts(ev)[2]), options
        ).to_dict(),
        "f1": bootstrap(events, f1, options).to_dict(),
        "false_alarms_per_hour": poisson_rate(
            sum(len(o.spikes) for o in controls), hours
        ).to_dict(),
    }


def evaluate(
    db_path: str | Path,
    run_ids: list[str],
    tolerance_windows: int = 2,
    peers: tuple[str, ...] = DEFAULT_PEERS,
    seed: int = 0,
    bootstrap_reps: int = 2000,
    count_suppressed: bool = False,
    twins: dict[str, tuple[str, int]] | None = None,
) -> dict:
    """Score analysed runs; `peers=()` skips the RCAEval methods (the random floor always runs).
    `seed` drives the random floor and every bootstrap: the same seed, the same figures.
    `count_suppressed`: score suppressed spikes as 'unexplained' answers (`load_outcome`), as a
    generated held-out suite should: 'unexplained' is then an answer, not a silent miss.
    `twins`: twin run id → (its pair's run id, the fault index it runs alone), for the runs among
    `run_ids` that are solo twins (rca.solo_twins): they measure their pair's partners and are
    not scored as runs themselves."""
    if tolerance_windows < 0:
        raise ValueError(f"tolerance_windows must be >= 0, got {tolerance_windows}")
    unknown = [m for m in peers if m not in PEER_METHODS]
    if unknown:
        raise ValueError(f"peers: {unknown[0]!r} is not one of {', '.join(PEER_METHODS)}")
    options = BootstrapOptions(reps=bootstrap_reps, seed=seed)
    conn = connect(db_path, read_only=True)
    try:
        twins = {t: pair for t, pair in (twins or {}).items() if pair[0] in run_ids}
        outcomes = [
            load_outcome(conn, rid, tolerance_windows, count_suppressed)
            for rid in run_ids
            if rid not in twins
        ]
        attach_solos(conn, outcomes, twins)
        placebos = control_placebos(conn, outcomes)
    finally:
        conn.close()
    result = score(outcomes)
    result["twin_runs"] = len(twins)
    result["tolerance_windows"] = tolerance_windows
    result["count_suppressed"] = count_suppressed
    result["bootstrap"] = {"reps": options.reps, "seed": options.seed, "level": options.level}
    result["intervals"] = detection_intervals(outcomes, options)
    ours = spikelens_events(db_path, outcomes)
    result["spikelens"] = method_scores(ours, options)
    result["peers"] = {}
    for m, r in peer_events(db_path, outcomes, tuple(peers), seed).items():
        result["peers"][m] = {
            **method_scores(r["events"], options),
            "failures": r["failures"],
            "seconds": r["seconds"],
            "top_metrics": r["top_metrics"],
            "accuracy_lead": accuracy_lead(ours, r["events"], options),
        }
    result["per_engine"] = per_engine_scores(outcomes)
    result["placebo"] = _placebo_scores(outcomes, placebos)
    result["per_run"] = [_per_run(o) for o in outcomes]
    return result


def attach_solos(conn, outcomes: list[RunOutcome], twins: dict[str, tuple[str, int]]) -> None:
    """Each partner with a solo twin gets `solo` (rca.solo_twins.Solo as a dict) on its fault."""
    by_pair: dict[str, dict[int, str]] = {}
    for twin, (pair, k) in twins.items():
        by_pair.setdefault(pair, {})[k] = twin
    for o in outcomes:
        if o.run_id not in by_pair:
            continue
        measured = {k: _twin(conn, t) for k, t in by_pair[o.run_id].items() if k < len(o.faults)}
        pair_samples = samples_by_metric(query(conn, "client_latency_samples", run_id=o.run_id))
        windows = [(float(f["start_s"]), float(f["end_s"])) for f in o.faults]
        for k, solo in partner_solos(pair_samples, windows, measured).items():
            o.faults[k]["solo"] = solo.to_dict()


def _twin(conn, run_id: str) -> Twin:
    analysis = query(conn, "run_analysis", run_id=run_id)
    faults = query(conn, "faults", run_id=run_id)
    if not analysis or len(faults) != 1:
        raise KeyError(f"twin run {run_id!r}: not analysed, or not exactly one fault")
    return Twin(
        run_id,
        samples_by_metric(query(conn, "client_latency_samples", run_id=run_id)),
        (float(faults[0]["start_s"]), float(faults[0]["end_s"])),
        float(analysis[0]["duration_s"] or 0.0),
    )


def control_placebos(conn, outcomes: list[RunOutcome]) -> dict[str, list[Placebo]]:
    """run_id → the placebos of each control (a run without faults): rca.placebo."""
    from rca.analyze import load_signals  # rca.analyze → rca.findings imports this module

    return {
        o.run_id: run_placebos(load_signals(conn, o.run_id, o.window_s))
        for o in outcomes
        if not o.faults
    }


def _placebo_scores(outcomes: list[RunOutcome], placebos: dict[str, list[Placebo]]) -> dict:
    """rca.placebo.placebo_rates over every control, and per engine when the suite has two."""
    engine = {o.run_id: o.engine for o in outcomes}
    every = [p for ps in placebos.values() for p in ps]
    out = placebo_rates(every, len(placebos))
    engines = sorted({engine[r] for r in placebos})
    if len(engines) > 1:
        out["by_engine"] = {
            e: placebo_rates(
                [p for r, ps in placebos.items() if engine[r] == e for p in ps],
                sum(engine[r] == e for r in placebos),
            )
            for e in engines
        }
    return out


def per_engine_scores(outcomes: list[RunOutcome]) -> dict[str, dict]:
    """engine → `score` of its runs alone: a suite drawn on both engines (`--engines both`) says
    how each fares, with its own exact intervals and support, not only the pooled figures."""
    engines = sorted({o.engine for o in outcomes})
    return {e: score([o for o in outcomes if o.engine == e]) for e in engines}


def _per_run(o: RunOutcome) -> dict:
    """A run's faults and spikes, and each fault's verdict: `detected` (paired one-to-one),
    `shared` (answered by the spike its partner fault was paired with), its answer."""
    matched, covered = dict(o.matches), dict(o.covers)
    answers = fault_answers(o)

    def verdict(i: int, f: dict) -> dict:
        j = matched.get(i, covered.get(i))
        return {
            "kind": f["kind"],
            "cause": f["cause"],
            "detected": i in matched,
            "shared": i in covered,
            "attributed_cause": None if answers[i] == MISSED else answers[i],
            "spike_id": int(o.spikes[j]["spike_id"]) if j is not None else None,
        }

    return {
        "run_id": o.run_id,
        "engine": o.engine,
        "valid": o.valid,
        "faults": o.faults,
        "spikes": o.spikes,
        "verdicts": [verdict(i, f) for i, f in enumerate(o.faults)],
        "false_alarms": len(o.spikes) - len(o.matches),
    }


def per_cause_scores(confusion: dict) -> list[dict]:
    """Precision, recall, F1 and support per true cause, from a confusion dict truth → predicted → n."""
    out = []
    for cause in (*EVAL_CAUSES, "unexplained"):
        support = sum(confusion.get(cause, {}).values())
        predicted = sum(row.get(cause, 0) for row in confusion.values())
        tp = confusion.get(cause, {}).get(cause, 0)
        if not support and not predicted:
            continue
        p, r = _ratio(tp, predicted), _ratio(tp, support)
        out.append(
            {"cause": cause, "precision": p, "recall": r, "f1": _f1(p, r), "support": support}
        )
    return out
