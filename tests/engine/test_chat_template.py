"""engine.chat_template: where a run's chat template comes from (the setting, then the
checkpoint's chat_template.jinja, chat_template.json, tokenizer_config.json, as transformers and
vLLM read them), how a --chat-template value is read, and that a checkpoint without one answers
chat with an error naming both ways out instead of a built-in template its vocabulary lacks."""

import json
import shutil
from pathlib import Path

import pytest

from engine import chat_template as ct
from engine.config import EngineConfig
from engine.tokenizer import DEFAULT_TOKENIZER_PATH, Tokenizer

HELLO = [{"role": "user", "content": "Hello"}]


def _template(tag: str) -> str:
    """A template that says which file it came from, over the project tokenizer's tokens."""
    return tag + "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def _folder(tmp_path: Path, *places: str) -> Path:
    """A tokenizer-only checkpoint folder with a different template in each of `places`."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    shutil.copy(DEFAULT_TOKENIZER_PATH, folder / "tokenizer.json")
    config: dict = {"bos_token": "<|bos|>", "eos_token": "<|eos|>"}
    if "config" in places:
        config["chat_template"] = _template("config:")
    (folder / ct.TOKENIZER_CONFIG).write_text(json.dumps(config))
    if "json" in places:
        (folder / ct.JSON_FILE).write_text(json.dumps({"chat_template": _template("json:")}))
    if "jinja" in places:
        (folder / ct.JINJA_FILE).write_text(_template("jinja:"))
    return folder


def _rendered(folder: Path, setting: str | None = None) -> str:
    tok = Tokenizer.from_hf_folder(folder, setting)
    return tok.decode(tok.apply_chat_template(HELLO), skip_special_tokens=False)


@pytest.mark.parametrize(
    "places,expected",
    [
        (("jinja", "json", "config"), "jinja:Hello"),
        (("json", "config"), "json:Hello"),
        (("config",), "config:Hello"),
        (("jinja", "config"), "jinja:Hello"),  # transformers: the file wins over the config's
    ],
)
def test_the_checkpoint_template_is_found_in_transformers_order(tmp_path, places, expected):
    assert _rendered(_folder(tmp_path, *places)) == expected


def test_the_setting_wins_over_every_checkpoint_file(tmp_path):
    folder = _folder(tmp_path, "jinja", "json", "config")
    assert _rendered(folder, _template("inline:")) == "inline:Hello"
    given = tmp_path / "mine.jinja"
    given.write_text(_template("file:"))
    assert _rendered(folder, str(given)) == "file:Hello"


def test_tokenizer_config_named_templates_use_the_default(tmp_path):
    folder = _folder(tmp_path)
    named = [
        {"name": "tool_use", "template": _template("tools:")},
        {"name": "default", "template": _template("default:")},
    ]
    (folder / ct.TOKENIZER_CONFIG).write_text(json.dumps({"chat_template": named}))
    assert _rendered(folder) == "default:Hello"
    (folder / ct.TOKENIZER_CONFIG).write_text(json.dumps({"chat_template": named[:1]}))
    with pytest.raises(ValueError, match=r"\['tool_use'\] but none named 'default'"):
        Tokenizer.from_hf_folder(folder)


def test_a_chat_template_json_without_the_key_is_named(tmp_path):
    folder = _folder(tmp_path)
    (folder / ct.JSON_FILE).write_text(json.dumps({"template": "x"}))
    with pytest.raises(ValueError, match=r"chat_template.json: must hold \{\"chat_template\""):
        Tokenizer.from_hf_folder(folder)


def test_a_checkpoint_without_a_template_refuses_chat_naming_both_ways_out(tmp_path):
    """Not the project's built-in template (the tokens it writes are this vocabulary's here, but
    need not be a checkpoint's): an error that says what is missing and how to add it."""
    folder = _folder(tmp_path)
    tok = Tokenizer.from_hf_folder(folder)
    assert tok.chat_template_origin is None
    with pytest.raises(ct.ChatTemplateMissing) as err:
        tok.apply_chat_template(HELLO)
    message = str(err.value)
    assert "has no chat template" in message and str(folder) in message
    assert "Add chat_template.jinja to the checkpoint" in message
    assert "--chat-template FILE|TEMPLATE" in message and "engine.chat_template" in message
    assert tok.encode("still encodes") == Tokenizer.default().encode("still encodes")


def test_a_setting_is_a_file_when_it_opens_else_the_template_itself(tmp_path):
    path = tmp_path / "t.jinja"
    path.write_text("{{ messages[0]['content'] }}")
    from_file = ct.from_setting(str(path))
    assert from_file.text == path.read_text() and from_file.path == path
    inline = ct.from_setting("{{ messages[0]['content'] }}")
    assert inline.text == "{{ messages[0]['content'] }}" and inline.path is None


@pytest.mark.parametrize("value", ["templates/missing.jinja", "mistyped", str(Path("/"))])
def test_a_setting_that_looks_like_a_path_but_does_not_open_is_an_error(value):
    """vLLM's rule: no `{`, `}` or newline in it → a path, never a one-word template."""
    with pytest.raises(ValueError, match="looks like a file path, but it cannot be opened"):
        ct.from_setting(value)


def test_engine_config_keeps_a_file_as_its_absolute_path(tmp_path, monkeypatch):
    (tmp_path / "t.jinja").write_text("{{ messages[0]['content'] }}")
    monkeypatch.chdir(tmp_path)
    config = EngineConfig(model="tiny", chat_template="t.jinja")
    assert config.chat_template == str(tmp_path / "t.jinja")
    inline = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert EngineConfig(model="tiny", chat_template=inline).chat_template == inline
    assert EngineConfig.from_dict(config.to_dict()).chat_template == config.chat_template


@pytest.mark.parametrize(
    "value,needle",
    [
        ("nope.jinja", "engine.chat_template: 'nope.jinja' looks like a file path"),
        ("{% for m in messages %}", "engine.chat_template: chat template (--chat-template"),
        ("", "engine.chat_template: must be a template file or a Jinja template"),
        (3, "engine.chat_template: must be a template file or a Jinja template"),
    ],
)
def test_engine_config_refuses_a_template_that_cannot_load(value, needle):
    with pytest.raises(ValueError) as err:
        EngineConfig(model="tiny", chat_template=value)
    assert needle in str(err.value)


def test_the_project_template_file_renders_the_built_in_ids():
    """engine/assets/chat_template.jinja (what the repo's checkpoints carry) is the project
    tokenizer's built-in turns written as Jinja: the same prompt ids, system turn included."""
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi there, twice:\nline two"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "Again"},
    ]
    built_in = Tokenizer.default()
    from_file = Tokenizer.default(str(ct.PROJECT_TEMPLATE_PATH))
    assert from_file.chat_template_origin.endswith("chat_template.jinja")
    assert built_in.chat_template_origin == "the project tokenizer's own (built in)"
    assert from_file.apply_chat_template(messages) == built_in.apply_chat_template(messages)


def test_a_template_error_is_a_value_error_naming_the_template():
    """raise_exception and undefined names answer 400 (ValueError), never a 500."""
    refuses = ct.ChatTemplate("{{ raise_exception('only user turns') }}", "test")
    with pytest.raises(ValueError, match="chat template: only user turns"):
        refuses.render(HELLO, "<s>", "</s>")
    undefined = ct.ChatTemplate("{{ messages[0].content.nope() }}", "inline test")
    with pytest.raises(ValueError, match=r"chat template \(inline test\):"):
        undefined.render(HELLO, "<s>", "</s>")


def test_transformers_helpers_are_in_scope():
    """tojson (without HTML escaping), strftime_now and loop controls, as transformers renders."""
    template = ct.ChatTemplate(
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{{ m | tojson }}{% endfor %}{{ strftime_now('%Y') | length }}",
        "test",
    )
    text = template.render([{"role": "user", "content": "<a&b>"}, HELLO[0]], "", "")
    assert text == '{"role": "user", "content": "<a&b>"}4'


def test_a_llama3_vocabulary_chats_with_its_own_template_file(tmp_path):
    """Issue 22's case: a checkpoint whose vocabulary lacks the project's chat tokens, its
    template in chat_template.jinja only. It renders with that file; without it, the 400 says
    the template is missing, not that '<|end|>' is (the built-in template no longer stands in)."""
    from tests.support.hf_llama import LLAMA3_TEMPLATE, llama3_tokenizer_json

    folder = tmp_path / "llama3"
    folder.mkdir()
    llama3_tokenizer_json(folder / "tokenizer.json")
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
    (folder / ct.TOKENIZER_CONFIG).write_text(json.dumps(config))
    (folder / ct.JINJA_FILE).write_text(LLAMA3_TEMPLATE)
    tok = Tokenizer.from_hf_folder(folder)
    text = tok.decode(tok.apply_chat_template(HELLO), skip_special_tokens=False)
    assert text == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert tok.token_to_id("<|end|>") is None
    (folder / ct.JINJA_FILE).unlink()
    with pytest.raises(ct.ChatTemplateMissing, match="has no chat template") as err:
        Tokenizer.from_hf_folder(folder).apply_chat_template(HELLO)
    assert "<|end|>" not in str(err.value)
