"""The official ``openai`` Python client talks to the server unchanged (streaming and not)."""

import openai
import pytest

from engine.server.launch import EngineProcess

ENGINE = {"model": "tiny", "max_num_seqs": 4, "kv_blocks": 64, "max_model_len": 256}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with EngineProcess({"engine": ENGINE}, tmp_path_factory.mktemp("run")) as proc:
        yield openai.OpenAI(base_url=proc.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_models_list(client):
    assert [m.id for m in client.models.list()] == ["spikelens"]


def test_openai_client_streams_a_chat_completion_with_usage(client):
    stream = client.chat.completions.create(
        model="spikelens",
        messages=[{"role": "user", "content": "Hello there"}],
        max_completion_tokens=5,
        temperature=0.7,
        top_p=0.9,
        seed=3,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "top_k": 50, "repetition_penalty": 1.1},
    )
    chunks = list(stream)
    content = [c for c in chunks if c.choices]
    assert len(content) == 5 and content[0].choices[0].delta.role == "assistant"
    assert content[-1].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 5 and chunks[-1].choices == []
    assert all(isinstance(c.choices[0].delta.content, str) for c in content)


def test_openai_client_streamed_chat_text_equals_the_non_streamed_text(client):
    request = dict(
        model="spikelens",
        messages=[{"role": "user", "content": "Hello there"}],
        max_tokens=6,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(stream=True, **request)
        if c.choices
    )
    full = client.chat.completions.create(**request)
    assert full.choices[0].message.content == streamed and full.usage.completion_tokens == 6


def test_openai_client_streams_a_completion(client):
    chunks = list(
        client.completions.create(
            model="spikelens",
            prompt="Once upon",
            max_tokens=4,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
        )
    )
    assert len(chunks) == 4 and chunks[-1].choices[0].finish_reason == "length"
    full = client.completions.create(
        model="spikelens",
        prompt="Once upon",
        max_tokens=4,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    assert "".join(c.choices[0].text for c in chunks) == full.choices[0].text


def test_openai_client_sees_a_bad_request_error_naming_the_field(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="spikelens", messages=[{"role": "user", "content": "x"}], temperature=-1
        )
    assert info.value.param == "temperature" and "temperature" in info.value.message


def test_openai_client_seeded_sampling_is_reproducible_streamed_or_not(client):
    request = dict(
        model="spikelens",
        messages=[{"role": "user", "content": "Hello there"}],
        max_tokens=6,
        temperature=0.9,
        top_p=0.95,
        seed=11,
        frequency_penalty=0.5,
        extra_body={"ignore_eos": True, "top_k": 100, "min_p": 0.01, "repetition_penalty": 1.1},
    )
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(stream=True, **request)
        if c.choices
    )
    assert client.chat.completions.create(**request).choices[0].message.content == streamed
