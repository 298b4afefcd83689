"""injectors.delay_proxy: chunks delayed in the window only, in order; the proxy process and its
ground truth; params named in errors."""

import asyncio
import json
import random
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.parquet as pq
import pytest

from injectors.delay_proxy import DelayParams, DelayProxy, Schedule, _pipe, make_params, serve


async def _echo_round_trips(schedule: Schedule, n: int) -> list[float]:
    async def echo(r, w):
        while data := await r.read(1024):
            w.write(data)
            await w.drain()
        w.close()

    upstream = await asyncio.start_server(echo, "127.0.0.1", 0)
    proxy = await serve(upstream.sockets[0].getsockname()[:2], schedule)
    r, w = await asyncio.open_connection(*proxy.sockets[0].getsockname()[:2])
    times = []
    for i in range(n):
        t = time.perf_counter()
        w.write(f"{i:04d}".encode())
        assert await r.readexactly(4) == f"{i:04d}".encode()
        times.append(time.perf_counter() - t)
    w.close()
    proxy.close()
    upstream.close()
    return times


def test_chunks_are_delayed_each_way_inside_the_window_only():
    now = time.time_ns()
    inside = Schedule([(0.0, 60.0, DelayParams(delay_ms=40))], t0_ns=now)
    outside = Schedule([(60.0, 1.0, DelayParams(delay_ms=40))], t0_ns=now)
    slow = asyncio.run(_echo_round_trips(inside, 3))
    fast = asyncio.run(_echo_round_trips(outside, 3))
    assert min(slow) >= 0.078 and max(fast) < 0.03, (slow, fast)


def test_unarmed_schedule_does_not_delay():
    assert Schedule([(0.0, 10.0, DelayParams())]).delay_s(time.time_ns(), None) == 0.0


def test_jitter_keeps_the_order_of_chunks():
    sched = Schedule([(0.0, 60.0, DelayParams(delay_ms=5, jitter_ms=20))], t0_ns=time.time_ns())
    times = asyncio.run(_echo_round_trips(sched, 5))  # readexactly checks each echo in order
    assert all(t >= 0.009 for t in times)


def test_a_peer_gone_at_the_half_close_ends_the_pipe_quietly():
    """ENOTCONN from shutdown(SHUT_WR) once the other side has gone (seen in a held-out run) is
    an OSError but no ConnectionError: the pipe still ends without an error, its writer closed."""

    class GoneWriter:
        closed = False

        def can_write_eof(self):
            return True

        def write_eof(self):
            raise OSError(107, "Transport endpoint is not connected")

        def close(self):
            self.closed = True

    async def run() -> GoneWriter:
        reader, writer = asyncio.StreamReader(), GoneWriter()
        reader.feed_eof()
        await _pipe(reader, writer, Schedule([]), random.Random(0))  # type: ignore[arg-type]
        return writer

    assert asyncio.run(run()).closed


def test_bad_params_name_the_field():
    with pytest.raises(ValueError, match=r"network.delay.params.delay_ms: must be a number in"):
        make_params({"delay_ms": -1})
    with pytest.raises(ValueError, match="delay"):
        make_params({"dealy_ms": 5})


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _get(url: str) -> float:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.read() == b"hello"
    return time.perf_counter() - t


def test_proxy_process_delays_an_http_server_after_arm_and_records_the_window(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fault = {
        "kind": "network.delay",
        "start_s": 0.0,
        "duration_s": 30.0,
        "params": {"delay_ms": 60},
    }
    proxy = DelayProxy([fault], tmp_path, duration_s=10.0)
    try:
        url = proxy.start(f"http://127.0.0.1:{server.server_address[1]}")
        assert url != f"http://127.0.0.1:{server.server_address[1]}"
        before = _get(url + "/")
        t0 = time.time_ns()
        proxy.arm(t0)
        time.sleep(0.05)  # the proxy reads "arm" off its stdin
        during = _get(url + "/")
    finally:
        proxy.stop()
        server.shutdown()
    assert before < 0.05 and during >= 0.12, (before, during)
    [row] = pq.read_table(tmp_path / "faults.network.parquet").to_pylist()
    assert row["cause"] == "network" and row["start_ns"] == t0
    assert row["end_ns"] == t0 + 10_000_000_000  # clipped to the run
    assert json.loads(row["params"]) == {"delay_ms": 60, "jitter_ms": 0.0}


def test_no_fault_no_proxy(tmp_path):
    proxy = DelayProxy([], tmp_path, 5)
    assert proxy.start("http://127.0.0.1:8000") == "http://127.0.0.1:8000" and proxy.proc is None
    proxy.arm(1)
    proxy.stop()
    assert not (tmp_path / "faults.network.parquet").exists()


def test_only_network_delay_is_taken(tmp_path):
    with pytest.raises(ValueError, match="got 'memory.gc_storm'"):
        DelayProxy([{"kind": "memory.gc_storm", "start_s": 0, "duration_s": 1}], tmp_path, 5)
