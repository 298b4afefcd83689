"""loadgen's TTFT and E2E against the real engine's own timestamps at 64
concurrent streams — p99 of |client − server| ≤ 2 ms, or the run is flagged invalid by client
health and the test shows why. Slow (starts the engine): marked e2e.

The comparison is per request: client TTFT = first content chunk − sent_ns; server TTFT =
server_requests.first_content_ns − received_ns, the server's socket-side times
(engine/server/wire_clock.py), and the same for E2E with done_ns. The server's first-text time
is the write's system call, from its start to its return (first_content_sent_ns): on loopback
the client's socket had the bytes in between, and a server thread preempted in the call widens
it. A fresh-clone CI run on a busier box failed the bound against the call's start alone (TTFT
p99 3.76 ms, client healthy); with two CPU hogs beside the test here the same comparison gave
3.07 ms while the call itself took p99 4.85 ms, and the client's TTFT lay outside the call by
p99 0.05 ms: the reference's error, not the client's. Both ends take their times
from the socket: the client stamps its send inside sendall and each arrival with the kernel's
receive time (loadgen/timed_socket.py), the server a request's arrival with the kernel's receive
time and its writes when the send system call began. Measured here: TTFT |diff| p99 0.08-0.09 ms,
E2E 0.06-0.08 ms on a quiet box (1.1-1.3 ms with another CI job on the 2 cores), while the
client's own read delay (how late it read the data) was p99 19 ms and the server loop's read came
p99 76 ms late — errors that read-time stamps carried into every figure before. A failure splits the difference
into its legs (send → server received, server wrote first text → client's socket had it).

One error no stamp can undo: a client that reads late finds the first content and a later packet
in one read, merged by the kernel under the later packet's receive time (arrival_clock 'merged').
A full-suite CI run showed its pattern (TTFT |diff| p99 5.7 ms, E2E 0.06 ms, lag p99 9.8 ms, a valid
run); with a CPU hog beside this test the outliers were exactly those first
tokens (4.1 % of them: p99 3.96 ms over all pairs, 0.05 ms over the others). Client health now
flags a run with over 1 % of its first tokens known only to > 1 ms that way
(loadgen/timed_socket.py line_arrival).
"""

import pyarrow.parquet as pq
import pytest

from loadgen.client_health import percentile
from loadgen.runner import LocustRunOptions, run_locust

pytestmark = pytest.mark.e2e

STREAMS = 64
WORKLOAD = {
    "prompt_tokens": {"mean": 32, "min": 32, "max": 32},
    "output_tokens": {"mean": 8, "min": 8, "max": 8},
    "sampling": {"temperature": 0.0},
}  # greedy keeps a 64-wide step cheap on 2 cores


def outside_write(client: dict, server: dict) -> float:
    """How far (ms) the client's TTFT lies outside the server's: the span from the request's
    arrival to the start, or the return, of the write that sent the first text."""
    ttft = client["first_token_ns"] - client["sent_ns"]
    low = server["first_content_ns"] - server["received_ns"]
    high = (server["first_content_sent_ns"] or server["first_content_ns"]) - server["received_ns"]
    return max(0, low - ttft, ttft - high) / 1e6


def test_client_and_server_timestamps_agree_at_64_streams(tmp_path):
    from engine.server.launch import EngineProcess
    from engine.tokenizer import DEFAULT_TOKENIZER_PATH
    from spikelens_common.socket_clock import keep_stamping_on

    hold = (
        keep_stamping_on()
    )  # does this kernel stamp received packets (else both sides read times)
    stamps_available = hold.on
    hold.close()
    engine_config = {
        "run_id": "accuracy",
        "engine": {"model": "tiny", "max_num_seqs": STREAMS},
        "faults": [],
    }
    with EngineProcess(engine_config, tmp_path) as engine:
        result = run_locust(
            engine.url,
            tmp_path,
            LocustRunOptions(
                WORKLOAD,
                {"shape": "constant", "users": STREAMS},
                duration_s=8,
                warmup_s=3,
                tokenizer_path=DEFAULT_TOKENIZER_PATH,
            ),
        )
    client = pq.read_table(tmp_path / "requests.parquet").to_pylist()
    wire = {
        r["request_id"]: r for r in pq.read_table(tmp_path / "server_requests.parquet").to_pylist()
    }
    engine_side = {
        r["request_id"]: r for r in pq.read_table(tmp_path / "engine_requests.parquet").to_pylist()
    }
    pairs = [
        (c, wire[c["request_id"]])
        for c in client
        if c["status"] == "ok" and c["phase"] == "measure" and c["request_id"] in wire
    ]
    assert result.requests_sent == len(client) and len(pairs) > STREAMS

    def p99(values):
        return percentile(sorted(values), 99)

    # The server's reference is an interval: its first text reached the client's socket between
    # the write's start and its return (wire_clock.first_content_sent_ns); a server thread
    # preempted in the call widens it, which is the reference's error, not the client's.
    raw_ttft = [
        abs((c["first_token_ns"] - c["sent_ns"]) - (s["first_content_ns"] - s["received_ns"])) / 1e6
        for c, s in pairs
    ]
    ttft = p99([outside_write(c, s) for c, s in pairs])
    e2e = p99(
        [
            abs((c["done_ns"] - c["sent_ns"]) - (s["done_ns"] - s["received_ns"])) / 1e6
            for c, s in pairs
        ]
    )
    # For the record: against the engine's own stamps (admission, end of the producing step) the
    # difference also holds the server's delivery delay, which is why the socket-side ones exist.
    inside = p99(
        [
            abs(
                (c["first_token_ns"] - c["sent_ns"])
                - (
                    engine_side[c["request_id"]]["first_token_ns"]
                    - engine_side[c["request_id"]]["arrival_ns"]
                )
            )
            / 1e6
            for c, _ in pairs
            if c["request_id"] in engine_side
        ]
    )
    legs = {
        "send→server received p99 ms": p99(
            [(s["received_ns"] - c["sent_ns"]) / 1e6 for c, s in pairs]
        ),
        "server wrote first text→client socket had it p99 ms": p99(
            [(c["first_token_ns"] - s["first_content_ns"]) / 1e6 for c, s in pairs]
        ),
        "server write call p99 ms": p99(
            [
                ((s["first_content_sent_ns"] or s["first_content_ns"]) - s["first_content_ns"])
                / 1e6
                for _, s in pairs
            ]
        ),
        "TTFT |diff| p99 ms vs the write's start": p99(raw_ttft),
        "TTFT |diff| p99 ms vs the engine's in-process stamps": inside,
    }
    print(
        f"client health {result.client_health}; TTFT |diff| p99 {ttft:.2f} ms, E2E |diff| p99 {e2e:.2f} ms; {legs}"
    )
    clocks = {(c.get("arrival_clock"), s["received_clock"]) for c, s in pairs}
    exact = [c for c, _ in pairs if c.get("arrival_clock") == "kernel"]
    ttft_exact = p99(
        [outside_write(c, s) for c, s in pairs if c.get("arrival_clock") == "kernel"] or [0.0]
    )
    print(
        f"first tokens timed only to > 1 ms (merged): {1 - len(exact) / len(pairs):.1%}; "
        f"TTFT |diff| p99 over the others {ttft_exact:.2f} ms"
    )
    if stamps_available:
        assert clocks <= {("kernel", "kernel"), ("merged", "kernel")} and exact, clocks
    if ttft <= 2.0 and e2e <= 2.0:
        return
    assert not result.client_valid, (
        f"client healthy, yet TTFT |diff| p99 = {ttft:.2f} ms, "
        f"E2E |diff| p99 = {e2e:.2f} ms; legs: {legs}"
    )
    assert result.client_health["reasons"]  # flagged, and the flag says why
