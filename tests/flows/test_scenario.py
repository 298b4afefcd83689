"""Scenario files: valid ones parse; every kind of mistake names the file, the line and the key."""
from pathlib import Path

import pytest

from flows.scenario import ScenarioError, load_scenario

GOOD = """\
name: gc-storm
duration_s: 30
warmup_s: 2
engine:
  model: tiny
  max_num_seqs: 8
workload:
  prompt_tokens: {mean: 32, std: 8, min: 8, max: 64}
  output_tokens: {mean: 16, std: 4, min: 4, max: 32}
  sampling:
    temperature: [0.7, 1.0]
load:
  shape: constant
  users: 4
faults:
  - kind: memory.gc_storm
    start_s: 10
    duration_s: 8
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_valid_scenario_parses(tmp_path):
    s = load_scenario(write(tmp_path, GOOD))
    assert s.name == "gc-storm" and s.duration_s == 30 and s.warmup_s == 2
    assert s.engine.model == "tiny" and s.engine.max_num_seqs == 8
    assert [f.kind for f in s.faults] == ["memory.gc_storm"] and s.faults[0].cause == "memory"
    assert s.slug == "gc-storm"


def test_builtin_demo_scenario_is_valid():
    from flows.cli import builtin_scenario

    s = load_scenario(builtin_scenario("demo-gc-storm.yaml"))
    assert any(f.kind == "memory.gc_storm" for f in s.faults)


@pytest.mark.parametrize("old,new,line,key", [
    ("warmup_s: 2", "warmpu_s: 2", 3, "warmpu_s"),                       # unknown top-level key
    ("  max_num_seqs: 8", "  max_num_seqz: 8", 6, "engine.max_num_seqz"),  # unknown engine key
    ("    start_s: 10", "    start_s: -1", 17, "faults[0].start_s"),       # out of range
    ("  - kind: memory.gc_storm", "  - kind: memory.gc_stom", 16, "faults[0].kind"),
    ("duration_s: 30", "duration_s: soon", 2, "duration_s"),
    ("    temperature: [0.7, 1.0]", "    temprature: [0.7, 1.0]", 11, "workload.sampling.temprature"),
    ("{mean: 32, std: 8,", "{mean: 32, sd: 8,", 8, "workload.prompt_tokens.sd"),   # nested, flow style
])
def test_errors_name_file_line_and_key(tmp_path, old, new, line, key):
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert err.value.path == str(path)
    assert err.value.line == line, str(err.value)
    assert err.value.key == key, str(err.value)
    assert f"{path}:{line}" in str(err.value)


def test_broken_yaml_names_the_line(tmp_path):
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, GOOD.replace("  users: 4", "  users: [4")))
    assert err.value.key == "yaml" and err.value.line is not None


def test_fault_window_must_fit_in_the_run(tmp_path):
    with pytest.raises(ScenarioError, match="ends after duration_s"):
        load_scenario(write(tmp_path, GOOD.replace("duration_s: 8", "duration_s: 25")))


def test_engine_or_target_exactly_one(tmp_path):
    text = GOOD + "target: http://127.0.0.1:9/\n"
    with pytest.raises(ScenarioError, match="exactly one"):
        load_scenario(write(tmp_path, text))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")


def test_slo_block_is_validated_with_its_line(tmp_path):
    ok = load_scenario(write(tmp_path, GOOD + "slo: {ttft_ms: 500, tpot_ms: 50}\n"))
    assert ok.raw["slo"] == {"ttft_ms": 500, "tpot_ms": 50}
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, GOOD + "slo: {ttft: 500}\n"))
    assert err.value.line == 19 and "ttft" in str(err.value)


@pytest.mark.parametrize("params,needle", [
    ("{objects_per_stepp: 10}", "objects_per_stepp"),          # engine kind: unknown param
    ("{live_steps: 0}", "live_steps"),                         # engine kind: out of range
])
def test_fault_params_are_checked_by_their_owner(tmp_path, params, needle):
    text = GOOD + f"    params: {params}\n"
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, text))
    assert needle in str(err.value) and err.value.key.startswith("faults[0]")
    assert err.value.line in (16, 19), str(err.value)


def test_traffic_fault_params_are_checked_by_loadgen(tmp_path):
    text = GOOD.replace("memory.gc_storm", "load.burst") + "    params: {factor: -2}\n"
    with pytest.raises(ScenarioError, match="factor"):
        load_scenario(write(tmp_path, text))


def test_a_checkpoint_engine_takes_its_context_length_from_the_checkpoint(tmp_path):
    """As `spikelens engine --model DIR`: max_model_len unset = max_position_embeddings."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama", "max_position_embeddings": 256}')
    text = GOOD.replace("  model: tiny", f"  model: {folder}")
    assert load_scenario(write(tmp_path, text)).engine.max_model_len == 256
    with pytest.raises(ScenarioError, match=r"engine.max_model_len: must be in \[2, 256\]"):
        load_scenario(write(tmp_path, text.replace("  max_num_seqs: 8", "  max_num_seqs: 8\n  max_model_len: 2048")))
