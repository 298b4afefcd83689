"""Client health: is the load generator itself the bottleneck?

What: each Locust process measures, per second, its CPU use, its scheduling lag (how late a
10 ms timer fires in its event loop) and its read delay (how long stream data waited in the
socket before it was read); `HealthMonitor` keeps the per-second rows and a summary of the
measured phase, written as parts and merged into `client_health.parquet`.

`verdict` marks the run invalid only for what spoils its figures. Token arrivals are the kernel's
receive times and the send is stamped in sendall (loadgen/timed_socket.py), so a late event loop
moves no TTFT or ITL; it moves the sends off their schedule. Measured on 2 cores during a GC
storm: in seconds whose lag p99 was 8-16 ms, client − server TTFT was still p50 0.06 ms, p99
0.7 ms. So a run is invalid when a process saturated (CPU > 90 % of a core: it can no longer offer
the scenario's load), when its sends slipped far enough to change the load it offered (lag p99
> 50 ms: the time scale of the TTFTs it measures, 30-60 ms for the small model here; a client
starved by vLLM on its cores lagged 70-500 ms), or when it read so late that over 1 % of its
first tokens are known only to within more than 1 ms: the first content came merged with a later
packet, which the kernel keeps under the later receive time. Then the TTFT p99 cannot be trusted
to the millisecond (with a CPU hog beside 64 streams on 2 cores, 4.1 % merged first tokens made
the TTFT |client − server| p99 3.96 ms, 0.05 ms over the others). A smaller lag is a per-window
signal for the analysis (`client` cause), not a reason to throw the run away: the 10-ms limit
this replaced failed CI runs whose lag p99 was 11.6 and 15.4 ms from the shared box alone.
The warm-up gets the same test early (`HealthMonitor.warmup_summary`, `warmup_verdict`): each
process prints its warm-up summary as the measured phase starts (WARMUP_MARKER), so a run whose
load generator is already starved says so before it measures, not only in its verdict.
Pure Python + pyarrow (the gevent probe lives in the locustfile).
"""

from __future__ import annotations

import json
import math
from array import array
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

CPU_LIMIT_PERCENT = 90.0  # of one core: a Locust process is one gevent thread
LAG_P99_LIMIT_MS = 50.0  # sends late by a TTFT: the offered load is no longer the scenario's
MERGED_FIRST_LIMIT = 0.01  # share of first tokens timed only to > 1 ms (a TTFT p99 needs < 1 %)
PROBE_INTERVAL_S = 0.010  # the lag probe's timer
# The line each Locust process prints as measured load starts: WARMUP_MARKER <summary JSON>.
WARMUP_MARKER = "SPIKELENS_WARMUP_HEALTH"
# Warm-up seconds left out of its summary: spawning the users and opening their connections.
WARMUP_SKIP_S = 1

HEALTH_SCHEMA = pa.schema(
    [
        ("ts_ns", pa.int64()),  # end of the one-second sample
        ("worker", pa.string()),  # the process (pid tag)
        ("phase", pa.string()),  # 'warmup' | 'measure' | 'after' (shutdown)
        ("cpu_percent", pa.float64()),  # this process, over the second (100 = one core)
        ("lag_p50_ms", pa.float64()),
        ("lag_p99_ms", pa.float64()),
        ("lag_max_ms", pa.float64()),
        ("lag_samples", pa.int32()),
        ("read_delay_p99_ms", pa.float64()),  # stream lines: read by loadgen − reached its socket
        ("in_flight", pa.int32()),  # streams open at the end of the second
        (
            "slot_waits",
            pa.int32(),
        ),  # open loop: arrivals that waited for a free slot (max_in_flight)
    ]
)


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Linear-interpolated percentile of an ascending list (numpy's default); None if empty."""
    if not sorted_values:
        return None
    rank = p / 100 * (len(sorted_values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (rank - low) * (sorted_values[high] - sorted_values[low])


class HealthMonitor:
    """Accumulates lag samples and closes one row per second (not thread-safe; one per process)."""

    def __init__(self, worker: str):
        self.worker = worker
        self.rows: dict[str, list] = {name: [] for name in HEALTH_SCHEMA.names}
        self._second: list[float] = []
        self._measured_lags: list[float] = []
        self._second_delays: list[float] = []
        # one sample per stream line of the measured phase: typed, 8 bytes each (the recorder
        # keeps ~24 per content chunk already), not a list of Python floats
        self._measured_delays = array("d")
        self.slot_waits = 0
        # the warm-up's lag samples and CPU per second, past its first WARMUP_SKIP_S seconds
        self._warmup_seconds = 0
        self._warmup_lags: list[float] = []
        self._warmup_cpu: list[float] = []
        self.first_tokens = 0  # measured streams with a kernel-stamped first token
        self.first_merged = (
            0  # ... timed only to > 1 ms (merged into a later packet after a late read)
        )

    def add_first_token(self, merged: bool, measured: bool) -> None:
        """One stream's first content line: was it known only to > 1 ms (merged into a later packet)?"""
        if measured:
            self.first_tokens += 1
            self.first_merged += merged

    def add_lag(self, lag_ms: float, measured: bool) -> None:
        self._second.append(lag_ms)
        if measured:
            self._measured_lags.append(lag_ms)

    def add_read_delay(self, delay_ms: float, measured: bool) -> None:
        """How long a stream line waited in the socket before loadgen read it: the error a client
        that stamps arrivals when it reads them would have made (loadgen uses the kernel's)."""
        self._second_delays.append(delay_ms)
        if measured:
            self._measured_delays.append(delay_ms)

    def close_second(self, ts_ns: int, phase: str, cpu_percent: float, in_flight: int) -> None:
        lags = sorted(self._second)
        delays = sorted(self._second_delays)
        self._second, self._second_delays = [], []
        if phase == "warmup":
            self._warmup_seconds += 1
            if self._warmup_seconds > WARMUP_SKIP_S:
                self._warmup_lags.extend(lags)
                self._warmup_cpu.append(cpu_percent)
        for name, value in (
            ("ts_ns", ts_ns),
            ("worker", self.worker),
            ("phase", phase),
            ("cpu_percent", cpu_percent),
            ("lag_p50_ms", percentile(lags, 50)),
            ("lag_p99_ms", percentile(lags, 99)),
            ("lag_max_ms", lags[-1] if lags else None),
            ("lag_samples", len(lags)),
            ("read_delay_p99_ms", percentile(delays, 99)),
            ("in_flight", in_flight),
            ("slot_waits", self.slot_waits),
        ):
            self.rows[name].append(value)
        self.slot_waits = 0

    def summary(self, measured_cpu_percent: float | None) -> dict:
        """This process over the measured phase: CPU (from its CPU times over the phase) and
        the lag percentiles of every probe sample in it."""
        lags = sorted(self._measured_lags)
        delays = sorted(self._measured_delays)
        return {
            "worker": self.worker,
            "cpu_percent": measured_cpu_percent,
            "lag_p50_ms": percentile(lags, 50),
            "lag_p99_ms": percentile(lags, 99),
            "lag_max_ms": lags[-1] if lags else None,
            "lag_samples": len(lags),
            "read_delay_p50_ms": percentile(delays, 50),
            "read_delay_p99_ms": percentile(delays, 99),
            "first_tokens": self.first_tokens,
            "first_token_merged_share": self.first_merged / self.first_tokens
            if self.first_tokens
            else None,
        }

    def warmup_summary(self) -> dict | None:
        """This process over the warm-up so far (past its first WARMUP_SKIP_S seconds), in
        `summary`'s keys that `verdict` reads; None when no such second was closed."""
        if not self._warmup_cpu:
            return None
        lags = sorted(self._warmup_lags)
        return {
            "worker": self.worker,
            "cpu_percent": sum(self._warmup_cpu) / len(self._warmup_cpu),
            "lag_p50_ms": percentile(lags, 50),
            "lag_p99_ms": percentile(lags, 99),
            "lag_max_ms": lags[-1] if lags else None,
            "lag_samples": len(lags),
            "seconds": len(self._warmup_cpu),
        }

    def write(self, parts_dir: str | Path, measured_cpu_percent: float | None) -> None:
        parts_dir = Path(parts_dir)
        parts_dir.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pydict(self.rows, schema=HEALTH_SCHEMA),
            parts_dir / f"client_health.{self.worker}.parquet",
        )
        (parts_dir / f"client_health.{self.worker}.json").write_text(
            json.dumps(self.summary(measured_cpu_percent))
        )


def verdict(summaries: list[dict]) -> dict:
    """{'valid': bool, 'reasons': [...], 'workers': summaries}: invalid when any process ran
    above CPU_LIMIT_PERCENT, had lag p99 above LAG_P99_LIMIT_MS or more than MERGED_FIRST_LIMIT of
    its first tokens timed only to > 1 ms (merged into a later packet) in the measured phase."""
    reasons = []
    for s in summaries:
        if s.get("cpu_percent") is not None and s["cpu_percent"] > CPU_LIMIT_PERCENT:
            reasons.append(
                f"client {s['worker']} CPU {s['cpu_percent']:.0f}% > {CPU_LIMIT_PERCENT:.0f}% of a core"
            )
        if s.get("lag_p99_ms") is not None and s["lag_p99_ms"] > LAG_P99_LIMIT_MS:
            reasons.append(
                f"client {s['worker']} scheduling lag p99 {s['lag_p99_ms']:.1f} ms > {LAG_P99_LIMIT_MS:.0f} ms"
            )
        merged = s.get("first_token_merged_share")
        if merged is not None and merged > MERGED_FIRST_LIMIT:
            reasons.append(
                f"client {s['worker']} read {merged:.1%} of first tokens late, merged with a later "
                f"packet (> {MERGED_FIRST_LIMIT:.0%}): their TTFTs are known only to > 1 ms"
            )
    return {"valid": not reasons, "reasons": reasons, "workers": summaries}


def warmup_verdict(summaries: list[dict]) -> dict:
    """`verdict` over the processes' warm-up summaries, plus `message`: one line saying the load
    generator is starved already (None when it is not), for the run to print before measuring."""
    result = verdict(summaries)
    result["message"] = (
        None
        if result["valid"]
        else "the load generator is starved during warm-up ("
        + "; ".join(result["reasons"])
        + "): this run's latencies will be partly the client's; keep other work off "
        "spikelens' CPUs, give the engine fewer (engine.cpus) or lighten the load"
    )
    return result


def merge_health(parts_dir: str | Path, run_dir: str | Path) -> dict:
    """Merge the processes' health parts into run_dir/client_health.parquet and return the
    verdict (also written to run_dir/loadgen/client_health.json)."""
    parts_dir, run_dir = Path(parts_dir), Path(run_dir)
    tables = [
        pq.read_table(p, schema=HEALTH_SCHEMA)
        for p in sorted(parts_dir.glob("client_health.*.parquet"))
    ]
    table = pa.concat_tables(tables) if tables else HEALTH_SCHEMA.empty_table()
    pq.write_table(
        table.sort_by([("ts_ns", "ascending"), ("worker", "ascending")]),
        run_dir / "client_health.parquet",
    )
    summaries = [json.loads(p.read_text()) for p in sorted(parts_dir.glob("client_health.*.json"))]
    result = verdict(summaries)
    for part in list(parts_dir.glob("client_health.*.parquet")) + list(
        parts_dir.glob("client_health.*.json")
    ):
        part.unlink()
    (parts_dir / "client_health.json").write_text(json.dumps(result, indent=2))
    return result
