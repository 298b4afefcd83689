"""Build run directories for warehouse and rca tests, in the file formats of docs/design.md.

A small discrete-event simulation of a continuous-batching engine under closed-loop load: each
user sends a request as soon as its previous one finishes; every engine step serves each running
sequence one token; stage times follow a simple cost model with seeded noise (including rare
outliers, as on a busy 2-core box). An incident changes the model during [start_s, end_s):
  gc          GC pauses (recorded in gc.parquet) land inside the forward stage of steps
  penalty     penalty_ms per step grows by `magnitude` ms
  load        extra users join (batch and queue grow; the per-token cost of forward is unchanged)
  comm        (tp=2) rank 1 arrives `magnitude` ms late at each all-reduce; rank 0 waits in comm_ms
  kv          the KV budget shrinks: sequences are preempted and recomputed (prefill again)
  repetition  new requests loop until max_tokens (256): long outputs of repeated token ids
  alloc       large tensors allocated and touched each step: forward +`magnitude` ms, ~24k page faults
  host        other tenants load the box: every stage `magnitude`× slower (not a fault: no ground truth)
With `collectors=True` the run also gets the collectors' files (collect/): py-spy stack segments
of the engine (penalty: the step loop's share in sampling_penalties rises from 10 % to 40 %), GC
hook rows (gc: gen-2 pauses of `magnitude` ms every 500 ms) and /proc counters (host: run-queue
wait 20 → 300 ms/s and involuntary switches 20 → 500 /s); `collectors_truncated` cuts the GC
file's last line in half, as a SIGKILLed process leaves it.
The ground truth is written to faults.parquet, like the engine does.
For the cause-vs-consequence tests: `step_trace=False` writes a /metrics scrape instead of the
step trace (`scrape_metrics`: an engine driven without step traces, as vLLM); `cpu_theft`
('sibling' | 'outside') gives the engine's tree a second process and makes the engine's process
wait for a CPU that process takes, or that leaves the tree; `wait_region` puts the waiting process
in a stack region such as collective_wait; `status` and `engine` fill run.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CAUSE_OF_INCIDENT = {
    "gc": ("memory.gc_storm", "memory"),
    "penalty": ("penalty.slow_path", "penalty"),
    "load": ("load.burst", "load"),
    "comm": ("comm.straggler", "communication"),
    "kv": ("memory.kv_pressure", "memory"),
    "repetition": ("penalty.repetition", "penalty"),
    "alloc": ("memory.alloc_churn", "memory"),
}
DEFAULT_MAGNITUDE = {
    "gc": 150.0,
    "penalty": 40.0,
    "load": 18.0,
    "comm": 30.0,
    "kv": 0.3,
    "repetition": 256.0,
    "host": 1.9,
    "alloc": 40.0,
    "steal": 0.5,
}


@dataclass
class SimSpec:
    run_id: str = "20261201T000000Z-test-0001"
    duration_s: float = 40.0  # measured load
    warmup_s: float = 3.0
    users: int = 6  # closed-loop concurrency outside the incident
    max_num_seqs: int = 32
    output_tokens: tuple[int, int] = (20, 40)
    forward_base_ms: float = 8.0  # forward = base + per_seq * decode + per_prefill * prefill
    forward_per_seq_ms: float = 0.6
    forward_per_prefill_ms: float = 0.02
    incident: str | None = None  # gc | penalty | load | comm | kv | repetition | steal | None
    tp: int = 1  # ranks writing steps (comm needs 2)
    late_rank: int = 1  # comm: the rank that arrives late at each all-reduce
    incident_start_s: float = 20.0
    incident_duration_s: float = 8.0
    magnitude: float = 0.0  # gc: pause ms; penalty: extra ms; load: extra users; comm: delay
    # ms; kv: preemption probability per step; repetition: max_tokens; steal: share stolen
    seed: int = 0
    noise: float = 0.08  # lognormal sigma of forward time
    outlier_p: float = 0.01  # share of steps with a scheduler hiccup …
    outlier_ms: float = 6.0  # … of this many ms
    contention_p: float = 0.0  # per step: chance a burst of box contention starts …
    contention: tuple[float, float] = (1.3, 2.0)  # … slowing every stage by a factor in this range
    contention_s: tuple[float, float] = (1.0, 3.0)  # … for this many seconds
    t0_ns: int = 1_800_000_000_000_000_000
    extra_files: dict = field(default_factory=dict)
    collectors: bool = False  # also write collect/ (stacks, GC hook, /proc) files
    collectors_truncated: bool = False
    # the load generator's verdict on itself (loadgen.client_health.verdict); not valid → the run's
    # status is "invalid", as flows.run_scenario marks it
    client_health: dict | None = None
    # --- options of the cause-vs-consequence and validity tests (tests/rca/test_consequences.py,
    # tests/rca/test_validity.py); see `scrape_metrics` and `collector_tables` ---
    status: str = "ok"  # run.json status: ok | invalid (the load generator saturated)
    # run.json's engine block, a dict or its JSON text (hashable: warehouse_with caches on
    # fields); None: {"model": "sim", "tp": tp}
    engine: dict | str | None = None
    # False: no step trace and no engine GC log, a /metrics scrape instead (an engine without
    # step traces, as vLLM is driven)
    step_trace: bool = True
    gc_objects_per_token: float = 40.0  # garbage each streamed token leaves (scrape's GC counters)
    # During the incident window an engine process waits for a CPU: its run-queue wait rises by
    # cpu_theft_ms_per_s and its own CPU falls by as much (its steps slow alike). 'sibling': a
    # second process of the engine's tree (sibling_role) gains that CPU — and, in a GC storm, it
    # is the one collecting; 'outside': nobody in the tree gains it (hogs), the sibling loses some.
    cpu_theft: str | None = None
    cpu_theft_ms_per_s: float = 300.0
    waiting_role: str = "engine"  # the role of the process that waits (ENGINE_PID)
    sibling_role: str = "EngineCore"
    # the stack region the waiting process sits in during the window (e.g. collective_wait: a
    # Worker blocked on its EngineCore), None: unchanged
    wait_region: str | None = None
    # the scenario's `detector:` preset (rca.config.PRESETS); None: the scenario names none
    detector: str | None = None


def _defaults(spec: SimSpec) -> float:
    return spec.magnitude or DEFAULT_MAGNITUDE.get(spec.incident, 0.0)


def _gc_row(start_ns: int, pause_ms: float, generation: int, collected: int) -> dict:
    """One collection of the engine process (pid 100, rank 0) in gc_pauses' columns."""
    return {
        "pid": 100,
        "rank": 0,
        "start_ns": start_ns,
        "end_ns": start_ns + int(pause_ms * 1e6),
        "generation": generation,
        "collected": collected,
    }


def simulate(spec: SimSpec) -> dict[str, pa.Table]:
    """Run the simulation; returns the tables of a run directory keyed by file stem."""
    rng = np.random.default_rng(spec.seed)
    magnitude = _defaults(spec)
    load_start = spec.t0_ns
    begin = load_start - int(spec.warmup_s * 1e9)
    end = load_start + int(spec.duration_s * 1e9)
    inc_lo = load_start + int(spec.incident_start_s * 1e9)
    inc_hi = inc_lo + int(spec.incident_duration_s * 1e9)

    def in_incident(t: int) -> bool:
        return spec.incident is not None and inc_lo <= t < inc_hi

    requests, tokens, steps, gcs = [], [], [], []
    queue: list[dict] = []  # sent, not admitted
    running: list[dict] = []
    users_busy: dict[int, bool] = {}
    next_req = 0
    t = begin
    step = 0
    next_gc_ns = inc_lo
    contention_until, contention_factor = 0, 1.0

    def send(user: int, now: int) -> None:
        nonlocal next_req
        looping = spec.incident == "repetition" and in_incident(now)
        max_tokens = int(magnitude) if looping else 64
        req = {
            "request_id": f"r{next_req:06d}",
            "user": f"u{user}",
            "sent_ns": now,
            "intended_send_ns": now,
            "phase": "measure" if now >= load_start else "warmup",
            "prompt_tokens": int(rng.integers(16, 64)),
            "output_tokens": max_tokens if looping else int(rng.integers(*spec.output_tokens)),
            "max_tokens": max_tokens,
            "looping": looping,
            "first_token_ns": None,
            "done_ns": None,
            "emitted": 0,
            "recompute": False,
            "u": user,
        }
        next_req += 1
        queue.append(req)
        users_busy[user] = True

    while t < end:
        users = spec.users + (int(magnitude) if spec.incident == "load" and in_incident(t) else 0)
        for u in range(users):
            if not users_busy.get(u):
                send(u, t)
        # schedule: admit from the queue up to max_num_seqs
        admitted = []
        while queue and len(running) < spec.max_num_seqs:
            admitted.append(queue.pop(0))
        # a recomputed sequence prefills its prompt and everything it had generated
        prefill = sum(
            r["prompt_tokens"] + (r["emitted"] if r["recompute"] else 0) for r in admitted
        )
        for r in admitted:
            r["recompute"] = False
        running.extend(admitted)
        preempted = 0
        if (
            spec.incident == "kv"
            and in_incident(t)
            and len(running) > 1
            and rng.random() < magnitude
        ):
            victim = running.pop()  # the newest sequence gives its blocks back
            victim["recompute"] = True
            queue.insert(0, victim)
            preempted = 1
        batch = len(running)
        if batch == 0:
            t += 1_000_000
            continue
        noise = float(rng.lognormal(0.0, spec.noise))
        outlier = spec.outlier_ms if rng.random() < spec.outlier_p else 0.0  # scheduler hiccup
        if t >= contention_until and rng.random() < spec.contention_p:  # other tenants busy
            contention_until = t + int(rng.uniform(*spec.contention_s) * 1e9)
            contention_factor = float(rng.uniform(*spec.contention))
        slow = contention_factor if t < contention_until else 1.0
        if spec.incident == "host" and in_incident(t):
            slow = magnitude
        if spec.incident == "steal" and in_incident(t):  # the hypervisor runs another guest
            slow /= 1.0 - magnitude
        if spec.cpu_theft and in_incident(t):  # runnable but waiting: every stage slower
            slow *= 1000.0 / (1000.0 - spec.cpu_theft_ms_per_s)
        schedule_ms = (0.3 + 0.01 * batch) * slow
        forward_ms = (
            spec.forward_base_ms
            + spec.forward_per_seq_ms * batch
            + spec.forward_per_prefill_ms * prefill
        ) * noise * slow + outlier
        penalty_ms = (0.4 + 0.05 * batch) * slow
        if spec.incident == "penalty" and in_incident(t):
            penalty_ms += magnitude * float(rng.uniform(0.8, 1.2))
        sample_ms = (0.5 + 0.03 * batch) * slow
        comm_ms = 0.3 * float(rng.uniform(0.5, 1.5)) if spec.tp > 1 else 0.0
        late_ms = (
            magnitude * float(rng.uniform(0.9, 1.1))
            if spec.incident == "comm" and in_incident(t)
            else 0.0
        )
        start = t
        fwd_start = start + int(schedule_ms * 1e6)
        gc_in_step = 0.0
        if spec.incident == "gc" and in_incident(t) and t >= next_gc_ns:
            pause = magnitude * float(rng.uniform(0.8, 1.2))
            gcs.append(_gc_row(fwd_start + int(1e6), pause, 2, int(rng.integers(1000, 5000))))
            gc_in_step = pause
            next_gc_ns = t + int(0.4e9)
        elif rng.random() < 0.02:  # routine young-generation collections, everywhere
            pause = float(rng.uniform(0.2, 1.0))
            gcs.append(_gc_row(fwd_start + int(0.5e6), pause, 0, int(rng.integers(10, 200))))
            gc_in_step = pause
        forward_ms += gc_in_step  # the pause lands inside the running stage
        churning = spec.incident == "alloc" and in_incident(t)
        if churning:  # mapping and touching fresh pages inside forward
            forward_ms += magnitude * float(rng.uniform(0.8, 1.2))
        page_faults = int(rng.integers(20_000, 26_000)) if churning else int(rng.integers(0, 60))
        total_ms = schedule_ms + forward_ms + penalty_ms + sample_ms + comm_ms + late_ms + 0.2
        t_end = start + int(total_ms * 1e6)
        kv_total = 64 if spec.incident == "kv" and in_incident(t) else 512
        common = {
            "step": step,
            "start_ns": start,
            "end_ns": t_end,
            "batch_size": batch,
            "prefill_tokens": prefill,
            "decode_tokens": batch - len(admitted),
            "schedule_ms": schedule_ms,
            "forward_ms": forward_ms,
            "penalty_ms": penalty_ms,
            "sample_ms": sample_ms,
            "kv_blocks_used": min(kv_total, 4 * batch),
            "kv_blocks_total": kv_total,
            "preempted": preempted,
            "waiting": len(queue),
            "page_faults": page_faults,
        }
        # the punctual rank waits for the late one inside the all-reduce; the late rank spent that
        # time before it (outside every stage timer)
        for rank in range(spec.tp):
            steps.append(
                {
                    **common,
                    "rank": rank,
                    "comm_ms": comm_ms + (0.0 if rank == spec.late_rank else late_ms),
                }
            )
        step += 1
        still = []
        for r in running:
            arrival = t_end + int(rng.integers(50_000, 400_000))  # network + client
            tokens.append(
                {
                    "request_id": r["request_id"],
                    "index": r["emitted"],
                    "arrival_ns": arrival,
                    "n_tokens": 1,
                }
            )
            if r["emitted"] == 0:
                r["first_token_ns"] = arrival
            r["emitted"] += 1
            if r["emitted"] >= r["output_tokens"]:
                r["done_ns"] = arrival + 100_000
                users_busy[r["u"]] = False
                requests.append(r)
            else:
                still.append(r)
        running = still
        t = t_end

    req_rows = [
        {k: v for k, v in r.items() if k not in ("emitted", "u", "recompute", "looping")}
        for r in requests
    ]
    for r in req_rows:
        r.update(
            status="ok",
            error=None,
            temperature=0.8,
            top_p=1.0,
            top_k=0,
            frequency_penalty=0.0,
            presence_penalty=0.0,
            repetition_penalty=1.0,
        )

    def output_ids(r: dict) -> list[int]:
        if r["looping"]:  # a short cycle repeated until max_tokens
            cycle = [int(x) for x in rng.integers(100, 30000, 4)]
            return (cycle * (r["output_tokens"] // 4 + 1))[: r["output_tokens"]]
        return [int(x) for x in rng.integers(100, 30000, r["output_tokens"])]

    tables = {
        "requests": pa.Table.from_pylist(req_rows),
        "tokens": pa.Table.from_pylist(tokens),
        "steps": pa.Table.from_pylist(steps),
        "gc": pa.Table.from_pylist(
            gcs,
            schema=pa.schema(
                [
                    ("pid", pa.int32()),
                    ("rank", pa.int32()),
                    ("start_ns", pa.int64()),
                    ("end_ns", pa.int64()),
                    ("generation", pa.int32()),
                    ("collected", pa.int64()),
                ]
            ),
        ),
        "engine_requests": pa.Table.from_pylist(
            [
                {
                    "request_id": r["request_id"],
                    "arrival_ns": r["sent_ns"] + 200_000,
                    "first_token_ns": r["first_token_ns"],
                    "done_ns": r["done_ns"],
                    "prompt_tokens": r["prompt_tokens"],
                    "output_tokens": r["output_tokens"],
                    "finish_reason": "length" if r["looping"] else "stop",
                    "output_token_ids": output_ids(r),
                }
                for r in requests
            ]
        ),
    }
    if spec.incident in CAUSE_OF_INCIDENT:
        kind, cause = CAUSE_OF_INCIDENT[spec.incident]
        tables["faults"] = pa.Table.from_pylist(
            [
                {
                    "kind": kind,
                    "cause": cause,
                    "start_ns": inc_lo,
                    "end_ns": inc_hi,
                    "params": json.dumps({"magnitude": magnitude}),
                }
            ]
        )
    return tables


def run_json(spec: SimSpec) -> dict:
    faults = []
    if spec.incident in CAUSE_OF_INCIDENT:
        faults = [
            {
                "kind": CAUSE_OF_INCIDENT[spec.incident][0],
                "start_s": spec.incident_start_s,
                "duration_s": spec.incident_duration_s,
                "params": {},
            }
        ]
    return {
        "run_id": spec.run_id,
        "scenario": {
            "name": f"sim-{spec.incident or 'control'}",
            **({"detector": spec.detector} if spec.detector else {}),
        },
        "scenario_name": f"sim-{spec.incident or 'control'}",
        "scenario_path": "scenarios/sim.yaml",
        "engine": (
            {"model": "sim", "tp": spec.tp}
            if spec.engine is None
            else json.loads(spec.engine)
            if isinstance(spec.engine, str)
            else spec.engine
        ),
        "faults": faults,
        "git_commit": "0" * 40,
        "host": "test",
        "started_ns": spec.t0_ns - int(spec.warmup_s * 1e9) - int(1e9),
        "ended_ns": spec.t0_ns + int(spec.duration_s * 1e9) + int(1e9),
        "load_started_ns": spec.t0_ns,
        "warmup_s": spec.warmup_s,
        "duration_s": spec.duration_s,
        "command": "spikelens run scenarios/sim.yaml",
        "status": spec.status if (spec.client_health or {}).get("valid", True) else "invalid",
        "errors": [],
        **({"extra": {"client_health": spec.client_health}} if spec.client_health else {}),
    }


ENGINE_PID = 4242
# The step loop's region per 10-ms slot of each 100-ms cycle, outside and inside a penalty incident.
_STEP_SLOTS = {
    False: ["model_forward"] * 6 + ["sampling_penalties", "scheduler", "idle", "idle"],
    True: ["model_forward"] * 4 + ["sampling_penalties"] * 4 + ["scheduler", "idle"],
}


def collector_tables(spec: SimSpec) -> tuple[pa.Table, pa.Table, list[dict]]:
    """(stack segments, /proc rows, GC hook rows) of one engine process, see the module docstring."""
    begin = spec.t0_ns - int(spec.warmup_s * 1e9)
    end = spec.t0_ns + int(spec.duration_s * 1e9)
    inc_lo = spec.t0_ns + int(spec.incident_start_s * 1e9)
    inc_hi = inc_lo + int(spec.incident_duration_s * 1e9)
    magnitude = _defaults(spec)
    slot = 10_000_000
    stacks = [
        {
            "pid": ENGINE_PID,
            "role": "engine",
            "tid": 1,
            "start_ns": begin,
            "end_ns": end,
            "region": "idle",
            "rule": 0,
            "frame": "EpollSelector.select (selectors.py:468)",
            "leaf": "EpollSelector.select",
            "depth": 9,
        }
    ]
    for i, t in enumerate(range(begin, end, slot)):
        during = spec.incident == "penalty" and inc_lo <= t < inc_hi
        region = _STEP_SLOTS[during][i % 10]
        if spec.wait_region and inc_lo <= t < inc_hi and i % 10 < 3:
            region = spec.wait_region  # blocked on a sibling instead of running the step
        stacks.append(
            {
                "pid": ENGINE_PID,
                "role": "engine",
                "tid": 2,
                "start_ns": t,
                "end_ns": t + slot,
                "region": region,
                "rule": 1,
                "frame": f"{region}_fn (x.py:1)",
                "leaf": "leaf",
                "depth": 5,
            }
        )
    proc, gcs = [], []
    cpu = wait = invol = 0
    for t in range(begin, end + 1, 100_000_000):
        host = spec.incident == "host" and inc_lo <= t < inc_hi
        cpu, wait, invol = (
            cpu + 60_000_000,
            wait + (30_000_000 if host else 2_000_000),
            invol + (50 if host else 2),
        )
        proc.append(
            {
                "ts_ns": t,
                "pid": ENGINE_PID,
                "ppid": 1,
                "role": "engine",
                "cpu_ns": cpu,
                "run_ns": cpu,
                "wait_ns": wait,
                "timeslices": t // 10_000_000,
                "voluntary_switches": 10 * t // 100_000_000,
                "involuntary_switches": invol,
                "threads": 12,
                "rss_bytes": 1 << 30,
            }
        )
        storm = spec.incident == "gc" and inc_lo <= t < inc_hi
        if storm and (t - inc_lo) % 500_000_000 == 0:
            gcs.append((t + 1_000_000, t + 1_000_000 + int(magnitude * 1e6), 2))
        elif not storm:
            gcs.append((t + 1_000_000, t + 1_200_000, 0))
    gc_rows = [
        {
            "pid": ENGINE_PID,
            "ppid": 1,
            "tid": ENGINE_PID,
            "role": "engine",
            "start_ns": s,
            "end_ns": e,
            "generation": g,
            "collected": 10,
            "uncollectable": 0,
        }
        for s, e, g in gcs
    ]
    if spec.cpu_theft:
        proc, gc_rows = _tree_rows(spec, proc, gc_rows, (begin, end, inc_lo, inc_hi))
    role = spec.waiting_role if spec.cpu_theft else "engine"
    for row in stacks:
        row["role"] = role
    return pa.Table.from_pylist(stacks), pa.Table.from_pylist(proc), gc_rows


def cpu_tick_table(spec: SimSpec) -> pa.Table:
    """The /proc sampler's /proc/stat rows (collectors.cpu_steal) for two engine CPUs at 10 Hz:
    busy half the time, 0.5 % of their wanted time stolen; in a "steal" incident the hypervisor
    takes `magnitude` of it (the steps slow by 1 / (1 - magnitude), no process counter moves)."""
    begin = spec.t0_ns - int(spec.warmup_s * 1e9)
    end = spec.t0_ns + int(spec.duration_s * 1e9)
    inc_lo = spec.t0_ns + int(spec.incident_start_s * 1e9)
    inc_hi = inc_lo + int(spec.incident_duration_s * 1e9)
    rows, total, idle, steal = [], 0, 0, 0
    for t in range(begin, end + 1, 100_000_000):
        share = _defaults(spec) if spec.incident == "steal" and inc_lo <= t < inc_hi else 0.005
        total, idle, steal = total + 100_000_000, idle + 50_000_000, steal + int(50_000_000 * share)
        for cpu in (0, 1):
            rows.append(
                {"ts_ns": t, "cpu": cpu, "total_ns": total, "idle_ns": idle, "steal_ns": steal}
            )
    return pa.Table.from_pylist(rows)


def _write_collector_files(run_dir: Path, spec: SimSpec) -> None:
    stacks, proc, gc_rows = collector_tables(spec)
    collect = run_dir / "collect"
    collect.mkdir(exist_ok=True)
    pq.write_table(stacks, collect / f"stacks-{ENGINE_PID}.parquet")
    pq.write_table(proc, collect / f"proc-{ENGINE_PID}.parquet")
    pq.write_table(cpu_tick_table(spec), collect / f"cpu-{ENGINE_PID}.parquet")
    text = "".join(json.dumps(r) + "\n" for r in gc_rows)
    if spec.collectors_truncated:
        text += json.dumps(gc_rows[-1])[:40]
    (collect / f"gc-{ENGINE_PID}.jsonl").write_text(text)


def write_run(root: Path, spec: SimSpec) -> Path:
    """Write the simulated run into root/<run_id>/ and return that directory."""
    run_dir = Path(root) / spec.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(run_json(spec)))
    tables = simulate(spec)
    if not spec.step_trace:  # an engine without step traces: what its /metrics showed instead
        tables["metrics"] = scrape_metrics(tables, spec)
        del tables["steps"], tables["gc"]
    for stem, table in tables.items():
        pq.write_table(table, run_dir / f"{stem}.parquet")
    for name, table in spec.extra_files.items():
        pq.write_table(table, run_dir / name)
    if spec.collectors:
        _write_collector_files(run_dir, spec)
    return run_dir


SIBLING_PID = ENGINE_PID + 1


def _tree_rows(
    spec: SimSpec, proc: list[dict], gc_rows: list[dict], span: tuple[int, int, int, int]
) -> tuple[list[dict], list[dict]]:
    """/proc and GC hook rows of a two-process engine tree under `spec.cpu_theft` (see SimSpec):
    the waiting process (ENGINE_PID, `waiting_role`) and its sibling (`sibling_role`)."""
    begin, end, inc_lo, inc_hi = span
    theft_per_tick = int(spec.cpu_theft_ms_per_s * 1e5)  # ns per 100-ms tick
    waiting, sibling = [], []
    lost = gained = sib_cpu = sib_wait = 0
    for row, t in zip(proc, range(begin, end + 1, 100_000_000)):
        on = inc_lo <= t < inc_hi
        if on:
            lost += theft_per_tick
            gained += theft_per_tick if spec.cpu_theft == "sibling" else -theft_per_tick // 6
        waiting.append(
            {
                **row,
                "role": spec.waiting_role,
                "cpu_ns": row["cpu_ns"] - lost,
                "run_ns": row["run_ns"] - lost,
                "wait_ns": row["wait_ns"] + lost,
            }
        )
        sib_cpu += 30_000_000
        sib_wait += 2_000_000 + (theft_per_tick // 2 if on and spec.cpu_theft == "outside" else 0)
        sibling.append(
            {
                **row,
                "pid": SIBLING_PID,
                "ppid": ENGINE_PID,
                "role": spec.sibling_role,
                "cpu_ns": sib_cpu + gained,
                "run_ns": sib_cpu + gained,
                "wait_ns": sib_wait,
                "involuntary_switches": row["involuntary_switches"] // 2,
            }
        )
    if spec.cpu_theft == "sibling":  # the sibling does the collecting that takes the CPU
        gc_rows = [
            {**r, "pid": SIBLING_PID, "tid": SIBLING_PID, "role": spec.sibling_role}
            if r["generation"] == 2
            else {**r, "role": spec.waiting_role}
            for r in gc_rows
        ]
    else:
        gc_rows = [{**r, "role": spec.waiting_role} for r in gc_rows]
    return waiting + sibling, gc_rows


def _cumulative_at(times: np.ndarray, values: np.ndarray, ts: int) -> float:
    """Sum of `values` whose time is <= ts (times sorted)."""
    return float(values[: int(np.searchsorted(times, ts, side="right"))].sum())


def scrape_metrics(
    tables: dict[str, pa.Table], spec: SimSpec, every_ns: int = 500_000_000
) -> pa.Table:
    """metrics.parquet as a /metrics scraper would have written it from the simulated engine:
    vLLM's gauges and counters (running, waiting, KV usage, preemptions, prompt and generation
    tokens, finished requests, the server's own E2E latency sum and count) and the Python GC
    counters every process exports, whose objects collected grow with the tokens streamed
    (`gc_objects_per_token`) plus what each GC of the engine collected."""
    steps = tables["steps"].to_pydict()
    keep = np.array(steps["rank"]) == 0
    end = np.array(steps["end_ns"])[keep]
    col = {k: np.array(v)[keep] for k, v in steps.items()}
    gen_tokens = np.cumsum(col["batch_size"] - (col["prefill_tokens"] > 0))
    prompt_tokens = np.cumsum(col["prefill_tokens"])
    preempted = np.cumsum(col["preempted"])
    gc = tables["gc"].to_pydict()
    gc_order = np.argsort(gc["end_ns"])
    gc_t, gc_n = np.array(gc["end_ns"])[gc_order], np.array(gc["collected"], float)[gc_order]
    req = tables["engine_requests"].to_pydict()
    order = np.argsort(req["done_ns"])
    done = np.array(req["done_ns"])[order]
    e2e_s = ((np.array(req["done_ns"]) - np.array(req["arrival_ns"])) / 1e9)[order]
    rows = []
    labels = json.dumps({"model_name": "m"})
    for ts in range(int(end[0]), int(end[-1]), every_ns):
        i = int(np.searchsorted(end, ts, side="right")) - 1
        values = (
            ("vllm:num_requests_running", labels, col["batch_size"][i]),
            ("vllm:num_requests_waiting", labels, col["waiting"][i]),
            (
                "vllm:gpu_cache_usage_perc",
                labels,
                col["kv_blocks_used"][i] / col["kv_blocks_total"][i],
            ),
            ("vllm:num_preemptions_total", labels, preempted[i]),
            ("vllm:generation_tokens_total", labels, gen_tokens[i]),
            ("vllm:prompt_tokens_total", labels, prompt_tokens[i]),
            ("vllm:request_success_total", labels, np.searchsorted(done, ts, side="right")),
            ("vllm:e2e_request_latency_seconds_sum", labels, _cumulative_at(done, e2e_s, ts)),
            (
                "vllm:e2e_request_latency_seconds_count",
                labels,
                np.searchsorted(done, ts, side="right"),
            ),
            ("process_resident_memory_bytes", "{}", 1e9),
            (
                "python_gc_objects_collected_total",
                json.dumps({"generation": "0"}),
                spec.gc_objects_per_token * gen_tokens[i] + _cumulative_at(gc_t, gc_n, ts),
            ),
            (
                "python_gc_collections_total",
                json.dumps({"generation": "0"}),
                gen_tokens[i] // 20 + np.searchsorted(gc_t, ts, side="right"),
            ),
        )
        rows += [
            {"ts_ns": ts, "name": name, "labels": lab, "value": float(v)} for name, lab, v in values
        ]
    return pa.Table.from_pylist(rows)
