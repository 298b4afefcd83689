"""A replay's scenario: the original's, with its own requests as a replay trace."""

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
