"""Prometheus metrics of the server (``GET /metrics``), named as vLLM names them where the meaning
is the same, plus spikelens' per-step stage histograms.

Why vLLM's names: the collectors and dashboards that watch this engine then work unchanged against
vLLM (and vice versa). Every metric carries vLLM's ``model_name`` label.

Two feeds, each on its own thread:
- ``engine_stepped(engine)`` runs on the engine thread after every step (and before it sleeps): it
  reads the new ``steps.parquet`` rows (stage times, preemptions) and the scheduler / KV gauges,
  which only that thread may touch;
- ``request_output`` / ``request_finished`` / ``request_shed`` run on the event loop, with the step's
  end time as the token time (not the time the loop got to it).
``prometheus_client`` metrics are thread-safe. Each app has its own ``CollectorRegistry`` so several
apps can live in one process (tests).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# vLLM's buckets, with finer ones below 10 ms added: a CPU decode step is a few ms.
TTFT_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
)
ITL_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
E2E_BUCKETS = (
    0.01,
    0.05,
    0.1,
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
STAGE_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
# steps.parquet column (ms) → spikelens histogram name stem.
STAGES = ("schedule", "forward", "penalty", "sample", "comm")


class ServerMetrics:
    def __init__(self, model_name: str):
        self.registry = CollectorRegistry()
        r, label = self.registry, ["model_name"]

        def gauge(name, doc):
            return Gauge(name, doc, label, registry=r).labels(model_name)

        def counter(name, doc):
            return Counter(name, doc, label, registry=r).labels(model_name)

        def hist(name, doc, buckets):
            return Histogram(name, doc, label, buckets=buckets, registry=r).labels(model_name)

        self.running = gauge("vllm:num_requests_running", "Requests in the running batch.")
        self.waiting = gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.")
        self.kv_usage = gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage: used blocks / usable blocks (1 = full)."
        )
        # Older vLLM name of the same figure (dashboards written for vLLM < 0.10 read this one).
        self.gpu_cache_usage = gauge("vllm:gpu_cache_usage_perc", "KV-cache usage (old vLLM name).")
        self.preemptions = counter("vllm:num_preemptions", "Sequences preempted (recompute).")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prompt tokens of finished requests.")
        self.generation_tokens = counter("vllm:generation_tokens", "Generated tokens.")
        self.ttft = hist(
            "vllm:time_to_first_token_seconds", "Arrival to first token.", TTFT_BUCKETS
        )
        self.itl = hist(
            "vllm:inter_token_latency_seconds", "Time between consecutive tokens.", ITL_BUCKETS
        )
        self.tpot = hist(
            "vllm:time_per_output_token_seconds",
            "Per request: (e2e - ttft) / (output tokens - 1).",
            ITL_BUCKETS,
        )
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Arrival to last token.", E2E_BUCKETS)
        self._success = Counter(
            "vllm:request_success",
            "Finished requests by finish reason.",
            ["model_name", "finished_reason"],
            registry=r,
        )
        self._model_name = model_name
        self.shed = counter(
            "spikelens:requests_shed", "Requests answered 429 by admission control."
        )
        self.aborted = counter(
            "spikelens:requests_aborted", "Requests aborted (client gone or error)."
        )
        self.step_duration = hist(
            "spikelens:step_duration_seconds", "Wall time of one engine step.", STAGE_BUCKETS
        )
        self.stage = {
            s: hist(f"spikelens:step_{s}_seconds", f"Per-step {s} stage time.", STAGE_BUCKETS)
            for s in STAGES
        }
        self.batch_size = hist(
            "spikelens:step_batch_size",
            "Sequences per engine step.",
            (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        )
        self._steps_seen = (
            0  # rows of the engine's step trace already observed (engine thread only)
        )

    # ---- engine thread --------------------------------------------------------------------------
    def engine_stepped(self, engine) -> None:
        """Observe new step rows and refresh the scheduler and KV gauges (engine thread only)."""
        columns = engine.telemetry.steps.buffer.columns
        n = len(columns["step"])
        for i in range(self._steps_seen, n):
            self.step_duration.observe((columns["end_ns"][i] - columns["start_ns"][i]) / 1e9)
            for s in STAGES:
                self.stage[s].observe(columns[f"{s}_ms"][i] / 1e3)
            self.batch_size.observe(columns["batch_size"][i])
            if columns["preempted"][i]:
                self.preemptions.inc(columns["preempted"][i])
        self._steps_seen = n
        sched, alloc = engine.scheduler, engine.kv.allocator
        self.running.set(len(sched.running))
        self.waiting.set(len(sched.waiting))
        usage = alloc.num_used / alloc.budget if alloc.budget else 0.0
        self.kv_usage.set(usage)
        self.gpu_cache_usage.set(usage)

    # ---- event loop -----------------------------------------------------------------------------
    def token_times(
        self, arrival_ns: int, prev_token_ns: int | None, token_ns: int, n_tokens: int
    ) -> None:
        """A step gave a request ``n_tokens`` tokens at ``token_ns``."""
        if n_tokens <= 0:
            return
        self.generation_tokens.inc(n_tokens)
        if prev_token_ns is None:
            self.ttft.observe((token_ns - arrival_ns) / 1e9)
        else:
            self.itl.observe((token_ns - prev_token_ns) / 1e9)

    def request_finished(
        self,
        finish_reason: str,
        arrival_ns: int,
        first_token_ns: int | None,
        done_ns: int,
        prompt_tokens: int,
        output_tokens: int,
    ) -> None:
        self._success.labels(self._model_name, finish_reason).inc()
        self.prompt_tokens.inc(prompt_tokens)
        self.e2e.observe((done_ns - arrival_ns) / 1e9)
        if first_token_ns is not None and output_tokens > 1:
            self.tpot.observe((done_ns - first_token_ns) / 1e9 / (output_tokens - 1))
