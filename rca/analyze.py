"""Analyse one ingested run: detect spikes, attribute each, store the results in the warehouse.

Results go to the tables `analyses`, `spikes`, `attributions` and `evidence`, with the findings
of rca.findings (`spike_comparison`, `fault_verdicts`) (warehouse/schema.sql), replacing any earlier analysis of the run in one transaction. Runs with step traces are
attributed by stage decomposition (rca.attribute); runs without (external targets) by ranking their
/metrics and NVML series (rca.metric_rank). In an invalid run (the load generator saturated), a
spike the server's own times did not show gets no engine verdict (rca.validity).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rca.attribute import Attribution, RunSignals
from rca.config import AttributeConfig, DetectConfig, preset
from rca.detect import Baseline, Spike, detect_spikes
from rca.evidence import with_loop_rates
from rca.findings import ComparisonRow, FaultVerdict, comparison, fault_verdicts
from rca.metric_rank import attribute_any
from rca.process_evidence import ProcessSignals
from rca.stepcost import step_arrays
from rca.validity import check_validity
from warehouse.db import DbConnection, connect
from warehouse.observed_windows import is_observed, latency_windows
from warehouse.queries import query, query_table
from warehouse.store import replace_run_rows


@dataclass
class Analysis:
    run_id: str
    window_s: float
    spikes: list[Spike]
    attributions: dict[int, Attribution]  # by spike_id (suppressed spikes included)
    baselines: dict[str, Baseline]  # by metric
    detect: DetectConfig
    attribute: AttributeConfig
    signals: RunSignals | None = field(
        repr=False, default=None
    )  # what was read, for callers that plot
    # minor spikes no engine signal explains (AttributeConfig.report_unexplained_minor): stored, not reported
    suppressed: list[Spike] = field(default_factory=list)
    # rca.findings over the reported spikes: normal vs spike per signal; the faults matched
    comparison: list[ComparisonRow] = field(default_factory=list)
    faults: list[FaultVerdict] = field(default_factory=list)
    preset: str | None = None  # rca.config.PRESETS' name of detect/attribute; None: set in code


def load_signals(conn: DbConnection, run_id: str, window_s: float) -> RunSignals:
    """Read what detection and attribution need; raises KeyError if the run is not ingested.
    Long results (steps, request outputs) come as Arrow tables turned into arrays once, not as a
    Python dict per row."""
    header = query(conn, "run_header", run_id=run_id)
    if not header:
        raise KeyError(f"run {run_id!r} is not in the warehouse (ingest it first)")
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    engine = _json_object(header[0].get("engine"))
    # the server's own times: its socket stamps (spikelens' engine), else the times it reported
    # in the stream (vLLM's --enable-per-request-metrics), which start after its front end
    transit = query(conn, "transit_windows", run_id=run_id, window_s=window_s)
    transit_source = "reported" if any(r["reported_pairs"] for r in transit) else "socket"
    return RunSignals(
        window_s=window_s,
        windows=latency_windows(conn, run_id, window_s, engine),
        step_windows=query(conn, "step_stages", run_id=run_id, window_s=window_s),
        steps=step_arrays(query_table(conn, "step_timeline", run_id=run_id)),
        gc_pauses=query(conn, "gc_pauses", run_id=run_id),
        request_outputs=with_loop_rates(
            query_table(conn, "request_outputs", run_id=run_id, window_s=window_s)
        ),
        nvml_windows=query(conn, "nvml_windows", run_id=run_id, window_s=window_s),
        metric_windows=query(conn, "metric_windows", run_id=run_id, window_s=window_s),
        client_windows=query(conn, "client_windows", run_id=run_id, window_s=window_s),
        history_windows=query(conn, "history_windows", run_id=run_id, window_s=window_s),
        transit_windows=transit,
        transit_source=transit_source,
        process=ProcessSignals.load(conn, run_id, window_s),
        engine=engine,
        run_status=header[0].get("status") or "ok",
    )


def run_window_s(conn: DbConnection, run_id: str) -> float:
    """The run's analysis window: its query step for an observed run, else 1 s."""
    header = query(conn, "run_header", run_id=run_id)
    engine = _json_object(header[0].get("engine")) if header else None
    return float(engine.get("step_s", 1.0)) if engine and is_observed(engine) else 1.0


def run_preset(conn: DbConnection, run_id: str) -> str:
    """The detection preset the run asked for (its scenario's `detector:`, also where `spikelens
    incident --detector` records it); "default" when it names none. KeyError: run not ingested."""
    header = query(conn, "run_header", run_id=run_id)
    if not header:
        raise KeyError(f"run {run_id!r} is not in the warehouse (ingest it first)")
    scenario = _json_object(header[0].get("scenario")) or {}
    name = scenario.get("detector", "default")
    preset(name, f"run {run_id}: detector")  # a stored run's name must still be a preset
    return name


def _json_object(value) -> dict | None:
    """A JSON column as a dict (None when absent or not an object)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def analyze(
    conn: DbConnection,
    run_id: str,
    window_s: float = 1.0,
    detect: DetectConfig | None = None,
    attribute: AttributeConfig | None = None,
) -> Analysis:
    """Detect and attribute without storing (pure reads)."""
    detect, attribute = detect or DetectConfig(), attribute or AttributeConfig()
    signals = load_signals(conn, run_id, window_s)
    spikes, baselines = detect_spikes(signals.windows, window_s, detect)
    # Step traces give the stage decomposition; a target without them (an external engine) is
    # attributed by ranking its /metrics and NVML series instead (rca.metric_rank.attribute_any).
    attributions = {s.spike_id: attribute_any(s, spikes, signals, attribute) for s in spikes}
    attributions = check_validity(attributions, spikes, signals, attribute)
    suppressed = (
        []
        if attribute.report_unexplained_minor
        else [
            s
            for s in spikes
            if attributions[s.spike_id].top_cause == "unexplained"
            and (s.severity == "minor" or attributions[s.spike_id].host_contention)
        ]
    )
    reported = [s for s in spikes if s not in suppressed]
    in_order = sorted(reported, key=lambda s: s.spike_id)
    return Analysis(
        run_id,
        window_s,
        reported,
        attributions,
        baselines,
        detect,
        attribute,
        signals,
        suppressed,
        comparison=comparison(
            signals.windows, signals.step_windows, signals.gc_pauses, in_order, window_s
        ),
        faults=fault_verdicts(
            query(conn, "faults", run_id=run_id),
            in_order,
            {s.spike_id: attributions[s.spike_id].top_cause for s in in_order},
            window_s,
        ),
    )


def result_rows(analysis: Analysis) -> dict[str, list[dict]]:
    """The rows of `analyses`, `spikes`, `attributions`, `evidence`, `spike_comparison` and
    `fault_verdicts` for an analysis. Their
    types are the tables' own: warehouse.store converts the rows with the schema it reads from the
    database, so no schema is restated here."""
    spikes, attrs, evidence = _spike_rows(analysis)
    return {
        "analyses": [_analysis_row(analysis)],
        "spikes": spikes,
        "attributions": attrs,
        "evidence": evidence,
        "spike_comparison": [
            {"run_id": analysis.run_id, "seq": i, **asdict(row)}
            for i, row in enumerate(analysis.comparison)
        ],
        "fault_verdicts": [
            {
                "run_id": analysis.run_id,
                "seq": i,
                **asdict(f),
                "params": f.params
                if f.params is None or isinstance(f.params, str)
                else json.dumps(f.params),
            }
            for i, f in enumerate(analysis.faults)
        ],
    }


def _spike_rows(analysis: Analysis) -> tuple[list[dict], list[dict], list[dict]]:
    """(spikes, attributions, evidence) rows, reported and suppressed spikes alike."""
    rid = analysis.run_id
    spikes, attrs, evidence = [], [], []
    suppressed_ids = {s.spike_id for s in analysis.suppressed}
    for s in sorted([*analysis.spikes, *analysis.suppressed], key=lambda x: x.spike_id):
        a = analysis.attributions[s.spike_id]
        spikes.append(
            {
                "run_id": rid,
                "spike_id": s.spike_id,
                "metric": s.metric,
                "metrics": s.metrics,
                "detector": s.detector,
                "start_s": s.start_s,
                "end_s": s.end_s,
                "peak_ms": s.peak_ms,
                "baseline_ms": s.baseline_ms,
                "severity": s.severity,
                "severity_score": s.severity_score,
                "top_cause": a.top_cause,
                "summary": a.summary,
                "coverage": a.coverage,
                "uncovered": a.uncovered,
                "attribution_method": a.method,
                "suppressed": s.spike_id in suppressed_ids,
            }
        )
        for c in a.causes:
            attrs.append(
                {
                    "run_id": rid,
                    "spike_id": s.spike_id,
                    "cause": c.cause,
                    "share": c.share,
                    "confidence": c.confidence,
                    "excess_ms": c.excess_ms,
                }
            )
            for e in c.evidence:
                evidence.append(
                    {
                        "run_id": rid,
                        "spike_id": s.spike_id,
                        "cause": c.cause,
                        "signal": e.signal,
                        "value": e.value,
                        "baseline": e.baseline,
                        "unit": e.unit,
                        "note": e.note,
                        "pearson_r": e.pearson_r,
                    }
                )
    return spikes, attrs, evidence


def _analysis_row(analysis: Analysis) -> dict:
    """The `analyses` row: window, per-metric baselines and the configs used (JSON)."""
    baselines = {
        m: {
            "median_ms": b.median_ms,
            "spread_ms": b.spread_ms,
            "threshold_ms": b.threshold_ms,
            "valid_windows": b.valid_windows,
        }
        for m, b in analysis.baselines.items()
    }
    return {
        "run_id": analysis.run_id,
        "window_s": analysis.window_s,
        "baselines": json.dumps(baselines),
        "config": json.dumps(
            {
                "preset": analysis.preset,
                "detect": asdict(analysis.detect),
                "attribute": asdict(analysis.attribute),
            }
        ),
    }


def analyze_run(
    db_path: str | Path,
    run_id: str,
    window_s: float | None = None,
    detect: DetectConfig | None = None,
    attribute: AttributeConfig | None = None,
    preset_name: str | None = None,
) -> Analysis:
    """Analyse an ingested run and store spikes/attributions/evidence, replacing earlier results.
    `window_s` None: the run's own (`run_window_s`). The settings: `detect`/`attribute` where
    given (code), else the preset `preset_name`, else the run's own (`run_preset`)."""
    conn = connect(db_path)
    try:
        if window_s is None:
            window_s = run_window_s(conn, run_id)
        if detect is None and attribute is None:
            preset_name = preset_name or run_preset(conn, run_id)
            detect, attribute = preset(preset_name)
        else:
            preset_name = None
        result = analyze(conn, run_id, window_s, detect, attribute)
        result.preset = preset_name
        replace_run_rows(conn, run_id, result_rows(result))
        return result
    finally:
        conn.close()
