"""bench/detector_tradeoff.py: replayed on a tiny recorded suite (a control and a GC storm)."""

from __future__ import annotations

import json

import pytest

from bench.detector_tradeoff import grid, main
from rca.analyze import analyze_run
from rca.config import DetectConfig
from rca.evaluate import evaluate
from tests.support.runbuilder import SimSpec, write_run
from warehouse.ingest import ingest_run


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A warehouse with a clean run and a 150-ms GC storm, and the evaluation.json of the two."""
    root = tmp_path_factory.mktemp("suite")
    db = root / "w.duckdb"
    runs = ["ctl", "gc"]
    for run_id, incident in zip(runs, (None, "gc")):
        ingest_run(db, write_run(root, SimSpec(run_id=run_id, incident=incident)))
        analyze_run(db, run_id)
    evaluation = root / "evaluation.json"
    evaluation.write_text(json.dumps(evaluate(db, runs, peers=(), bootstrap_reps=100)))
    return f"{db}:{evaluation}"


def test_every_setting_scores_the_controls_and_the_acted_faults(suite, capsys):
    main(["--suite", suite])
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == 2 and out["controls"] == 1
    assert set(out["settings"]) == {name for name, _ in grid(DetectConfig())}
    default = out["settings"]["default"]
    assert default["acted_faults"] == default["acted_found"] == 1  # the storm, found
    assert default["false_alarms"] == 0 and default["control_hours"] > 0
    assert default["false_alarms_per_hour"]["value"] == 0.0
    assert default["acted_found_share"]["low"] < 1.0 == default["acted_found_share"]["value"]
    for figures in out["settings"].values():
        assert 0 <= figures["acted_found"] <= figures["acted_faults"] == 1


def test_the_grid_starts_with_the_default_and_holds_each_setting_once():
    settings = grid(DetectConfig())
    assert settings[0] == ("default", DetectConfig())
    configs = [repr(cfg) for _, cfg in settings]
    assert len(configs) == len(set(configs)) == len({name for name, _ in settings})


def test_a_suite_that_is_not_two_files_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--suite", str(tmp_path / "w.duckdb")])
    assert "WAREHOUSE:EVALUATION_JSON" in capsys.readouterr().err
