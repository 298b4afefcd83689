"""flows.evaluate: the suite folder's shape, and cases of kinds this build does not register."""

import json
from collections import Counter
from pathlib import Path

import yaml

from flows.evaluate import default_suite_dir, suite_scenarios, unregistered_kinds
from flows.paths import StatePaths
from flows.scenario import load_scenario
from spikelens_common.fault_catalogue import FAULT_CAUSES

SMALL_LM = "models/small-lm"  # the Makefile's small-model target writes it


def test_unregistered_kinds_are_named_and_registered_ones_are_not(tmp_path):
    case = tmp_path / "c.yaml"
    case.write_text(
        "faults:\n  - {kind: memory.gc_storm, start_s: 1}\n  - {kind: no.such_kind, start_s: 2}\n"
    )
    assert unregistered_kinds(case) == ["no.such_kind"]
    (tmp_path / "control.yaml").write_text("name: x\n")
    assert unregistered_kinds(tmp_path / "control.yaml") == []


def test_the_suite_has_half_an_hour_of_varied_controls_and_off_grid_fault_pairs():
    controls_s, shapes, kinds, starts = 0.0, set(), Counter(), []
    for path in suite_scenarios(default_suite_dir()):
        raw = yaml.safe_load(path.read_text())
        faults = raw.get("faults") or []
        if unregistered_kinds(path):
            assert {f["kind"] for f in faults} <= {"client.stall", "network.delay"}
            kinds.update(f["kind"] for f in faults)
            continue
        # every case that runs today is a valid scenario; the repetition cases' trained model is
        # built by `make evaluate` (make small-model), so without it they parse on the preset
        model = (raw.get("engine") or {}).get("model")
        trained = model == SMALL_LM and not Path(SMALL_LM, "config.json").exists()
        overrides = {"engine": {"model": "small"}} if trained else None
        scenario = load_scenario(path, overrides)
        if not faults:
            controls_s += scenario.duration_s
            shapes.add((raw["load"]["shape"], str(raw["workload"])))
        for f in faults:
            kinds[f["kind"]] += 1
            starts.append(f["start_s"])
    assert controls_s >= 30 * 60
    assert len(shapes) >= 5 and {s for s, _ in shapes} >= {"constant", "ramp", "poisson"}
    # every kind of the design, the new outside-the-engine ones included, at least a low/high pair;
    # but penalty.heavy_traffic, which cannot act on spikelens' engine (its penalty path runs
    # batch-wide whenever any request has penalties) and is scored in scenarios/eval-vllm/
    expected = (set(FAULT_CAUSES) | {"client.stall", "network.delay"}) - {"penalty.heavy_traffic"}
    assert set(kinds) >= expected
    assert all(n >= 2 for n in kinds.values())
    assert sum(s != int(s) for s in starts) >= 0.8 * len(starts)  # starts off the window grid


def test_the_evaluate_command_refuses_a_bad_draw_before_running_anything(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from flows.cli import app
    from flows.suite_draw import generate_suite

    monkeypatch.setenv("SPIKELENS_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    zero = runner.invoke(app, ["evaluate", "--no-peers", "--generate", "0"])
    assert zero.exit_code == 2 and "N must be >= 1" in zero.output
    generate_suite(tmp_path / "gen-7", 2, 7)
    taken = runner.invoke(
        app, ["evaluate", str(tmp_path / "gen-7"), "--no-peers", "--generate", "2"]
    )
    assert taken.exit_code == 2 and "already holds scenario files" in taken.output
    alone = runner.invoke(app, ["evaluate", "--no-peers", "--control-minutes", "10"])
    assert alone.exit_code == 2 and "--control-minutes" in alone.output
    lots = runner.invoke(
        app, ["evaluate", "--no-peers", "--generate", "1", "--control-minutes", "9999"]
    )
    assert lots.exit_code == 2 and "must be in [0, 600]" in lots.output
    bare = runner.invoke(app, ["evaluate", "--no-peers", "--unexplained", "2"])
    assert bare.exit_code == 2 and "--unexplained" in bare.output
    twins = runner.invoke(app, ["evaluate", "--no-peers", "--twins"])
    assert twins.exit_code == 2 and "--twins" in twins.output
    assert not (tmp_path / "home" / "runs").exists()  # nothing ran


def test_a_suites_twins_are_found_by_name_only_where_their_pair_ran():
    from flows.evaluate import twin_runs

    run_of = {
        "gen-1-000-gc-storm-stall": "r0",
        "gen-1-000-gc-storm-stall-solo0": "r1",
        "gen-1-000-gc-storm-stall-solo1": "r2",
        "gen-1-001-burst-solo0": "r3",  # its pair did not run (skipped)
        "gen-1-002-control": "r4",
    }
    assert twin_runs(run_of) == {"r1": ("r0", 0), "r2": ("r0", 1)}


def test_a_failed_confirmation_is_scored_inconclusive_and_the_rest_still_run(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import flows.confirm
    from flows.evaluate import confirm_events

    def confirm(run_id, spike, repeats, cause, state_home):
        if run_id == "a":
            raise RuntimeError("the engine did not start")
        return SimpleNamespace(verdict="confirmed", share={"point": 0.9}, report="/r")

    monkeypatch.setattr(flows.confirm, "confirm_spike", confirm)
    per_run = [
        {
            "run_id": run,
            "verdicts": [
                {"cause": "memory", "detected": True, "attributed_cause": "memory", "spike_id": 1}
            ],
        }
        for run in ("a", "b")
    ]
    scores = confirm_events(StatePaths(tmp_path), per_run, repeats=1, swaps=0)
    by_run = {o["run_id"]: o for o in scores["outcomes"]}
    assert by_run["a"]["verdict"] == "inconclusive" and "did not start" in by_run["a"]["note"]
    assert by_run["b"]["verdict"] == "confirmed" and scores["right_confirmed"] == 1


def test_a_recorded_suite_rescored_under_another_preset_records_it(tmp_path):
    """`spikelens evaluate --rescore ID --detector thorough`: the same recorded runs analysed
    under another preset and scored, nothing re-run; a simulated slow penalty path at 1.6× is
    under the P99 test's floor (`p99`) and found by `thorough`."""
    from flows.evaluate import evaluation
    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    paths = StatePaths(tmp_path / "home").ensure()
    spec = SimSpec(run_id="sim-penalty", incident="penalty", magnitude=8.0)
    ingest_run(paths.warehouse, write_run(paths.runs, spec))
    earlier = paths.reports / "earlier"
    earlier.mkdir(parents=True)
    (earlier / "evaluation.json").write_text(
        json.dumps({"suite_dir": str(tmp_path / "suite"), "run_ids": [spec.run_id]})
    )

    def found(detector):
        result = evaluation.fn(
            state_home=str(paths.home), peers=(), rescore="earlier", detector=detector
        )
        stored = json.loads(Path(result.json_path).read_text())
        assert stored["detector"] == detector
        (run,) = stored["per_run"]
        return [v["detected"] for v in run["verdicts"]]

    assert found("p99") == [False]
    assert found("thorough") == [True]
    assert found(None) == [True]  # the default's P50 test: every request is slower
