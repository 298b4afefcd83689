"""Score analysed runs against their ground-truth faults, side by side with peer methods.

Event level, per run: faults and spikes are matched one-to-one (Hungarian assignment maximising
overlap), a pair counting only if the spike overlaps the fault widened by `tolerance_windows` on
each side. Then over all runs:
  detection    precision, recall, F1 (TP = matched pairs, FP = unmatched spikes, FN = unmatched
               faults); detection delay = spike start − fault start of matched pairs (s);
  controls     false alarms per hour over runs without faults;
  attribution  accuracy = matched pairs whose top cause is the fault's cause / matched pairs;
               macro-F1 over causes and the confusion matrix, where a missed fault is predicted
               'missed' (so misses cost attribution recall too).
Peers (rca.peers: BARO, NSigma, random) attribute the same matched events (the same detection,
the spike start as the anomaly time), so the comparison isolates attribution quality.

Reads analyses/spikes/faults through the warehouse; pure otherwise. Output is JSON-able.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rca.config import CAUSES
from warehouse.db import connect
from warehouse.queries import query

MISSED = "missed"


@dataclass
class RunOutcome:
    run_id: str
    duration_s: float
    window_s: float
    faults: list[dict]  # kind, cause, start_s, end_s
    spikes: list[dict]  # spike_id, start_s, end_s, top_cause
    matches: list[tuple[int, int]] = field(default_factory=list)  # (fault index, spike index)


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


def load_outcome(conn, run_id: str, tolerance_windows: int = 2) -> RunOutcome:
    """A run's faults and stored spikes (it must have been analysed), matched."""
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
        if not s["suppressed"]
    ]
    out = RunOutcome(run_id, duration_s, window_s, faults, spikes)
    out.matches = match_events(faults, spikes, window_s, tolerance_windows)
    return out


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _f1(p: float | None, r: float | None) -> float | None:
    if p is None or r is None:
        return None
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _macro_f1(y_true: list[str], y_pred: list[str]) -> float | None:
    from sklearn.metrics import f1_score

    return (
        float(
            f1_score(y_true, y_pred, labels=sorted(set(y_true)), average="macro", zero_division=0)
        )
        if y_true
        else None
    )


def attribution_scores(y_true: list[str], y_pred: list[str]) -> dict:
    """Accuracy and macro-F1 over the faults that were detected — the events the peer methods
    rank too, so the figures compare side by side — plus macro-F1 over every fault with a miss
    counted wrong (detection and attribution together), and the confusion matrix."""
    detected = [(t, p) for t, p in zip(y_true, y_pred) if p != MISSED]
    labels = sorted(set(y_true))
    confusion = {t: {p: 0 for p in (*CAUSES, MISSED)} for t in labels}
    for t, p in zip(y_true, y_pred):
        confusion[t][p] += 1
    return {
        "accuracy": _ratio(sum(t == p for t, p in detected), len(detected)),
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
    y_true, y_pred = [], []
    for o in outcomes:
        matched = dict(o.matches)
        for i, f in enumerate(o.faults):
            y_true.append(f["cause"])
            y_pred.append(o.spikes[matched[i]]["top_cause"] if i in matched else MISSED)
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
        },
        "controls": {
            "runs": len(controls),
            "hours": control_hours,
            "false_alarms": sum(len(o.spikes) for o in controls),
            "false_alarms_per_hour": _ratio(sum(len(o.spikes) for o in controls), control_hours),
        },
        "attribution": attribution_scores(y_true, y_pred),
    }


def peer_scores(
    db_path: str | Path, outcomes: list[RunOutcome], methods: tuple[str, ...], seed: int = 0
) -> dict:
    """Attribution of the same matched events by each peer method and the random floor."""
    from rca.analyze import load_signals
    from rca.peers import peer_cause, random_cause, signal_frame

    rng = random.Random(seed)
    results: dict[str, dict[str, Any]] = {
        m: {"y_true": [], "y_pred": [], "failures": 0, "top_metrics": {}}
        for m in (*methods, "random")
    }
    conn = connect(db_path, read_only=True)
    try:
        for o in outcomes:
            if not o.matches:
                continue
            frame = signal_frame(load_signals(conn, o.run_id, o.window_s)) if methods else None
            for i, j in o.matches:
                truth = o.faults[i]["cause"]
                for m in methods:
                    cause, metric, failed = peer_cause(m, frame, o.spikes[j]["start_s"])
                    r = results[m]
                    r["y_true"].append(truth)
                    r["y_pred"].append(cause)
                    r["failures"] += failed
                    r["top_metrics"][metric] = r["top_metrics"].get(metric, 0) + 1
                results["random"]["y_true"].append(truth)
                results["random"]["y_pred"].append(random_cause(rng))
    finally:
        conn.close()
    return {
        m: {
            **attribution_scores(r["y_true"], r["y_pred"]),
            "events": len(r["y_true"]),
            "failures": r["failures"],
            "top_metrics": {str(k): v for k, v in r["top_metrics"].items()},
        }
        for m, r in results.items()
    }


def evaluate(
    db_path: str | Path,
    run_ids: list[str],
    tolerance_windows: int = 2,
    peers: tuple[str, ...] = ("baro", "nsigma"),
    seed: int = 0,
) -> dict:
    """Score analysed runs; `peers=()` skips BARO/NSigma (the random floor always runs)."""
    if tolerance_windows < 0:
        raise ValueError(f"tolerance_windows must be >= 0, got {tolerance_windows}")
    conn = connect(db_path, read_only=True)
    try:
        outcomes = [load_outcome(conn, rid, tolerance_windows) for rid in run_ids]
    finally:
        conn.close()
    result = score(outcomes)
    result["tolerance_windows"] = tolerance_windows
    result["peers"] = peer_scores(db_path, outcomes, tuple(peers), seed)
    result["per_run"] = [
        {
            "run_id": o.run_id,
            "faults": o.faults,
            "spikes": o.spikes,
            "verdicts": [
                {
                    "kind": f["kind"],
                    "cause": f["cause"],
                    "detected": i in dict(o.matches),
                    "attributed_cause": o.spikes[dict(o.matches)[i]]["top_cause"]
                    if i in dict(o.matches)
                    else None,
                }
                for i, f in enumerate(o.faults)
            ],
            "false_alarms": len(o.spikes) - len(o.matches),
        }
        for o in outcomes
    ]
    return result


def per_cause_scores(confusion: dict) -> list[dict]:
    """Precision, recall, F1 and support per true cause, from a confusion dict truth → predicted → n."""
    out = []
    for cause in CAUSES:
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
