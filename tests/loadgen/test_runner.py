"""run_locust end to end against the no-op streaming server (real Locust subprocess).

Assertions are causal, never timing budgets: the client cannot see a chunk before the server
wrote it, and a request whose server waits `ttft_s` cannot have a shorter TTFT.
"""

import json
import socket
import sys
from collections import defaultdict

import psutil
import pyarrow.parquet as pq
import pytest

from loadgen.runner import LocustRunOptions, run_locust
from tests.support.sse_server import SSEServer, SSEServerConfig

FIXED = {
    "prompt_tokens": {"mean": 8, "min": 8, "max": 8},
    "output_tokens": {"mean": 5, "min": 5, "max": 5},
    "sampling": {"temperature": [0.5, 1.0]},
}


def read(run_dir):
    requests = pq.read_table(run_dir / "requests.parquet").to_pylist()
    tokens = pq.read_table(run_dir / "tokens.parquet").to_pylist()
    return requests, tokens


@pytest.mark.parametrize("read_mode", ["line", "byte"])
def test_every_request_and_chunk_is_recorded_with_ttft_from_the_first_content_chunk(
    tmp_path, read_mode
):
    ttft_s, itl_s = 0.15, 0.05
    calls = []
    with SSEServer(SSEServerConfig(ttft_s=ttft_s, itl_s=itl_s)) as server:
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                FIXED,
                {"shape": "constant", "users": 3},
                duration_s=1.5,
                warmup_s=0.5,
                seed=3,
                api_key="sk-test-123",
                read_mode=read_mode,
            ),
            on_load_start=calls.append,
        )
    requests, tokens = read(tmp_path)
    assert result.returncode == 0
    assert calls == [result.load_started_ns]
    assert result.requests_sent == len(requests) == result.requests_recorded > 0
    assert len({r["request_id"] for r in requests}) == len(requests)
    served = {s.request_id: s for s in server.served}
    assert set(served) == {r["request_id"] for r in requests}  # nothing sent went unrecorded
    assert {s.authorization for s in server.served} == {"Bearer sk-test-123"}
    assert "sk-test-123" not in (tmp_path / "loadgen" / "config.json").read_text()  # never on disk

    chunks = defaultdict(list)
    for t in tokens:
        chunks[t["request_id"]].append(t)
    for r in requests:
        assert r["phase"] == (
            "warmup" if r["intended_send_ns"] < result.load_started_ns else "measure"
        )
        assert r["status"] in ("ok", "cancelled")
        assert r["temperature"] in (0.5, 1.0) and r["max_tokens"] == 5
        mine = chunks[r["request_id"]]
        assert [c["index"] for c in mine] == list(range(len(mine))) == list(range(r["n_chunks"]))
        arrivals = [c["arrival_ns"] for c in mine]
        assert arrivals == sorted(arrivals)
        if r["status"] == "ok":
            s = served[r["request_id"]]
            assert r["output_tokens"] == 5 and r["token_count_source"] == "usage"
            assert r["prompt_tokens"] == 8 and r["finish_reason"] == "length"
            assert r["first_token_ns"] == arrivals[0] >= s.first_chunk_ns  # not the role chunk
            assert r["first_token_ns"] - r["sent_ns"] >= ttft_s * 1e9
            # TTFT is not the whole stream: the first token was seen before the server, 4 ITLs
            # (200 ms) later, wrote the end of the stream
            assert r["first_token_ns"] < s.done_ns <= r["done_ns"]
            assert r["sent_ns"] <= s.arrival_ns
    assert {r["phase"] for r in requests} == {"warmup", "measure"}
    assert (
        sum(r["status"] == "ok" for r in requests) >= len(requests) - 3
    )  # at most one per user cut


def test_requests_in_flight_at_the_stop_are_recorded_as_cancelled(tmp_path):
    with SSEServer(SSEServerConfig(ttft_s=0.05, itl_s=0.5)) as server:  # 5 chunks take >= 2 s
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                FIXED, {"shape": "constant", "users": 2}, duration_s=1.0, warmup_s=0.0
            ),
        )
    requests, tokens = read(tmp_path)
    assert result.requests_sent == len(requests) == 2 == result.requests_failed
    assert [r["status"] for r in requests] == ["cancelled", "cancelled"]
    assert all(
        r["done_ns"] >= r["sent_ns"] and r["output_tokens"] == r["n_chunks"] for r in requests
    )
    assert len(tokens) == sum(r["n_chunks"] for r in requests)
    assert len(server.served) == 2


def test_open_loop_streams_open_at_the_stop_are_cancelled_too(tmp_path):
    with SSEServer(SSEServerConfig(ttft_s=0.05, itl_s=0.5)) as server:  # a stream takes > 2 s
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(FIXED, {"shape": "open", "rate": 4.0}, duration_s=1.0),
        )
    requests, _ = read(tmp_path)
    assert result.requests_sent == len(requests) == len(server.served) == 4
    assert {r["status"] for r in requests} == {"cancelled"} and result.requests_failed == 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_errors_are_recorded_as_errors(tmp_path):
    result = run_locust(
        f"http://127.0.0.1:{free_port()}",
        tmp_path,
        LocustRunOptions(
            FIXED, {"shape": "constant", "users": 1, "think_time_s": 0.2}, duration_s=1.0
        ),
    )
    requests, _ = read(tmp_path)
    assert result.requests_sent == result.requests_failed == len(requests) > 0
    assert {r["status"] for r in requests} == {"error"}
    assert all(r["error"].startswith("connection:") and r["http_status"] == 0 for r in requests)


def test_http_errors_are_recorded_with_status_and_body(tmp_path):
    with SSEServer(SSEServerConfig(reject_model="nope")) as server:
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                FIXED,
                {"shape": "constant", "users": 1, "think_time_s": 0.2},
                duration_s=1.0,
                model_name="nope",
            ),
        )
    requests, tokens = read(tmp_path)
    assert result.requests_sent == result.requests_failed == len(requests) > 0 and tokens == []
    assert {(r["status"], r["http_status"]) for r in requests} == {("error", 400)}
    assert all(
        r["error"].startswith("HTTP 400:") and "is not served" in r["error"] for r in requests
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_a_run_that_is_mostly_errors_stops_early_and_says_why(tmp_path, workers):
    """One process, or a master whose worker trips the guard and asks it to stop them all."""
    from loadgen.error_guard import ErrorGuardConfig

    with SSEServer(SSEServerConfig(reject_model="nope")) as server:
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                FIXED,
                {"shape": "constant", "users": 2},
                duration_s=60.0,
                model_name="nope",
                workers=workers,
                error_guard=ErrorGuardConfig(min_requests=30, max_error_share=0.9),
            ),
        )
    requests, _ = read(tmp_path)
    verdict = result.stopped_early
    assert verdict is not None and verdict["requests"] >= 30 and verdict["error_share"] == 1.0
    assert verdict["reason"].startswith(
        f"100% of the first {verdict['requests']} requests failed: HTTP 400:"
    )
    assert "is not served" in verdict["reason"]
    ended_s = (max(r["done_ns"] for r in requests) - result.started_ns) / 1e9
    assert ended_s < 30, ended_s  # long before the 60 s the run asked for
    assert result.requests_sent == len(requests) >= 30


def test_an_interrupted_wait_kills_the_locust_group_and_keeps_what_was_measured(tmp_path):
    import time

    def explode(t0_ns):
        time.sleep(0.5)  # measured load is running: a burst window has opened
        raise KeyboardInterrupt  # as a signal raised in the waiting thread would

    before = set(psutil.Process().children(recursive=True))  # other tests' fixtures, if any
    with SSEServer(SSEServerConfig(itl_s=0.01)) as server, pytest.raises(KeyboardInterrupt):
        run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                FIXED,
                {"shape": "constant", "users": 1},
                duration_s=30,
                warmup_s=0.5,
                faults=[
                    {"kind": "load.burst", "start_s": 0.2, "duration_s": 10},
                    {"kind": "load.burst", "start_s": 20, "duration_s": 1},
                ],
            ),
            on_load_start=explode,
            preexec_fn=lambda: None,
        )
    assert set(psutil.Process().children(recursive=True)) - before == set()
    # what was measured before the failure is kept: Locust flushed on SIGTERM, the runner merged
    requests, _ = read(tmp_path)
    assert len(requests) == len(server.served) > 0
    assert {r["status"] for r in requests} <= {"ok", "cancelled"}
    windows = pq.read_table(tmp_path / "faults.loadgen.parquet").to_pylist()
    assert len(windows) == 1  # the burst that had started, clipped at the interruption
    assert windows[0]["end_ns"] - windows[0]["start_ns"] < 10 * 10**9


def test_the_runner_never_imports_locust_or_gevent():
    import subprocess
    import sys

    code = (
        "import sys, loadgen.runner, loadgen.spec, loadgen.recorder\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'locust', 'gevent'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_loadgen_faults_burst_users_and_switch_sampling_in_their_windows(tmp_path):
    workload = {**FIXED, "output_tokens": {"mean": 3, "min": 2, "max": 6}}
    faults = [
        {"kind": "load.burst", "start_s": 0.5, "duration_s": 1.0, "params": {"factor": 3}},
        {"kind": "penalty.repetition", "start_s": 1.0, "duration_s": 5.0},
    ]
    with SSEServer(SSEServerConfig(ttft_s=0.01, itl_s=0.01)) as server:
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                workload, {"shape": "constant", "users": 1}, duration_s=2.0, faults=faults
            ),
        )
    requests, _ = read(tmp_path)
    t0 = result.load_started_ns
    windows = pq.read_table(tmp_path / "faults.loadgen.parquet").to_pylist()
    assert [(w["kind"], w["start_ns"] - t0, w["end_ns"] - t0) for w in windows] == [
        ("load.burst", 500_000_000, 1_500_000_000),
        ("penalty.repetition", 1_000_000_000, 2_000_000_000),
    ]
    users_in_burst = {
        r["user"] for r in requests if t0 + 0.5e9 <= r["intended_send_ns"] < t0 + 1.5e9
    }
    users_before = {r["user"] for r in requests if r["intended_send_ns"] < t0 + 0.5e9}
    assert users_before == {"w0-u0"} and len(users_in_burst) == 3
    for r in requests:
        looped = r["intended_send_ns"] >= t0 + 1e9
        assert r["fault"] == ("penalty.repetition" if looped else None)
        if looped:
            assert (
                r["max_tokens"] == 6 and r["temperature"] == 0.0 and r["repetition_penalty"] == 1.0
            )


def test_heavy_traffic_penalises_a_share_of_the_window_in_the_open_loop(tmp_path):
    faults = [
        {
            "kind": "penalty.heavy_traffic",
            "start_s": 1.0,
            "duration_s": 1.0,
            "params": {"share": 0.5},
        }
    ]
    with SSEServer(SSEServerConfig(ttft_s=0.005, itl_s=0.005)) as server:
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                FIXED, {"shape": "constant", "rate": 40}, duration_s=2.0, faults=faults
            ),
        )
    requests, _ = read(tmp_path)
    t0 = result.load_started_ns
    inside = [r for r in requests if r["intended_send_ns"] >= t0 + 1e9]
    heavy = [r for r in inside if r["fault"] == "penalty.heavy_traffic"]
    assert all(r["fault"] is None for r in requests if r["intended_send_ns"] < t0 + 1e9)
    assert 0.2 < len(heavy) / len(inside) < 0.8
    assert all(r["frequency_penalty"] == 1.0 and r["repetition_penalty"] == 1.2 for r in heavy)
    window = pq.read_table(tmp_path / "faults.loadgen.parquet").to_pylist()
    assert [(w["kind"], w["cause"]) for w in window] == [("penalty.heavy_traffic", "penalty")]


def test_open_loop_sends_on_its_schedule_and_replay_repeats_the_run(tmp_path):
    from loadgen.arrivals import arrival_times
    from loadgen.spec import LoadSpec

    load = {"shape": "open", "rate": 20.0}
    with SSEServer(SSEServerConfig(ttft_s=0.01, itl_s=0.005)) as server:
        first = run_locust(
            server.url,
            tmp_path / "a",
            LocustRunOptions("smoke", load, duration_s=2.0, warmup_s=0.5),
        )
        replayed = run_locust(
            server.url,
            tmp_path / "b",
            LocustRunOptions(
                "smoke",
                {"shape": "replay", "trace": str(tmp_path / "a"), "speed": 2.0},
                duration_s=2.0,
            ),
        )
    a, _ = read(tmp_path / "a")
    schedule = list(arrival_times(LoadSpec(**load), 0.5, 2.0, seed=0))
    assert first.requests_sent == len(a) == len(schedule) == 50
    offsets = [r["intended_send_ns"] - first.started_ns for r in a]
    assert offsets == [int(t * 1e9) for t in schedule]  # intended = the schedule, not the sends
    assert all(r["sent_ns"] >= r["intended_send_ns"] for r in a)
    measured = [r for r in a if r["phase"] == "measure"]
    assert len(measured) / 2.0 == 20.0  # the target rate, exactly, for evenly spaced arrivals

    b, _ = read(tmp_path / "b")
    assert replayed.requests_sent == len(b) == len(a)
    assert [r["intended_send_ns"] - replayed.started_ns for r in b] == [o // 2 for o in offsets]
    assert [(r["prompt_tokens_target"], r["max_tokens"]) for r in b] == [
        (r["prompt_tokens_target"], r["max_tokens"]) for r in a
    ]


def test_distributed_workers_merge_every_sample_and_metrics_are_scraped(tmp_path):
    with SSEServer(SSEServerConfig(ttft_s=0.01, itl_s=0.005)) as server:
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(
                "smoke",
                {"shape": "poisson", "rate": 30.0},
                duration_s=1.5,
                warmup_s=0.5,
                workers=2,
                metrics_url=server.url + "/metrics",
                metrics_interval_s=0.25,
            ),
        )
    requests, tokens = read(tmp_path)
    assert result.requests_sent == len(requests) == len(server.served) > 0
    assert {r["worker"] for r in requests} == {"0", "1"}
    assert len(tokens) == sum(r["n_chunks"] for r in requests)
    assert result.metrics_rows > 0 and result.metrics_scrape_errors == 0
    assert pq.read_table(tmp_path / "metrics.parquet").num_rows == result.metrics_rows
    health = pq.read_table(tmp_path / "client_health.parquet").to_pylist()
    assert len({h["worker"] for h in health}) == 2 == len(result.client_health["workers"])
    assert result.client_valid == result.client_health["valid"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"host": "127.0.0.1:8000"}, "host must be an http(s):// URL"),
        ({"host": "https://api.example.com/v1/"}, "ends with /v1: give the server root"),
        ({"duration_s": 0}, "duration_s must be > 0"),
        ({"warmup_s": -1}, "warmup_s must be >= 0"),
        ({"workers": -1}, "workers must be an integer in [0, 256]"),
        (
            {"tokenizer_path": "/nonexistent/tokenizer.json"},
            "tokenizer_path /nonexistent/tokenizer.json",
        ),
        ({"load": {"shape": "replay", "trace": "/nonexistent/run"}}, "/nonexistent/run"),
        (
            {"workload": {"source": "jsonl", "path": "/nonexistent.jsonl"}},
            "/nonexistent.jsonl: no such file",
        ),
        (
            {"faults": [{"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {"x": 1}}]},
            "faults[0].params: unknown key 'x'",
        ),
        (
            {"faults": [{"kind": "memory.gc_storm", "start_s": 0, "duration_s": 1}]},
            "faults[0].kind: loadgen does not apply 'memory.gc_storm'",
        ),
    ],
)
def test_bad_arguments_fail_before_locust_starts(tmp_path, kwargs, message):
    from loadgen.errors import SpecError

    host = kwargs.pop("host", "http://127.0.0.1:9")
    options = {
        "workload": FIXED,
        "load": {"shape": "constant", "users": 1},
        "duration_s": 1.0,
        **kwargs,
    }
    with pytest.raises(SpecError) as err:
        run_locust(host, tmp_path, LocustRunOptions(**options))
    assert message in str(err.value)
    assert not (tmp_path / "loadgen" / "locust.log").exists()  # nothing was started


def test_the_warmup_verdict_is_reported_once_every_users_process_said_it(tmp_path):
    """Each Locust process prints WARMUP_MARKER <summary> as measured load starts; the reader
    calls back once it has one line per users' process (a master prints none)."""
    import json

    from loadgen.client_health import WARMUP_MARKER
    from loadgen.runner import _OutputReader

    seen = []
    reader = _OutputReader(tmp_path / "locust.log", keep=10)
    reader.expect_warmup(2, seen.append)
    calm = {"worker": "p1", "cpu_percent": 10.0, "lag_p99_ms": 1.0}
    reader._warmup_line(json.dumps(calm))
    assert seen == []
    reader._warmup_line(json.dumps({**calm, "worker": "p2", "lag_p99_ms": 70.0}))
    assert len(seen) == 1 and seen[0]["valid"] is False
    assert "client p2 scheduling lag p99 70.0 ms" in seen[0]["message"]
    short = _OutputReader(tmp_path / "short.log", keep=10)
    short.expect_warmup(1, seen.append)
    short._warmup_line("null")  # a warm-up too short to judge: no call
    assert len(seen) == 1 and WARMUP_MARKER.isupper()
    reader.log.close()
    short.log.close()


def test_a_run_with_a_warmup_reports_its_client_health_as_load_starts(tmp_path):
    verdicts = []
    with SSEServer(SSEServerConfig(ttft_s=0.05, itl_s=0.02)) as server:
        result = run_locust(
            server.url,
            tmp_path,
            LocustRunOptions(FIXED, {"shape": "constant", "users": 2}, 1.0, warmup_s=2.5),
            on_warmup_health=verdicts.append,
        )
    assert result.returncode == 0 and len(verdicts) == 1
    assert verdicts[0]["workers"][0]["seconds"] >= 1
    assert set(verdicts[0]) == {"valid", "reasons", "workers", "message"}


def test_the_stop_verdict_is_the_first_line_that_parses(tmp_path):
    """A worker's line broken by another process's output is not the verdict; the master's
    whole line after it is. Only while none parses does the text stand in as the reason."""
    import subprocess

    from loadgen.error_guard import STOP_MARKER
    from loadgen.runner import _OutputReader

    verdict = {"requests": 30, "failed": 30, "error_share": 1.0, "reason": "100% failed"}
    lines = [
        f'{STOP_MARKER} {{"requests": 30, "fail[2024-01-01 worker] log\n',
        f"{STOP_MARKER} {json.dumps(verdict)}\n",
        f'{STOP_MARKER} {{"requests": 99}}\n',
    ]
    script = "import sys; sys.stdout.write(sys.argv[1])"
    for shown, expected in (
        (lines[:1], {"reason": lines[0][len(STOP_MARKER) :].strip()}),
        (lines, verdict),
    ):
        reader = _OutputReader(tmp_path / "locust.log", keep=10)
        proc = subprocess.Popen(
            [sys.executable, "-c", script, "".join(shown)], stdout=subprocess.PIPE
        )
        reader.follow(proc)
        proc.wait()
        assert reader.thread is not None
        reader.thread.join(10)
        assert reader.stopped_early == expected
