"""Request parsing and validation: every bad input is a 400 that names its field; unknown fields pass."""

import json

import pytest

from engine.sampling_params import SamplingParams
from engine.server.errors import APIError
from engine.server.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    parse_request,
    to_sampling_params,
)

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def _chat(**fields) -> bytes:
    return json.dumps({**CHAT, **fields}).encode()


def _error(fn, *args) -> APIError:
    with pytest.raises(APIError) as info:
        fn(*args)
    assert info.value.status == 400
    assert info.value.body()["error"]["type"] == "invalid_request_error"
    return info.value


def test_unknown_fields_are_ignored_and_vllm_fields_accepted():
    req = parse_request(
        _chat(
            logprobs=True,
            tools=[],
            response_format={"type": "text"},
            top_k=5,
            min_p=0.1,
            repetition_penalty=1.1,
            ignore_eos=True,
            seed=7,
            user="u",
            stream=True,
            stream_options={"include_usage": True},
        ),
        ChatCompletionRequest,
    )
    assert req.include_usage
    params = to_sampling_params(req, prompt_len=10, max_model_len=100, prompt_field="messages")
    assert params == SamplingParams(
        top_k=5, min_p=0.1, repetition_penalty=1.1, ignore_eos=True, seed=7, max_tokens=90
    )


@pytest.mark.parametrize(
    "field,value",
    [
        ("temperature", -1),
        ("frequency_penalty", 3),
        ("top_p", 0),
        ("max_tokens", 0),
        ("presence_penalty", -2.5),
        ("top_k", -2),
    ],
)
def test_out_of_range_values_name_the_field_and_range(field, value):
    req = parse_request(_chat(**{field: value}), ChatCompletionRequest)
    err = _error(to_sampling_params, req, 10, 100, "messages")
    assert err.param == field
    assert field in err.message and (
        "[" in err.message or "(" in err.message or ">=" in err.message
    )


def test_max_completion_tokens_errors_name_that_field():
    req = parse_request(_chat(max_completion_tokens=0, max_tokens=5), ChatCompletionRequest)
    assert _error(to_sampling_params, req, 10, 100, "messages").param == "max_completion_tokens"


def test_max_tokens_beyond_the_context_is_rejected_with_the_room_left():
    req = parse_request(_chat(max_tokens=91), ChatCompletionRequest)
    err = _error(to_sampling_params, req, 10, 100, "messages")
    assert err.param == "max_tokens" and "[1, 90]" in err.message
    assert (
        to_sampling_params(
            parse_request(_chat(max_tokens=90), ChatCompletionRequest), 10, 100, "messages"
        ).max_tokens
        == 90
    )


def test_prompt_filling_the_context_names_the_prompt_field():
    req = parse_request(json.dumps({"prompt": "x"}).encode(), CompletionRequest)
    assert _error(to_sampling_params, req, 100, 100, "prompt").param == "prompt"


def test_completion_max_tokens_defaults_to_16_and_chat_to_the_rest_of_the_context():
    comp = parse_request(json.dumps({"prompt": "x"}).encode(), CompletionRequest)
    assert to_sampling_params(comp, 10, 100, "prompt").max_tokens == 16
    chat = parse_request(_chat(), ChatCompletionRequest)
    assert to_sampling_params(chat, 10, 100, "messages").max_tokens == 90


def test_n_other_than_one_is_rejected():
    req = parse_request(_chat(n=2), ChatCompletionRequest)
    assert _error(to_sampling_params, req, 10, 100, "messages").param == "n"


@pytest.mark.parametrize(
    "body,param",
    [
        (b"{not json", "body"),
        (b"[1, 2]", "body"),
        (json.dumps({"model": "m"}).encode(), "messages"),
        (json.dumps({"messages": []}).encode(), "messages"),
        (json.dumps({"messages": [{"content": "hi"}]}).encode(), "messages"),
        (_chat(temperature="hot"), "temperature"),
        (_chat(max_tokens=1.5), "max_tokens"),
    ],
)
def test_malformed_bodies_name_the_field(body, param):
    err = _error(parse_request, body, ChatCompletionRequest)
    assert err.param == param and err.message.startswith(
        param if param != "messages" else "messages"
    )


def test_missing_messages_message_says_what_is_required():
    err = _error(parse_request, json.dumps({"model": "m"}).encode(), ChatCompletionRequest)
    assert "messages" in err.message and "required" in err.message


def test_completion_prompt_forms():
    def prompt(p):
        return parse_request(json.dumps({"prompt": p}).encode(), CompletionRequest).single_prompt()

    assert prompt("hello") == "hello"
    assert prompt([1, 2, 3]) == [1, 2, 3]
    assert prompt(["hello"]) == "hello"
    assert prompt([[4, 5]]) == [4, 5]
    assert _error(prompt, ["a", "b"]).param == "prompt"
    assert (
        _error(parse_request, json.dumps({"max_tokens": 3}).encode(), CompletionRequest).param
        == "prompt"
    )


def test_chat_content_parts_and_roles():
    req = parse_request(
        json.dumps(
            {
                "messages": [
                    {"role": "developer", "content": "be brief"},
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    },
                ]
            }
        ).encode(),
        ChatCompletionRequest,
    )
    assert req.message_dicts() == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "ab"},
    ]
    image = parse_request(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            }
        ).encode(),
        ChatCompletionRequest,
    )
    assert _error(image.message_dicts).param == "messages"


def test_stop_strings_forms():
    assert parse_request(_chat(stop="\n"), ChatCompletionRequest).stop_strings() == ["\n"]
    assert parse_request(_chat(stop=["a", ""]), ChatCompletionRequest).stop_strings() == ["a"]
    assert parse_request(_chat(), ChatCompletionRequest).stop_strings() == []


@pytest.mark.parametrize(
    "field,value",
    [
        ("temperature", "0.5"),
        ("max_tokens", "16"),
        ("ignore_eos", 0),
        ("stream", "yes"),
        ("seed", 1.5),
    ],
)
def test_types_are_strict_as_the_schema_says(field, value):
    """A string is not a number and 0 is not false (the published schema's types); ints are floats."""
    err = _error(parse_request, _chat(**{field: value}), ChatCompletionRequest)
    assert err.param == field
    assert parse_request(_chat(temperature=1), ChatCompletionRequest).temperature == 1


def test_seed_range_and_an_oversized_integer_are_400s():
    req = parse_request(_chat(seed=2**63), ChatCompletionRequest)
    err = _error(to_sampling_params, req, 5, 64, "messages")
    assert err.param == "seed" and "[-9223372036854775808, 9223372036854775807]" in err.message
    err = _error(
        parse_request, b'{"prompt": "x", "seed": 1' + b"0" * 5000 + b"}", CompletionRequest
    )
    assert err.param == "body"
