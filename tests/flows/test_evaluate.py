"""flows.evaluate: the suite folder's shape, and cases of kinds this build does not register."""

from collections import Counter
from pathlib import Path

import yaml

from flows.evaluate import default_suite_dir, suite_scenarios, unregistered_kinds
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
