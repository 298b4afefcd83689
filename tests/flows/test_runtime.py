"""What a scenario runs against (flows/runtime.py): one runtime per scenario, from the YAML
users write (unchanged: `engine:`, `engine: {kind: vllm}`, `target:`)."""

from pathlib import Path

import pytest

from flows.runtime import OurEngine, Target, VllmEngine, engine_settings
from flows.scenario import parse_scenario


def test_each_yaml_form_parses_to_its_runtime(tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    ours = parse_scenario({"duration_s": 10, "engine": {"model": "tiny"}}).runtime
    vllm = parse_scenario({"duration_s": 10, "engine": {"kind": "vllm", "model": str(ckpt)}})
    url = parse_scenario({"duration_s": 10, "target": "http://h:1"}).runtime
    named = parse_scenario({"duration_s": 10, "target": {"url": "http://h:1", "model": "m"}})
    assert isinstance(ours, OurEngine) and ours.config.model == "tiny"
    assert isinstance(vllm.runtime, VllmEngine) and vllm.runtime.config.model == str(ckpt)
    assert (url, named.runtime) == (Target("http://h:1"), Target("http://h:1", "m"))


def test_run_json_records_the_started_engine_settings_and_no_engine_for_a_target():
    ours = parse_scenario({"duration_s": 10, "engine": {"model": "tiny"}}).runtime
    assert engine_settings(ours) == ours.config.to_dict() and engine_settings(ours)["model"]
    assert engine_settings(Target("http://h:1")) is None


def test_our_engine_takes_a_chat_template_and_hands_it_to_the_engine_process(tmp_path: Path):
    """`engine.chat_template` (as `spikelens engine --chat-template`): a file is kept as its
    absolute path, so the engine process and run.json name it whatever their working directory;
    a value that is neither a file nor a template fails the scenario naming the key and line."""
    from flows.scenario import ScenarioError, load_scenario

    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    ours = parse_scenario(
        {"duration_s": 10, "engine": {"model": "tiny", "chat_template": str(template)}}
    ).runtime
    assert isinstance(ours, OurEngine) and ours.config.chat_template == str(template.resolve())
    assert engine_settings(ours)["chat_template"] == str(template.resolve())
    bad = tmp_path / "bad.yaml"
    bad.write_text("duration_s: 10\nengine:\n  model: tiny\n  chat_template: nowhere.jinja\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(bad)
    assert "engine.chat_template: 'nowhere.jinja' looks like a file path" in str(err.value)
    assert str(err.value).startswith(f"{bad}:")
