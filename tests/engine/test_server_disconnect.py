"""Client disconnects free the request's sequence and KV blocks (streaming and not), seen through the
server's own /metrics and engine_requests.parquet; /metrics follows vLLM's names."""

import time

import httpx
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.server.launch import EngineProcess

ENGINE = {"model": "tiny", "max_num_seqs": 4, "kv_blocks": 256, "max_model_len": 2048}
LONG = {"prompt": "Tell me a long story.", "temperature": 0, "ignore_eos": True, "max_tokens": 2000}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with EngineProcess({"engine": ENGINE}, tmp_path_factory.mktemp("run")) as proc:
        yield proc


def _metrics(url: str) -> dict[str, float]:
    """sample name (+ sorted labels other than model_name) → value."""
    out = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=10).text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "model_name")
            out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return out


def _wait_idle(url: str, timeout_s: float = 20.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout_s
    while True:
        m = _metrics(url)
        if m["vllm:num_requests_running"] == 0 and m["vllm:kv_cache_usage_perc"] == 0:
            return m
        assert time.monotonic() < deadline, f"engine still busy after disconnect: {m}"
        time.sleep(0.05)


def _engine_request(server, request_id: str) -> dict:
    httpx.post(server.url + "/spikelens/flush", timeout=30)
    rows = pq.read_table(server.run_dir / "engine_requests.parquet").to_pylist()
    return next(r for r in rows if r["request_id"] == request_id)


def test_streaming_disconnect_aborts_and_frees_kv_blocks(server):
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        client.stream(
            "POST",
            "/v1/completions",
            json={**LONG, "stream": True},
            headers={"X-Request-Id": "gone-streaming"},
        ) as r,
    ):
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
        busy = _metrics(server.url)
        assert busy["vllm:num_requests_running"] == 1 and busy["vllm:kv_cache_usage_perc"] > 0
        # leaving the block closed the connection mid-stream
    m = _wait_idle(server.url)
    assert m["spikelens:requests_aborted_total"] >= 1
    row = _engine_request(server, "gone-streaming")
    assert row["finish_reason"] == "abort" and row["output_tokens"] < LONG["max_tokens"]


def test_non_streaming_disconnect_aborts_too(server):
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            server.url + "/v1/completions",
            json=LONG,
            headers={"X-Request-Id": "gone-blocking"},
            timeout=httpx.Timeout(60, read=0.5),
        )
    _wait_idle(server.url)
    row = _engine_request(server, "gone-blocking")
    assert row["finish_reason"] == "abort" and row["output_tokens"] < LONG["max_tokens"]


def test_metrics_count_requests_tokens_and_steps_with_vllm_names(server):
    before = _metrics(server.url)
    for i in range(3):
        r = httpx.post(
            server.url + "/v1/completions",
            timeout=60,
            json={"prompt": f"count {i}", "max_tokens": 4, "temperature": 0, "ignore_eos": True},
        )
        assert r.status_code == 200
    after = _metrics(server.url)

    def delta(name):
        return after[name] - before.get(name, 0.0)

    assert delta("vllm:generation_tokens_total") == 12
    assert delta("vllm:time_to_first_token_seconds_count") == 3
    assert delta("vllm:inter_token_latency_seconds_count") == 9
    assert delta("vllm:e2e_request_latency_seconds_count") == 3
    assert delta("vllm:request_success_total{finished_reason=length}") == 3
    assert delta("vllm:prompt_tokens_total") > 0
    steps = delta("spikelens:step_duration_seconds_count")
    assert steps >= 4  # three requests of 4 tokens, batched or not
    for stage in ("schedule", "forward", "penalty", "sample", "comm"):
        assert delta(f"spikelens:step_{stage}_seconds_count") == steps
    for name in (
        "vllm:num_requests_waiting",
        "vllm:gpu_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:time_per_output_token_seconds_count",
    ):
        assert name in after
