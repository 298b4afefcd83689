"""A replay's scenario: the original's, with its own requests as a replay trace."""

import dataclasses
from pathlib import Path

from flows.manifest import RunManifest
from flows.replay import replay_scenario


def original() -> RunManifest:
    scenario = {
        "name": "gc",
        "duration_s": 30,
        "engine": {"model": "small", "max_num_seqs": 16},
        "workload": {},
        "load": {"shape": "constant", "users": 4},
        "faults": [
            {"kind": "memory.gc_storm", "start_s": 5, "duration_s": 5},
            {"kind": "load.burst", "start_s": 10, "duration_s": 5},
        ],
    }
    return RunManifest(
        run_id="r0",
        kind="incident",
        scenario_name="gc",
        scenario_path="gc.yaml",
        scenario=scenario,
        engine=scenario["engine"],
        target=None,
        faults=scenario["faults"],
        warmup_s=2,
        duration_s=30,
        command="x",
    )


def test_replay_keeps_engine_and_faults_and_replays_requests():
    raw = replay_scenario(original(), Path("/runs/r0"), {"max_num_seqs": 8}, None)
    assert raw["load"] == {"shape": "replay", "trace": "/runs/r0"}
    assert raw["engine"] == {"model": "small", "max_num_seqs": 8}
    assert len(raw["faults"]) == 2 and raw["duration_s"] == 30


def test_replay_against_a_target_drops_engine_faults():
    raw = replay_scenario(original(), Path("/runs/r0"), None, "http://127.0.0.1:9000")
    assert "engine" not in raw and raw["target"] == "http://127.0.0.1:9000"
    assert [f["kind"] for f in raw["faults"]] == ["load.burst"]
    assert original().scenario["engine"] == {"model": "small", "max_num_seqs": 16}  # not mutated


def test_an_incidents_replay_runs_its_rebuilt_requests_on_its_time_axis(tmp_path):
    """The scenario of `replay --from-incident`: the window's length, the trace built from the
    counters, no warm-up (the trace's times are the incident's), the engine given by the user."""
    from flows.replay import incident_replay_scenario

    incident = RunManifest(
        run_id="obs-1",
        kind="observed",
        scenario_name="prometheus",
        scenario_path="",
        scenario={},
        engine={"kind": "observed", "step_s": 1.0},
        target=None,
        faults=[],
        warmup_s=0,
        duration_s=40,
        command="x",
    )
    trace = tmp_path / "obs-1.jsonl"
    raw = incident_replay_scenario(incident, trace, {"model": "tiny"}, None)
    assert raw["duration_s"] == 40 and raw["warmup_s"] == 0
    assert raw["load"] == {"shape": "replay", "trace": str(trace)}
    assert raw["engine"] == {"model": "tiny"} and "target" not in raw
    on_target = incident_replay_scenario(incident, trace, None, "http://127.0.0.1:9000")
    assert on_target["target"] == "http://127.0.0.1:9000" and "engine" not in on_target
    assert "detector" not in raw
    # an incident analysed with another detector preset: its replay is judged the same way
    thorough = dataclasses.replace(incident, scenario={"detector": "thorough"})
    assert incident_replay_scenario(thorough, trace, None, None)["detector"] == "thorough"


def test_an_incident_replay_refuses_what_it_cannot_replay(tmp_path):
    """A run that is no imported incident, or no engine to start: one clear error each."""
    import json

    import pytest

    from flows.replay import replay_incident

    home = tmp_path / "home"
    run_dir = home / "runs" / "r0"
    original().write(run_dir)
    with pytest.raises(ValueError, match="not an incident imported from Prometheus"):
        replay_incident.fn("r0", {"model": "tiny"}, None, str(home))
    with pytest.raises(ValueError, match="no run.json"):
        replay_incident.fn("nope", {"model": "tiny"}, None, str(home))
    obs = home / "runs" / "obs-1"
    obs.mkdir(parents=True)
    manifest = json.loads((run_dir / "run.json").read_text())
    (obs / "run.json").write_text(json.dumps({**manifest, "run_id": "obs-1", "kind": "observed"}))
    with pytest.raises(ValueError, match="--engine"):
        replay_incident.fn("obs-1", None, None, str(home))
