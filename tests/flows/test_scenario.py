"""Scenario files: valid ones parse; every kind of mistake names the file, the line and the key."""

from pathlib import Path

import pytest

from flows.runtime import OurEngine, Target, VllmEngine
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
    assert isinstance(s.runtime, OurEngine)
    assert s.runtime.config.model == "tiny" and s.runtime.config.max_num_seqs == 8
    assert [f.kind for f in s.faults] == ["memory.gc_storm"] and s.faults[0].cause == "memory"
    assert s.slug == "gc-storm"


def test_builtin_demo_scenario_is_valid():
    from flows.cli import builtin_scenario

    s = load_scenario(builtin_scenario("demo-gc-storm.yaml"))
    assert any(f.kind == "memory.gc_storm" for f in s.faults)


@pytest.mark.parametrize(
    "old,new,line,key",
    [
        ("warmup_s: 2", "warmpu_s: 2", 3, "warmpu_s"),  # unknown top-level key
        ("  max_num_seqs: 8", "  max_num_seqz: 8", 6, "engine.max_num_seqz"),  # unknown engine key
        ("    start_s: 10", "    start_s: -1", 17, "faults[0].start_s"),  # out of range
        ("  - kind: memory.gc_storm", "  - kind: memory.gc_stom", 16, "faults[0].kind"),
        ("duration_s: 30", "duration_s: soon", 2, "duration_s"),
        (
            "    temperature: [0.7, 1.0]",
            "    temprature: [0.7, 1.0]",
            11,
            "workload.sampling.temprature",
        ),
        (
            "{mean: 32, std: 8,",
            "{mean: 32, sd: 8,",
            8,
            "workload.prompt_tokens.sd",
        ),  # nested, flow style
    ],
)
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


@pytest.mark.parametrize(
    "params,needle",
    [
        ("{objects_per_stepp: 10}", "objects_per_stepp"),  # engine kind: unknown param
        ("{live_ticks: 0}", "live_ticks"),  # engine kind: out of range
    ],
)
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
    assert load_scenario(write(tmp_path, text)).runtime.config.max_model_len == 256
    with pytest.raises(ScenarioError, match=r"engine.max_model_len: must be in \[2, 256\]"):
        load_scenario(
            write(
                tmp_path,
                text.replace("  max_num_seqs: 8", "  max_num_seqs: 8\n  max_model_len: 2048"),
            )
        )


TARGET = """\
name: t
duration_s: 10
target: {url: "http://127.0.0.1:8000", model: tiny-llama}
endpoint: chat
"""


def test_target_mapping_names_url_model_and_endpoint(tmp_path):
    s = load_scenario(write(tmp_path, TARGET))
    assert (s.runtime, s.endpoint) == (Target("http://127.0.0.1:8000", "tiny-llama"), "chat")
    plain = load_scenario(write(tmp_path, "duration_s: 10\ntarget: http://h:1\n"))
    assert (plain.runtime, plain.endpoint) == (Target("http://h:1", None), "completions")
    ours = load_scenario(write(tmp_path, GOOD))
    assert ours.endpoint == "chat" and isinstance(ours.runtime, OurEngine)


@pytest.mark.parametrize(
    "text,line,key",
    [
        (TARGET.replace("endpoint: chat", "endpoint: responses"), 4, "endpoint"),
        (TARGET.replace("model: tiny-llama", "modle: tiny-llama"), 3, "target.modle"),
        (TARGET.replace("model: tiny-llama", "model: ''"), 3, "target.model"),
        (TARGET.replace('"http://127.0.0.1:8000"', '"http://127.0.0.1:8000/v1"'), 3, "target.url"),
        ("duration_s: 10\ntarget: 127.0.0.1:8000\n", 2, "target"),
    ],
)
def test_target_mistakes_name_the_key(tmp_path, text, line, key):
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, text))
    assert (e.value.line, e.value.key) == (line, key), str(e.value)


def _checkpoint(tmp_path) -> Path:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / "config.json").write_text("{}")
    return ckpt


def test_vllm_engine_block_parses_and_rejects_engine_faults(tmp_path):
    ckpt = _checkpoint(tmp_path)
    text = (
        f"duration_s: 10\nengine:\n  kind: vllm\n  model: {ckpt}\n  max_num_seqs: 8\n"
        f"  kv_cache_space_gib: 1\n  extra_args: [--seed, '0']\n"
    )
    s = load_scenario(write(tmp_path, text))
    assert isinstance(s.runtime, VllmEngine)
    vllm = s.runtime.config
    assert vllm.model == str(ckpt) and vllm.max_num_seqs == 8
    assert vllm.extra_args == ("--seed", "0") and s.endpoint == "completions"
    with pytest.raises(ScenarioError) as e:
        load_scenario(
            write(
                tmp_path, text + "faults:\n  - {kind: comm.straggler, start_s: 1, duration_s: 2}\n"
            )
        )
    assert e.value.key == "faults[0].kind" and "load.burst" in str(e.value)
    assert "memory.gc_storm, memory.kv_pressure" in str(e.value)
    assert "'comm.straggler' cannot be applied to a vLLM engine" in str(e.value)
    storm = load_scenario(
        write(
            tmp_path,
            text + "faults:\n  - {kind: memory.gc_storm, start_s: 1, "
            "duration_s: 2, params: {role: EngineCore, tick_s: 0.05}}\n",
        )
    )
    assert storm.faults[0].params == {"role": "EngineCore", "tick_s": 0.05}
    with pytest.raises(ScenarioError) as e:  # the hook's params, not the engine's
        load_scenario(
            write(
                tmp_path,
                text + "faults:\n  - {kind: memory.gc_storm, start_s: 1, "
                "duration_s: 2, params: {objects_per_step: 5}}\n",
            )
        )
    assert e.value.key.startswith("faults[0]") and "objects_per_step" in str(e.value)
    ours = load_scenario(
        write(tmp_path, GOOD.replace("  model: tiny", "  kind: spikelens\n  model: tiny"))
    )
    assert isinstance(ours.runtime, OurEngine) and ours.runtime.config.model == "tiny"


def test_kv_pressure_takes_long_prompt_params_on_vllm_and_a_fraction_on_ours(tmp_path):
    ckpt = _checkpoint(tmp_path)
    text = f"duration_s: 10\nengine:\n  kind: vllm\n  model: {ckpt}\n"
    kv = "faults:\n  - {kind: memory.kv_pressure, start_s: 1, duration_s: 2, params: %s}\n"
    on_vllm = load_scenario(write(tmp_path, text + kv % "{prompt_tokens: 300}"))
    assert on_vllm.faults[0].params == {"prompt_tokens": 300}
    with pytest.raises(ScenarioError) as e:  # the engine's param is not loadgen's
        load_scenario(write(tmp_path, text + kv % "{fraction: 0.1}"))
    assert e.value.key.startswith("faults[0]") and "fraction" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, text + kv % "{prompt_tokens: 0}"))
    assert "faults[0].params.prompt_tokens" in str(e.value)
    ours = load_scenario(write(tmp_path, GOOD.split("faults:")[0] + kv % "{fraction: 0.1}"))
    assert ours.faults[0].params == {"fraction": 0.1}
    target = "duration_s: 10\ntarget: http://127.0.0.1:9\n"
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, target + kv % "{prompt_tokens: 300}"))
    assert e.value.key == "faults[0].kind"


@pytest.mark.parametrize(
    "line_text,key,needle",
    [
        ("  max_num_seqz: 8", "engine.max_num_seqz", "unknown key"),
        ("  max_num_seqs: 0", "engine.max_num_seqs", "[1, 65536]"),
        ("  dtype: fp8", "engine.dtype", "float32"),
        ("  kv_cache_space_gib: -1", "engine.kv_cache_space_gib", "must be a number"),
        ("  extra_args: --seed", "engine.extra_args", "list of strings"),
        ("  cpus: 0", "engine.cpus", "list of CPU ids"),
        ("  cpus: [0, 0]", "engine.cpus", "distinct CPU ids among this machine's"),
        ("  cpus: [100000]", "engine.cpus", "distinct CPU ids among this machine's"),
    ],
)
def test_vllm_engine_mistakes_name_file_line_and_key(tmp_path, line_text, key, needle):
    ckpt = _checkpoint(tmp_path)
    text = f"duration_s: 10\nengine:\n  kind: vllm\n  model: {ckpt}\n{line_text}\n"
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, text))
    assert (e.value.line, e.value.key) == (5, key), str(e.value)
    assert needle in str(e.value) and str(tmp_path / "s.yaml") in str(e.value)


def test_vllm_engine_needs_a_checkpoint_and_a_known_kind(tmp_path):
    for text, key in (
        (f"duration_s: 10\nengine: {{kind: vllm, model: {tmp_path}/none}}\n", "engine.model"),
        ("duration_s: 10\nengine: {kind: sglang}\n", "engine.kind"),
        ("duration_s: 10\nengine: {kind: vllm}\n", "engine"),
    ):
        with pytest.raises(ScenarioError) as e:
            load_scenario(write(tmp_path, text))
        assert e.value.key == key, str(e.value)
        assert "engine.model: is required" in str(e.value) or key != "engine"


def test_vllm_example_scenarios_are_valid(tmp_path):
    repo = Path(__file__).resolve().parents[2] / "scenarios"
    ckpt = _checkpoint(tmp_path)
    s = load_scenario(repo / "vllm-burst.yaml", {"engine": {"model": str(ckpt)}})
    assert isinstance(s.runtime, VllmEngine) and s.runtime.config.kv_cache_space_gib == 1
    assert [f.kind for f in s.faults] == ["load.burst"]
    t = load_scenario(repo / "vllm-target.yaml")
    assert t.runtime == Target("http://127.0.0.1:8000") and t.endpoint == "completions"


def test_cpu_contention_is_accepted_for_started_engines_only(tmp_path):
    ckpt = _checkpoint(tmp_path)
    fault = "faults:\n  - {kind: host.cpu_contention, start_s: 1, duration_s: 2, params: {processes: 2}}\n"
    vllm = load_scenario(
        write(tmp_path, f"duration_s: 10\nengine:\n  kind: vllm\n  model: {ckpt}\n" + fault)
    )
    assert vllm.faults[0].kind == "host.cpu_contention" and vllm.faults[0].cause == "host"
    assert load_scenario(write(tmp_path, GOOD + fault)).faults[0].params == {"processes": 2}
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, "duration_s: 10\ntarget: http://127.0.0.1:1\n" + fault))
    assert e.value.key == "faults[0].kind" and "target" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, GOOD + fault.replace("processes: 2", "processes: 0")))
    assert e.value.key.startswith("faults") and "params.processes" in str(e.value)


def test_client_stall_and_network_delay_work_for_any_engine_or_target(tmp_path):
    faults = (
        "faults:\n  - {kind: client.stall, start_s: 1, duration_s: 2, params: {pause_ms: 100}}\n"
        "  - {kind: network.delay, start_s: 4, duration_s: 2, params: {delay_ms: 30}}\n"
    )
    for head in (GOOD, "duration_s: 10\ntarget: http://127.0.0.1:1\n"):
        parsed = load_scenario(write(tmp_path, head + faults)).faults
        assert [(f.kind, f.cause) for f in parsed] == [
            ("client.stall", "client"),
            ("network.delay", "network"),
        ]
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, GOOD + faults.replace("delay_ms: 30", "delay_ms: -1")))
    assert e.value.key.startswith("faults") and "params.delay_ms" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, GOOD + faults.replace("pause_ms: 100", "pause_ms: 0")))
    assert e.value.key == "faults[0].params.pause_ms" and "[1, 10000]" in str(e.value)


def test_the_intervention_block_turns_gc_off_and_names_its_mistakes(tmp_path):
    """`intervention: {gc_off: true}` (written by `spikelens confirm`): off by default, on when
    given, and a wrong key, value or runtime names the key."""
    assert not load_scenario(write(tmp_path, GOOD)).gc_off
    assert load_scenario(write(tmp_path, GOOD + "intervention: {gc_off: true}\n")).gc_off
    for block, needle in (
        ("intervention: {gc_of: true}\n", "intervention: unknown key"),
        ("intervention: {gc_off: 1}\n", "intervention.gc_off: must be true or false"),
    ):
        with pytest.raises(ScenarioError, match=needle):
            load_scenario(write(tmp_path, GOOD + block))
    target = GOOD.replace("engine:\n  model: tiny\n  max_num_seqs: 8\n", "target: http://x:1\n")
    target = target.replace(
        "faults:\n  - kind: memory.gc_storm\n    start_s: 10\n    duration_s: 8\n", ""
    )
    with pytest.raises(ScenarioError, match="needs an engine spikelens starts"):
        load_scenario(write(tmp_path, target + "intervention: {gc_off: true}\n"))


def test_the_intervention_block_raises_the_engines_priority_where_it_may(tmp_path, monkeypatch):
    """`intervention: {nice: -10}` (confirm's host arm): the engine's processes at that nice;
    out of range, or without the right to raise a priority, names the key and why."""
    import flows.scenario as scenario_module

    assert load_scenario(write(tmp_path, GOOD)).nice is None
    monkeypatch.setattr(scenario_module, "why_not", lambda nice: None)
    assert load_scenario(write(tmp_path, GOOD + "intervention: {nice: -10}\n")).nice == -10
    for value in ("-21", "20", "true", "low"):
        with pytest.raises(ScenarioError, match=r"intervention.nice: must be an integer in \[-20"):
            load_scenario(write(tmp_path, GOOD + f"intervention: {{nice: {value}}}\n"))
    monkeypatch.setattr(scenario_module, "why_not", lambda nice: "needs root or CAP_SYS_NICE")
    with pytest.raises(ScenarioError, match="intervention.nice: needs root or CAP_SYS_NICE"):
        load_scenario(write(tmp_path, GOOD + "intervention: {nice: -10}\n"))


def test_the_detector_preset_is_chosen_by_name_and_a_wrong_one_names_the_choices(tmp_path):
    assert load_scenario(write(tmp_path, GOOD)).detector == "default"
    chosen = load_scenario(write(tmp_path, GOOD + "detector: thorough\n"))
    assert chosen.detector == "thorough" and chosen.raw["detector"] == "thorough"
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, GOOD + "detector: eager\n"))
    assert (err.value.key, err.value.line) == ("detector", 19)
    assert "must be one of default, thorough, sensitive, p99, p50, local, got 'eager'" in str(
        err.value
    )
