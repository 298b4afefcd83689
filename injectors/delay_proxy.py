"""`network.delay`: a TCP proxy between loadgen and the engine that delays every chunk in a window.

What: a small asyncio process (`python -m injectors.delay_proxy`) listens on a free loopback
port and forwards each connection to the engine. Inside a fault window every chunk read from
either side is written on `delay_ms` (+ a uniform draw in [0, jitter_ms]) after it was read,
in order: a latency on the path, as a slower network adds, not a bandwidth cap (chunks in flight
overlap, so a stream's inter-chunk gaps keep their length while TTFT and E2E grow by the delays
on the way in and out). Outside the windows chunks pass at once. `DelayProxy` starts it beside
the engine, `arm(t0_ns)` (load start) starts its fault clock, `stop()` ends it. The proxy writes
nothing the analysis reads; `arm` writes the windows to faults.network.parquet (cause network).
This kernel has no netem, hence a proxy in user space: it adds ~0.1 ms per chunk of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from spikelens_common.fault_catalogue import CATALOGUE, Applier, build_params
from spikelens_common.fault_params import DelayParams
from spikelens_common.ground_truth import (
    GROUND_TRUTH_FILES,
    Scheduled,
    scheduled_windows,
    write_windows,
)

KIND = "network.delay"
GROUND_TRUTH_FILE = GROUND_TRUTH_FILES["proxy"]
_READ_BYTES = 65536


def make_params(values: dict | None) -> DelayParams:
    """Params from a scenario mapping; unknown keys raise naming the key."""
    return build_params(KIND, Applier.PROXY, values)


@dataclass
class Schedule:
    """Delay windows as (start_s, duration_s, params) after load start; unarmed: no delay."""

    windows: list[tuple[float, float, DelayParams]]
    t0_ns: int | None = None

    def delay_s(self, now_ns: int, rng: random.Random) -> float:
        if self.t0_ns is None:
            return 0.0
        t = (now_ns - self.t0_ns) / 1e9
        for start_s, duration_s, p in self.windows:
            if start_s <= t < start_s + duration_s:
                return (p.delay_ms + rng.uniform(0.0, p.jitter_ms)) / 1000.0
        return 0.0


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    schedule: Schedule,
    rng: random.Random,
) -> None:
    """Copy reader → writer, each chunk written when its delay is due (in order)."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def read() -> None:
        last_due = 0.0
        while True:
            data = await reader.read(_READ_BYTES)
            due = max(last_due, loop.time() + schedule.delay_s(time.time_ns(), rng))
            last_due = due
            await queue.put((due, data))
            if not data:
                return

    async def write() -> None:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    try:
        await asyncio.gather(read(), write())
    except (OSError, asyncio.IncompleteReadError):
        pass  # a side went away (reset, or ENOTCONN at the half-close): the other one is closed
    finally:
        writer.close()


async def serve(
    upstream: tuple[str, int], schedule: Schedule, port: int = 0, seed: int = 0
) -> asyncio.Server:
    """A listening proxy on 127.0.0.1:port (0: a free one) to `upstream`."""
    rng = random.Random(seed)

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*upstream)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            _pipe(client_r, up_w, schedule, rng), _pipe(up_r, client_w, schedule, rng)
        )

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def _main(args: argparse.Namespace) -> None:
    host, port = args.upstream.rsplit(":", 1)
    windows = [
        (float(w["start_s"]), float(w["duration_s"]), make_params(w.get("params")))
        for w in json.loads(args.windows)
    ]
    schedule = Schedule(windows)
    server = await serve((host, int(port)), schedule, args.port)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    while line := await stdin.readline():  # "arm <t0_ns>"; end of stdin: stop
        word, _, value = line.decode().strip().partition(" ")
        if word == "arm":
            schedule.t0_ns = int(value)
    server.close()


class DelayProxy:
    """The proxy process of one run, for its network.delay faults (the flows route them here;
    none: no proxy)."""

    def __init__(self, faults: list[dict], run_dir: str | Path, duration_s: float):
        self.windows = [
            {
                "start_s": float(f["start_s"]),
                "duration_s": float(f["duration_s"]),
                "params": f.get("params") or {},
            }
            for f in _own(faults)
        ]
        self.run_dir, self.duration_s = Path(run_dir), duration_s
        self.proc: subprocess.Popen | None = None

    def start(self, upstream_url: str) -> str:
        """Start the proxy to upstream_url; returns the URL to send to instead (the same URL
        when the run has no network.delay fault)."""
        if not self.windows:
            return upstream_url
        parts = urlsplit(upstream_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "injectors.delay_proxy",
                "--upstream",
                f"{parts.hostname}:{port}",
                "--windows",
                json.dumps(self.windows),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"{KIND}: the delay proxy did not start (said {line!r})")
        return urlunsplit(parts._replace(netloc=f"127.0.0.1:{int(line.split()[1])}"))

    def arm(self, t0_ns: int) -> None:
        if self.proc is None or self.proc.stdin is None:
            return
        self.proc.stdin.write(f"arm {t0_ns}\n")
        self.proc.stdin.flush()
        _write_ground_truth(self.windows, t0_ns, self.duration_s, self.run_dir / GROUND_TRUTH_FILE)

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None


def _own(faults: list[dict]) -> list[dict]:
    """`faults`, each of which must be a network.delay (the flows route only those here)."""
    for f in faults:
        if f["kind"] != KIND:
            raise ValueError(f"the delay proxy applies {KIND} only, got {f['kind']!r}")
    return faults


def _write_ground_truth(windows: list[dict], t0_ns: int, duration_s: float, path: Path) -> None:
    cause = CATALOGUE[KIND].cause
    scheduled = [
        Scheduled(KIND, cause, w["start_s"], w["duration_s"], make_params(w["params"]))
        for w in windows
    ]
    write_windows(scheduled_windows(scheduled, t0_ns, duration_s), path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="host:port of the engine")
    parser.add_argument(
        "--windows", required=True, help="JSON list of {start_s, duration_s, params}"
    )
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_main(parser.parse_args()))
