"""The real server process (tiny model) over HTTP: both endpoints streaming and not, usage,
validation errors that name the field while the server keeps serving, control routes, SIGTERM."""

import json

import httpx
import pytest

from engine.server.launch import EngineProcess
from engine.tokenizer import Tokenizer

ENGINE = {"model": "tiny", "max_num_seqs": 8, "kv_blocks": 128, "max_model_len": 256}
CHAT = {"model": "spikelens", "messages": [{"role": "user", "content": "Say something."}]}
GREEDY = {"temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = EngineProcess(
        {"run_id": "test-server", "engine": ENGINE}, tmp_path_factory.mktemp("run")
    )
    with proc:
        yield proc


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def _sse_events(response: httpx.Response) -> list:
    """Parsed ``data:`` payloads of an SSE response; ``[DONE]`` kept as the string."""
    events = []
    for block in response.text.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def test_health_and_models(client):
    assert client.get("/health").json() == {"status": "ok"}
    models = client.get("/v1/models").json()
    assert models["data"][0]["id"] == "spikelens" and models["data"][0]["max_model_len"] == 256


def test_chat_non_streaming_usage_and_request_id(client):
    r = client.post(
        "/v1/chat/completions",
        json={**CHAT, **GREEDY, "max_tokens": 7},
        headers={"X-Request-Id": "req-chat-1"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert r.headers["x-request-id"] == "req-chat-1" and body["id"] == "chatcmpl-req-chat-1"
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and isinstance(
        choice["message"]["content"], str
    )
    assert choice["finish_reason"] == "length"
    prompt_tokens = len(Tokenizer.default().apply_chat_template(CHAT["messages"]))
    assert body["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 7,
        "total_tokens": prompt_tokens + 7,
    }


def test_chat_streaming_one_chunk_per_token_then_usage_then_done(client):
    req = {
        **CHAT,
        **GREEDY,
        "max_tokens": 6,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    r = client.post("/v1/chat/completions", json=req)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _sse_events(r)
    assert events[-1] == "[DONE]"
    usage_chunk, chunks = events[-2], events[:-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 6
    assert len(chunks) == 6  # ignore_eos + decode: one token per step, one chunk per step
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" and c["usage"] is None for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 5 + ["length"]
    streamed = "".join(c["choices"][0]["delta"]["content"] for c in chunks)
    full = client.post("/v1/chat/completions", json={**CHAT, **GREEDY, "max_tokens": 6}).json()
    assert streamed == full["choices"][0]["message"]["content"]  # greedy: same text both ways


def test_completion_streaming_and_not(client):
    req = {"model": "spikelens", "prompt": "Once upon a time", **GREEDY, "max_tokens": 5}
    full = client.post("/v1/completions", json=req).json()
    assert full["object"] == "text_completion" and full["usage"]["completion_tokens"] == 5
    assert full["usage"]["prompt_tokens"] == len(
        Tokenizer.default().encode("Once upon a time", add_bos=True)
    )
    r = client.post("/v1/completions", json={**req, "stream": True})
    events = _sse_events(r)
    assert events[-1] == "[DONE]" and len(events) == 6 and "usage" not in events[0]
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == full["choices"][0]["text"]
    assert events[-2]["choices"][0]["finish_reason"] == "length"


def test_continuous_usage_stats_put_the_running_usage_on_every_chunk(client):
    req = {
        "prompt": "count",
        **GREEDY,
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    events = _sse_events(client.post("/v1/completions", json=req))
    chunks = [e for e in events[:-1] if e["choices"]]
    assert [c["usage"]["completion_tokens"] for c in chunks] == [1, 2, 3, 4]
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 4


def test_completion_accepts_token_ids_and_rejects_ids_outside_the_vocabulary(client):
    body = client.post(
        "/v1/completions", json={"prompt": [1, 50, 60, 70], "max_tokens": 2, **GREEDY}
    ).json()
    assert body["usage"]["prompt_tokens"] == 4 and body["usage"]["completion_tokens"] == 2
    bad = client.post("/v1/completions", json={"prompt": [1, 10**9], "max_tokens": 2})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "prompt"


def test_stop_string_truncates_the_output(client):
    req = {"prompt": "The", **GREEDY, "max_tokens": 16}
    text = client.post("/v1/completions", json=req).json()["choices"][0]["text"]
    stop = text[6:8]
    if not stop.strip():
        pytest.skip(f"greedy text {text!r} has no usable stop string at [6:8]")
    body = client.post("/v1/completions", json={**req, "stop": [stop]}).json()
    assert body["choices"][0]["text"] == text[: text.find(stop)]
    assert body["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    "fields,param",
    [
        ({"temperature": -1}, "temperature"),
        ({"frequency_penalty": 3}, "frequency_penalty"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 10_000}, "max_tokens"),
        ({"messages": None}, "messages"),
        ({"n": 3}, "n"),
    ],
)
def test_invalid_input_is_400_naming_the_field_and_the_server_keeps_serving(client, fields, param):
    body = {k: v for k, v in {**CHAT, **fields}.items() if v is not None}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert (
        err["param"] == param and param in err["message"] and err["type"] == "invalid_request_error"
    )
    assert err["code"] == 400
    ok = client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 1})
    assert ok.status_code == 200


def test_malformed_json_is_400_naming_the_body(client):
    r = client.post(
        "/v1/chat/completions",
        content=b'{"messages": [',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"
    assert client.get("/health").status_code == 200


def test_unknown_fields_are_ignored(client):
    r = client.post(
        "/v1/chat/completions",
        json={
            **CHAT,
            "max_tokens": 2,
            "logprobs": True,
            "top_logprobs": 3,
            "tools": [],
            "some_future_field": {"x": 1},
        },
    )
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 2


def test_oversized_body_is_413(client):
    r = client.post(
        "/v1/completions",
        content=b"x" * ((1 << 20) + 1),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413 and r.json()["error"]["param"] == "body"


def test_arm_validates_t0_and_flush_writes_files(client, server):
    assert client.post("/spikelens/arm", json={"t0_ns": -5}).json()["error"]["param"] == "t0_ns"
    assert (
        client.post("/spikelens/arm", json={"t0_ns": 1_700_000_000_000_000_000}).status_code == 200
    )
    files = client.post("/spikelens/flush").json()["files"]
    assert {"steps.parquet", "engine_requests.parquet", "server_requests.parquet"} <= {
        f.rsplit("/", 1)[-1] for f in files
    }
    assert (server.run_dir / "steps.parquet").exists()


def _kernel_stamps() -> bool:
    from spikelens_common.socket_clock import keep_stamping_on

    hold = keep_stamping_on()
    hold.close()
    return hold.on


def test_sigterm_flushes_telemetry_and_exits_zero(tmp_path):
    import pyarrow.parquet as pq

    proc = EngineProcess({"engine": ENGINE}, tmp_path).start()
    try:
        r = httpx.post(
            proc.url + "/v1/completions",
            json={"prompt": "hi", "max_tokens": 3, **GREEDY},
            headers={"X-Request-Id": "before-sigterm"},
            timeout=60,
        )
        assert r.status_code == 200
    finally:
        assert proc.stop() == 0, proc.log_tail()
    steps = pq.read_table(tmp_path / "steps.parquet")
    requests = pq.read_table(tmp_path / "engine_requests.parquet").to_pylist()
    assert steps.num_rows >= 3
    assert [r["request_id"] for r in requests] == ["before-sigterm"] and requests[0][
        "output_tokens"
    ] == 3
    # the socket-side times bracket the engine's own: received before admission, content and end
    # handed to the socket after the engine step that produced them
    [wire] = pq.read_table(tmp_path / "server_requests.parquet").to_pylist()
    engine = requests[0]
    assert wire["request_id"] == "before-sigterm" and wire["status"] == 200 and not wire["streamed"]
    assert wire["received_ns"] <= engine["arrival_ns"]
    # the kernel's receive time, read with the request's bytes (where the kernel stamps packets)
    assert wire["received_clock"] == ("kernel" if _kernel_stamps() else "loop")
    assert (
        engine["first_token_ns"] <= wire["first_content_ns"]
        and engine["done_ns"] <= wire["done_ns"]
    )


def test_sigterm_with_an_open_stream_ends_it_in_band_and_logs_the_abort(tmp_path):
    import threading

    import pyarrow.parquet as pq

    config = {
        "engine": {**ENGINE, "max_model_len": 2048, "kv_blocks": 256},
        "server": {"graceful_shutdown_s": 0.5},
    }
    proc = EngineProcess(config, tmp_path).start()
    first_chunk = threading.Event()
    lines: list[str] = []

    def read_stream():
        body = {"prompt": "go on", "max_tokens": 2000, **GREEDY, "stream": True}
        with httpx.stream(
            "POST",
            proc.url + "/v1/completions",
            json=body,
            timeout=60,
            headers={"X-Request-Id": "open-at-sigterm"},
        ) as r:
            for line in r.iter_lines():
                lines.append(line)
                first_chunk.set()

    reader = threading.Thread(target=read_stream)
    reader.start()
    try:
        assert first_chunk.wait(60)
    finally:
        assert proc.stop() == 0, proc.log_tail()
        reader.join(60)
    events = [line for line in lines if line]
    assert events[-1] == "data: [DONE]"  # a complete response, not a cut connection
    assert json.loads(events[-2][len("data: ") :])["error"]["code"] == 503
    assert "Traceback" not in proc.log_tail()
    rows = pq.read_table(tmp_path / "engine_requests.parquet").to_pylist()
    assert [(r["request_id"], r["finish_reason"]) for r in rows] == [("open-at-sigterm", "abort")]


def test_a_checkpoint_without_a_chat_template_answers_chat_400_naming_both_ways_out(
    hf_llama_256, tmp_path
):
    """The OpenAI error shape, no param (the request is not at fault), the two fixes named;
    completions still serve, and the start-up log says so before any request."""
    from tests.support.hf_llama import with_template_in

    folder = with_template_in(hf_llama_256, tmp_path / "no-template", None)
    engine = {"model": str(folder), "max_num_seqs": 2, "kv_blocks": 32}
    with EngineProcess({"engine": engine}, tmp_path / "run") as proc:
        r = httpx.post(proc.url + "/v1/chat/completions", json={**CHAT, "max_tokens": 2})
        completion = httpx.post(proc.url + "/v1/completions", json={"prompt": "Hi", **GREEDY})
        log = proc.log_tail()
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", None, 400)
    assert "has no chat template" in error["message"] and str(folder) in error["message"]
    assert "Add chat_template.jinja to the checkpoint" in error["message"]
    assert "--chat-template FILE|TEMPLATE" in error["message"]
    assert "<|end|>" not in error["message"]  # no built-in template's token stood in
    assert completion.status_code == 200, completion.text
    assert "no chat template: chat requests will be answered 400" in log
