"""rca.analyze: results stored in the warehouse, replaced on re-analysis."""

import json

import pytest

from rca.analyze import analyze_run
from warehouse.db import connect


def _stored(db, run_id):
    conn = connect(db)
    try:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchone()[0]
            for t in ("analyses", "spikes", "attributions", "evidence")
        }
    finally:
        conn.close()


def test_results_are_stored_and_replaced(warehouse_with):
    db, run_id = warehouse_with(incident="gc")
    first = analyze_run(db, run_id)
    counts = _stored(db, run_id)
    assert counts["analyses"] == 1 and counts["spikes"] == len(first.spikes) == 1
    assert counts["attributions"] == len(first.attributions[1].causes)
    assert counts["evidence"] == sum(len(c.evidence) for c in first.attributions[1].causes)
    analyze_run(db, run_id)
    assert _stored(db, run_id) == counts
    conn = connect(db)
    spike = conn.execute(
        "SELECT metric, top_cause, start_s, end_s, metrics FROM spikes WHERE run_id = ?", [run_id]
    ).fetchone()
    shares = conn.execute(
        "SELECT sum(share) FROM attributions WHERE run_id = ?", [run_id]
    ).fetchone()[0]
    window_s, baselines = conn.execute(
        "SELECT window_s, baselines FROM analyses WHERE run_id = ?", [run_id]
    ).fetchone()
    conn.close()
    assert spike[1] == "memory" and spike[2] == first.spikes[0].start_s and "itl_p99" in spike[4]
    assert shares <= 1.0 + 1e-9
    assert window_s == 1.0 and json.loads(baselines)["itl_p99"]["median_ms"] > 0


def test_a_run_without_spikes_clears_old_results(warehouse_with):
    db, run_id = warehouse_with(incident=None)
    assert analyze_run(db, run_id).spikes == []
    assert _stored(db, run_id) == {"analyses": 1, "spikes": 0, "attributions": 0, "evidence": 0}


def test_unknown_run_and_bad_window_are_clear(warehouse_with):
    db, run_id = warehouse_with(incident=None)
    with pytest.raises(KeyError, match="'nope' is not in the warehouse"):
        analyze_run(db, "nope")
    with pytest.raises(ValueError, match="window_s must be > 0"):
        analyze_run(db, run_id, window_s=0)


def test_minor_unexplained_slowdowns_are_stored_but_not_reported(warehouse_with):
    from pages.incident import build_incident_context
    from rca.config import AttributeConfig

    db, run_id = warehouse_with(incident="host")  # every stage 1.9x slower for 8 s, no fault
    quiet = analyze_run(db, run_id)
    assert quiet.spikes == [] and len(quiet.suppressed) == 1
    assert quiet.attributions[quiet.suppressed[0].spike_id].top_cause == "unexplained"
    ctx = build_incident_context(db, run_id)
    assert ctx.spikes == () and "1 slowdown that no engine signal explains" in ctx.headline
    loud = analyze_run(db, run_id, attribute=AttributeConfig(report_unexplained_minor=True))
    assert len(loud.spikes) == 1 and loud.suppressed == []
    assert len(build_incident_context(db, run_id).spikes) == 1


def test_a_run_is_analysed_with_the_detector_its_scenario_names(warehouse_with):
    """A slow penalty path that slows the run 1.6×: under the P99 test's ×1.75 floor (`p99`), found
    by `thorough`. The run's scenario chooses the preset, the analysis records it, and a
    re-analysis may name another."""
    db, plain = warehouse_with(incident="penalty", magnitude=8.0, detector="p99")
    _, asked = warehouse_with(incident="penalty", magnitude=8.0, detector="thorough")
    missed = analyze_run(db, plain)
    assert missed.preset == "p99" and missed.spikes == []
    found = analyze_run(db, asked)
    assert found.preset == "thorough" and found.detect.mad_k == 5.0
    assert [found.attributions[s.spike_id].top_cause for s in found.spikes] == ["penalty"]
    conn = connect(db)
    (config,) = conn.execute("SELECT config FROM analyses WHERE run_id = ?", [asked]).fetchone()
    conn.close()
    assert json.loads(config)["preset"] == "thorough"
    assert json.loads(config)["detect"]["detectors"] == ["mad", "sustained"]
    again = analyze_run(db, asked, preset_name="p99")
    assert again.preset == "p99" and again.spikes == []
    default = analyze_run(db, asked, preset_name="default")  # its P50 test sees every step slow
    assert [default.attributions[s.spike_id].top_cause for s in default.spikes] == ["penalty"]


def test_settings_given_in_code_are_recorded_as_no_preset(warehouse_with):
    from rca.config import detect_config

    db, run_id = warehouse_with(incident="gc")
    assert analyze_run(db, run_id, detect=detect_config(mad_k=7.0)).preset is None
    conn = connect(db)
    (config,) = conn.execute("SELECT config FROM analyses WHERE run_id = ?", [run_id]).fetchone()
    conn.close()
    assert json.loads(config)["preset"] is None and json.loads(config)["detect"]["mad_k"] == 7.0


def test_a_stored_run_naming_an_unknown_detector_is_a_clear_error(warehouse_with):
    db, run_id = warehouse_with(incident=None, detector="eager")
    with pytest.raises(ValueError, match="detector: unknown preset 'eager'; valid: default,"):
        analyze_run(db, run_id)
