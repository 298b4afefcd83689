"""A run imported from Prometheus, built by hand: run.json of kind `observed` and a metrics.parquet
with an ITL histogram, the running batch and the token counter at a 1-s step."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spikelens_common.metrics_scraper import METRICS_SCHEMA

T0 = 1_796_300_000_000_000_000
BOUNDS = ("0.01", "0.025", "0.05", "0.1", "0.25", "+Inf")


def _cumulative(rng_counts):
    """Cumulative bucket counts over BOUNDS from per-bucket counts."""
    out, total = [], 0
    for c in rng_counts:
        total += c
        out.append(total)
    return out


# `spikelens agent`'s processes in an observed run built with agent=True: (pid, ppid, role)
AGENT_PROCESSES = ((4100, 1, "api_server"), (4200, 4100, "EngineCore"))
RETITLED_AT = 5  # scrapes before EngineCore's GC rows carried its final role


def _agent_series(add, ts: int, w: int, spike: tuple[int, int]) -> None:
    """One scrape of the agent beside the engine: CPU counters of both processes, EngineCore's
    gen-2 GC pauses (10 ms a second, 400 ms a second in the spike), its stack regions."""
    for pid, ppid, role in AGENT_PROCESSES:
        labels = {"job": "agent", "pid": str(pid), "ppid": str(ppid), "role": role}
        cpu = 0.8 if role == "EngineCore" else 0.3
        add(ts, "spikelens_agent_process_cpu_seconds_total", labels, cpu * (w + 1))
        add(ts, "spikelens_agent_process_run_seconds_total", labels, cpu * (w + 1))
        add(ts, "spikelens_agent_process_runqueue_wait_seconds_total", labels, 0.02 * (w + 1))
        add(ts, "spikelens_agent_process_voluntary_switches_total", labels, 50 * (w + 1))
        add(ts, "spikelens_agent_process_involuntary_switches_total", labels, 5 * (w + 1))
        add(ts, "spikelens_agent_process_threads", labels, 4)
    core = {"job": "agent", "pid": "4200", "role": "EngineCore"}
    spike_windows = min(max(0, w - spike[0] + 1), spike[1] - spike[0])  # of the spike so far
    pause_s = 0.01 * (w + 1) + 0.39 * spike_windows
    # vLLM retitles its engine core after it started: the hook's rows (and the agent's GC
    # series) carry the spawn child's role until then; that series stays, frozen, beside the new
    early = {**core, "role": "api_server:spawn_child", "generation": "2"}
    add(ts, "spikelens_agent_gc_pause_seconds_sum", early, 0.01 * min(w + 1, RETITLED_AT))
    add(ts, "spikelens_agent_gc_pause_seconds_count", early, 2 * min(w + 1, RETITLED_AT))
    if w + 1 > RETITLED_AT:
        late = {**core, "generation": "2"}
        add(ts, "spikelens_agent_gc_pause_seconds_sum", late, pause_s - 0.01 * RETITLED_AT)
        add(ts, "spikelens_agent_gc_pause_seconds_count", late, 2 * (w + 1 - RETITLED_AT))
    for region, per_s in (("model_forward", 0.5), ("scheduler", 0.1), ("idle", 0.4)):
        add(ts, "spikelens_agent_stack_seconds_total", {**core, "region": region}, per_s * (w + 1))


@dataclass(frozen=True)
class Traffic:
    """The engine's request counters in an observed run: requests finished per window, outside
    and inside the spike, each with `prompt` and `output` tokens, finishing `e2e_s` after sent."""

    calm: int = 3
    burst: int = 9
    prompt: int = 64
    output: int = 32
    e2e_s: tuple[float, float] = (0.5, 2.0)  # outside, inside the spike


def _traffic_series(add, ts: int, w: int, hot: bool, t: Traffic, totals: dict) -> None:
    """One scrape of the engine's request counters (cumulative, as vLLM exports them)."""
    n = t.burst if hot else t.calm
    totals["done"] += n
    totals["e2e"] += n * t.e2e_s[1 if hot else 0]
    job = {"job": "e", "model_name": "m"}
    add(ts, "vllm:request_success_total", {**job, "finished_reason": "length"}, totals["done"])
    add(ts, "vllm:prompt_tokens_total", job, totals["done"] * t.prompt)
    add(ts, "vllm:e2e_request_latency_seconds_sum", job, totals["e2e"])
    add(ts, "vllm:e2e_request_latency_seconds_count", job, totals["done"])


def observed_run(
    root: Path,
    n: int = 40,
    spike: tuple[int, int] = (20, 26),
    agent: bool = False,
    traffic: Traffic | None = None,
) -> Path:
    """A Prometheus window at a 1-s step: 80 ITL observations a second, under 25 ms; in the
    spike, a tenth of them between 100 and 250 ms and the running batch up from 2 to 14.
    agent=True: the batch stays at 2 and `spikelens agent`'s series are there instead, with
    EngineCore's GC pauses up from 10 to 400 ms a second in the spike. `traffic`: the request
    counters too (finished requests, their tokens and E2E); its output tokens replace the token
    counter's 80 a second."""
    cols = {k: [] for k in METRICS_SCHEMA.names}

    def add(ts, name, labels, value):
        cols["ts_ns"].append(ts)
        cols["name"].append(name)
        cols["labels"].append(json.dumps(labels, sort_keys=True))
        cols["value"].append(float(value))

    itl = [0] * len(BOUNDS)
    tokens = 0.0
    totals = {"done": 0.0, "e2e": 0.0}
    for w in range(n):
        hot = spike[0] <= w < spike[1]
        per = [0, 72, 0, 0, 8, 0] if hot else [40, 40, 0, 0, 0, 0]
        itl = [a + b for a, b in zip(itl, per, strict=True)]
        tokens += (
            80 if traffic is None else (traffic.burst if hot else traffic.calm) * traffic.output
        )
        ts = T0 + w * 1_000_000_000 + 500_000_000
        for le, cum in zip(BOUNDS, _cumulative(itl), strict=True):
            add(ts, "vllm:inter_token_latency_seconds_bucket", {"job": "e", "le": le}, cum)
        add(ts, "vllm:num_requests_running", {"job": "e"}, 14 if hot and not agent else 2)
        add(ts, "vllm:generation_tokens_total", {"job": "e"}, tokens)
        if agent:
            _agent_series(add, ts, w, spike)
        if traffic is not None:
            _traffic_series(add, ts, w, hot, traffic, totals)
    run_dir = root / "obs-1"
    run_dir.mkdir(parents=True)
    pq.write_table(pa.table(cols, schema=METRICS_SCHEMA), run_dir / "metrics.parquet")
    manifest = {
        "run_id": "obs-1",
        "kind": "observed",
        "scenario_name": "prometheus",
        "scenario_path": "",
        "scenario": {},
        "engine": {"kind": "observed", "step_s": 1.0},
        "target": None,
        "command": "spikelens incident --prometheus http://prometheus:9090 --step 1",
        "faults": [],
        "warmup_s": 0.0,
        "duration_s": float(n),
        "started_ns": T0,
        "ended_ns": T0 + n * 10**9,
        "load_started_ns": T0,
        "status": "ok",
        "errors": [],
    }
    (run_dir / "run.json").write_text(json.dumps(manifest))
    return run_dir
