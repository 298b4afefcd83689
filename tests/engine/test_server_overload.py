"""At 3x the load the server can hold it stays up, sheds the excess with 429 + Retry-After, and the
requests it admits keep a bounded latency (measured in engine steps, so the bound holds on any machine)."""

import asyncio
import json

import httpx
import pyarrow.parquet as pq
import pytest

from engine.server.launch import EngineProcess

MAX_NUM_SEQS, MAX_WAITING, MAX_TOKENS = 2, 2, 8
CAPACITY = MAX_NUM_SEQS + MAX_WAITING  # requests open at once before the server sheds
CLIENTS = 3 * CAPACITY
REQUESTS_PER_CLIENT = 4


@pytest.fixture(scope="module")
def overloaded_run(tmp_path_factory):
    config = {
        "engine": {
            "model": "tiny",
            "max_num_seqs": MAX_NUM_SEQS,
            "kv_blocks": 64,
            "max_model_len": 256,
        },
        "server": {"max_waiting": MAX_WAITING, "retry_after_s": 1},
    }
    proc = EngineProcess(config, tmp_path_factory.mktemp("run"))
    with proc:
        results = asyncio.run(_closed_loop(proc.url))
        health = httpx.get(proc.url + "/health", timeout=10).status_code
    assert proc.returncode == 0, proc.log_tail()
    return proc.run_dir, results, health


async def _closed_loop(url: str) -> list[dict]:
    """CLIENTS users, each sending REQUESTS_PER_CLIENT streaming requests back to back (a shed one
    counts as sent: the user moves on, as a load generator does)."""
    results = []
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def user(u: int):
            for i in range(REQUESTS_PER_CLIENT):
                rid = f"u{u}-{i}"
                body = {
                    "prompt": f"user {u} asks {i}",
                    "max_tokens": MAX_TOKENS,
                    "temperature": 0,
                    "ignore_eos": True,
                    "stream": True,
                }
                async with client.stream(
                    "POST", "/v1/completions", json=body, headers={"X-Request-Id": rid}
                ) as r:
                    text = (await r.aread()).decode()
                chunks = [b for b in text.split("\n\n") if b.startswith("data: {")]
                results.append(
                    {
                        "id": rid,
                        "status": r.status_code,
                        "retry_after": r.headers.get("retry-after"),
                        "chunks": len(chunks),
                        "body": text if r.status_code != 200 else None,
                    }
                )

        await asyncio.gather(*(user(u) for u in range(CLIENTS)))
    return results


def test_server_stays_up_and_sheds_with_429_and_retry_after(overloaded_run):
    _, results, health = overloaded_run
    assert health == 200
    statuses = {r["status"] for r in results}
    assert statuses <= {200, 429}, statuses
    shed = [r for r in results if r["status"] == 429]
    assert shed, "3x the capacity must shed some requests"
    for r in shed:
        assert r["retry_after"] == "1"
        assert json.loads(r["body"])["error"]["type"] == "rate_limit_error"
    admitted = [r for r in results if r["status"] == 200]
    assert admitted and all(r["chunks"] == MAX_TOKENS for r in admitted)


def test_admitted_requests_have_bounded_queueing_and_latency(overloaded_run):
    run_dir, results, _ = overloaded_run
    steps = pq.read_table(run_dir / "steps.parquet").to_pylist()
    requests = pq.read_table(run_dir / "engine_requests.parquet").to_pylist()
    admitted = {r["id"] for r in results if r["status"] == 200}
    assert {r["request_id"] for r in requests} == admitted  # shed requests never reached the engine
    assert max(s["waiting"] for s in steps) <= MAX_WAITING
    assert max(s["batch_size"] for s in steps) <= MAX_NUM_SEQS
    # An admitted request (arrival_ns = admission) has at most CAPACITY - 1 requests ahead of it, each
    # MAX_TOKENS steps long, run MAX_NUM_SEQS at a time: its life spans at most this many engine steps,
    # +1 for the step that may run before the engine thread drains the add, +1 for its own prefill.
    bound = -(-CAPACITY // MAX_NUM_SEQS) * MAX_TOKENS + 2
    spans = sorted(
        sum(1 for s in steps if r["arrival_ns"] <= s["start_ns"] and s["end_ns"] <= r["done_ns"])
        for r in requests
    )
    assert spans[-1] <= bound, (spans, bound)
