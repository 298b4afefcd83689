"""Hand-built RunSignals of one spike, for attribution tests that need exact, known signals.

A run of `n` one-second windows with `steps_per_window` engine steps each; windows
[first, last] are the spike. Each effect argument changes only what that effect really changes,
so a test states the incident's signals and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rca.attribute import RunSignals
from rca.detect import Spike
from rca.process_evidence import ProcessSignals
from rca.stepcost import STEP_COLUMNS


@dataclass
class SpikeRun:
    n: int = 40
    first: int = 20
    last: int = 24
    metric: str = "ttft_p99"
    steps_per_window: int = 10
    base_latency_ms: float = 100.0
    latency_rise_ms: float = 100.0  # of the metric's p99 in the spike windows
    step_ms: float = 20.0
    seed: int = 0
    # per-step ms added to a stage in the spike: {"gc_ms": 15.0} adds GC inside forward_ms
    stage_rise_ms: dict = field(default_factory=dict)
    transit_rise_ms: float = 0.0  # client − server p99 growth in the spike
    itl_stamped: bool = False  # the server stamped each text chunk: ITL is seen from both ends
    client_lag_rise_ms: float = 0.0  # load generator lag and read delay p99 growth
    client_block_ms: float = 0.0  # its longest block a window in the spike (lag max)
    runq_rise_ms_per_s: float = 0.0  # engine process run-queue wait growth (its CPU falls)
    output_growth: float = 1.0  # mean output tokens factor in the spike
    loop_rate: float | None = None  # repeated-3-gram rate of outputs in the spike (None: no ids)
    batch_growth: int = 0  # sequences more in every step of the spike (batch and decode tokens)
    forward_per_seq_ms: float = 0.0  # forward time each decode token adds (the cost model's slope)
    users: float = 8.0  # closed-loop users in flight at the client, outside the spike
    users_in_spike: float | None = None  # in the spike (None: as outside)
    users_stay: bool = False  # users_in_spike stay on after the spike (a step, not a burst)

    def spike(self) -> Spike:
        return Spike(
            1,
            self.metric,
            [self.metric],
            self.first,
            self.last,
            float(self.first),
            float(self.last + 1),
            self.base_latency_ms + self.latency_rise_ms,
            self.base_latency_ms,
            "major",
            1.0,
        )

    def in_spike(self, w: int) -> bool:
        return self.first <= w <= self.last


def _noise(rng: np.random.Generator, scale: float) -> float:
    return float(rng.normal(0.0, scale))


def _steps(run: SpikeRun, rng: np.random.Generator) -> dict[str, np.ndarray]:
    m = run.n * run.steps_per_window
    t = np.arange(m) / run.steps_per_window
    spike = (t >= run.first) & (t < run.last + 1)
    cols = {c: np.zeros(m) for c in STEP_COLUMNS}
    cols["t_s"] = t
    cols["batch_size"] = np.full(m, 8.0)
    cols["decode_tokens"] = 8.0 + rng.integers(-1, 2, m)
    cols["n_ranks"] = np.ones(m)
    extra = np.where(spike, float(run.batch_growth), 0.0)
    cols["batch_size"] = cols["batch_size"] + extra
    cols["decode_tokens"] = cols["decode_tokens"] + extra
    cols["forward_ms"] = (
        0.7 * run.step_ms
        + run.forward_per_seq_ms * (cols["decode_tokens"] - 8.0)
        + rng.normal(0, 0.2, m)
    )
    cols["penalty_ms"] = 0.1 * run.step_ms + rng.normal(0, 0.05, m)
    cols["sample_ms"] = 0.1 * run.step_ms + rng.normal(0, 0.05, m)
    cols["schedule_ms"] = 0.05 * run.step_ms + rng.normal(0, 0.02, m)
    cols["other_ms"] = np.full(m, 0.05 * run.step_ms)
    for stage, rise in run.stage_rise_ms.items():
        cols[stage] = cols[stage] + np.where(spike, rise, 0.0)
        if stage == "gc_ms":  # a pause lands inside the stage that was running
            cols["forward_ms"] = cols["forward_ms"] + np.where(spike, rise, 0.0)
    if run.runq_rise_ms_per_s:  # waiting for a CPU slows every stage alike
        slow = np.where(spike, 1000.0 / (1000.0 - run.runq_rise_ms_per_s), 1.0)
        for s in ("forward_ms", "penalty_ms", "sample_ms", "schedule_ms"):
            cols[s] = cols[s] * slow
    stages = ("schedule_ms", "forward_ms", "penalty_ms", "sample_ms", "comm_ms", "other_ms")
    cols["dur_ms"] = sum(cols[s] for s in stages)
    return cols


def _windows(run: SpikeRun, steps: dict, rng: np.random.Generator) -> tuple[list, list]:
    windows, step_windows = [], []
    for w in range(run.n):
        rise = run.latency_rise_ms if run.in_spike(w) else 0.0
        lat = run.base_latency_ms + rise + _noise(rng, 2.0)
        windows.append(
            {
                "window": w,
                f"{run.metric}_ms": lat,
                "output_tokens_mean": 64.0 * (run.output_growth if run.in_spike(w) else 1.0),
                "arrivals": 10.0,
            }
        )
        sel = (steps["t_s"] >= w) & (steps["t_s"] < w + 1)
        step_windows.append(
            {"window": w, **{c: float(np.mean(steps[c][sel])) for c in STEP_COLUMNS if c != "t_s"}}
        )
        step_windows[-1]["comm_max_ms"] = 0.0
        step_windows[-1]["preemptions"] = 0.0
        step_windows[-1]["waiting"] = 0.0
    return windows, step_windows


def _outside(run: SpikeRun, rng: np.random.Generator) -> tuple[list, list, list]:
    transit, client, cpu = [], [], []
    col = {"ttft_p99": "ttft", "e2e_p99": "e2e", "itl_p99": "itl" if run.itl_stamped else "ttft"}[
        run.metric
    ]
    for w in range(run.n):
        on = run.in_spike(w)
        server = run.base_latency_ms - 0.5 + _noise(rng, 2.0)
        server += 0.0 if not on else run.latency_rise_ms - run.transit_rise_ms
        gap = 0.5 + _noise(rng, 0.1) + (run.transit_rise_ms if on else 0.0)
        transit.append(
            {
                "window": w,
                f"client_{col}_p99_ms": server + gap,
                f"server_{col}_p99_ms": server,
                "merged_first_share": 0.0,
            }
        )
        lag = 1.0 + abs(_noise(rng, 0.3)) + (run.client_lag_rise_ms if on else 0.0)
        block = max(lag, run.client_block_ms if on else 0.0)
        client.append(
            {
                "window": w,
                "lag_p99_ms": lag,
                "lag_max_ms": block + 1.0,
                "read_delay_p99_ms": lag,
                "slot_waits": 0,
                "in_flight": (
                    run.users_in_spike
                    if run.users_in_spike is not None and (on or (run.users_stay and w > run.last))
                    else run.users
                ),
            }
        )
        wait = 10.0 + abs(_noise(rng, 2.0)) + (run.runq_rise_ms_per_s if on else 0.0)
        cpu.append(
            {
                "window": w,
                "pid": 41,
                "role": "engine",
                "runq_wait_ms_per_s": wait,
                "cpu_ms_per_s": 900.0 - (run.runq_rise_ms_per_s if on else 0.0),
                "involuntary_switches_per_s": 5.0
                + (50.0 if on and run.runq_rise_ms_per_s else 0.0),
            }
        )
    return transit, client, cpu


def _outputs(run: SpikeRun) -> list[dict]:
    if run.loop_rate is None:
        return []
    rows = []
    for w in range(run.n):
        looping = run.in_spike(w) and run.loop_rate > 0.1
        ids = [1, 2, 3] * 20 if looping else list(range(60))
        rows.append(
            {"window": w, "output_tokens": len(ids), "max_tokens": 256, "output_token_ids": ids}
        )
    return rows


def spike_signals(run: SpikeRun) -> tuple[Spike, RunSignals]:
    """The spike and the RunSignals of `run` (see SpikeRun's fields)."""
    rng = np.random.default_rng(run.seed)
    steps = _steps(run, rng)
    windows, step_windows = _windows(run, steps, rng)
    transit, client, cpu = _outside(run, rng)
    signals = RunSignals(
        window_s=1.0,
        windows=windows,
        step_windows=step_windows,
        steps=steps,
        gc_pauses=[],
        request_outputs=_outputs(run),
        client_windows=client,
        transit_windows=transit,
        process=ProcessSignals(cpu_windows=cpu),
    )
    return run.spike(), signals
