"""Prompt files: JSONL and ShareGPT entries, and errors naming file, line and field."""

import json
import random

import pytest

from loadgen.errors import InputFileError
from loadgen.prompts import PromptBuilder
from loadgen.request_plan import RequestFactory
from loadgen.sources import load_prompt_file
from loadgen.spec import WorkloadSpec


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_jsonl_prompts_messages_and_output_lengths(tmp_path):
    path = write(
        tmp_path,
        "w.jsonl",
        "\n".join(
            [
                json.dumps({"prompt": "tell me a story", "output_tokens": 12}),
                "",
                json.dumps(
                    {
                        "messages": [
                            {"role": "system", "content": "be brief"},
                            {"role": "user", "content": "first"},
                            {"role": "assistant", "content": "ok"},
                            {"role": "user", "content": "second question"},
                        ]
                    }
                ),
            ]
        ),
    )
    entries = load_prompt_file(path, "jsonl")
    assert [(e.text, e.output_tokens, e.line) for e in entries] == [
        ("tell me a story", 12, 1),
        ("second question", None, 3),
    ]


def test_sharegpt_array_takes_first_human_turn_and_reply_length(tmp_path):
    data = [
        {
            "id": "a",
            "conversations": [
                {"from": "human", "value": "why is the sky blue"},
                {"from": "gpt", "value": "because of Rayleigh scattering of light"},
            ],
        },
        {
            "id": "b",
            "conversations": [{"from": "human", "value": "only a question"}],
        },  # no reply: skipped
    ]
    path = write(tmp_path, "sg.json", json.dumps(data, indent=2))
    entries = load_prompt_file(path, "sharegpt")
    assert len(entries) == 1 and entries[0].text == "why is the sky blue" and entries[0].line == 2
    workload = WorkloadSpec.from_dict({"source": "sharegpt", "path": str(path)})
    factory = RequestFactory(workload, PromptBuilder(), model_name="m", seed=0, id_prefix="r")
    plan = factory.plan(random.Random(0), "x")
    assert plan.body["messages"][0]["content"] == "why is the sky blue"
    assert plan.prompt_tokens_target == 5 and plan.max_tokens == 6  # words of prompt and reply


@pytest.mark.parametrize(
    "name, text, source, where",
    [
        (
            "a.jsonl",
            '{"prompt": "ok"}\n{"prompt": "x", "colour": 1}\n',
            "jsonl",
            "a.jsonl:2: field 'colour'",
        ),
        ("b.jsonl", '{"prompt": "ok"}\n\n{"prompt": \n', "jsonl", "b.jsonl:3: invalid JSON"),
        (
            "c.jsonl",
            '{"prompt": ""}\n',
            "jsonl",
            "c.jsonl:1: field 'prompt': must be a non-empty string",
        ),
        (
            "d.jsonl",
            '{"prompt": "a", "output_tokens": 0}\n',
            "jsonl",
            "d.jsonl:1: field 'output_tokens'",
        ),
        (
            "e.jsonl",
            '{"messages": [{"role": "robot", "content": "a"}]}\n',
            "jsonl",
            "e.jsonl:1: field 'messages[0].role'",
        ),
        ("f.jsonl", "[1, 2]\n", "jsonl", "f.jsonl:1: expected an object"),
        (
            "g.json",
            '[\n {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},\n'
            ' {"conversations": [{"from": "human"}]}\n]',
            "sharegpt",
            "g.json:3: field 'conversations[0].value'",
        ),
        (
            "h.json",
            '[\n {"conversations": []}\n {"conversations": []}\n]',
            "sharegpt",
            "h.json:3: expected ',' or ']'",
        ),
        ("i.json", "[]", "sharegpt", "i.json: no usable sharegpt entries"),
    ],
)
def test_bad_files_name_file_line_and_field(tmp_path, name, text, source, where):
    path = write(tmp_path, name, text)
    with pytest.raises(InputFileError) as err:
        load_prompt_file(path, source)
    assert str(err.value).startswith(str(tmp_path / where)), str(err.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(InputFileError, match="nope.jsonl: no such file"):
        load_prompt_file(tmp_path / "nope.jsonl", "jsonl")
