"""Tensor parallelism (tp: 2, gloo on CPU): greedy output equals tp: 1, every rank writes comm_ms per
step, and the comm.* faults show as communication time where docs/design.md says (straggler: the *other*
rank waits; slow link: every rank moves more bytes and waits); TPComm's padded all-reduce keeps the
values and counts the bytes."""

import statistics
import time

import pyarrow.parquet as pq

from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams


def greedy(n):
    return SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)


def test_tp2_greedy_equals_tp1_and_every_rank_writes_comm_ms(
    tmp_path, tiny_config, run_to_completion
):
    outs = {}
    for tp in (1, 2):
        eng = LLMEngine(tiny_config(tp=tp), run_dir=tmp_path / f"tp{tp}")
        try:
            for i in range(3):
                eng.add_request(f"r{i}", [5 + i, 60, 700, 8000], greedy(8 + i))
            outs[tp] = run_to_completion(eng)
        finally:
            eng.close()
    assert outs[2] == outs[1]
    rows = pq.read_table(tmp_path / "tp2" / "steps.parquet").to_pylist()
    by_rank = {r: [x for x in rows if x["rank"] == r] for r in (0, 1)}
    assert [x["step"] for x in by_rank[0]] == [x["step"] for x in by_rank[1]] == list(range(10))
    assert all(x["comm_ms"] > 0 for x in rows)
    assert {x["rank"] for x in pq.read_table(tmp_path / "tp2" / "gc.parquet").to_pylist()} <= {0, 1}


def test_comm_faults_show_in_comm_ms(tmp_path, tiny_config):
    faults = [
        {
            "kind": "comm.straggler",
            "start_s": 0.8,
            "duration_s": 1.0,
            "params": {"rank": 1, "delay_ms": 30},
        },
        # 4 MiB of extra payload in every all-reduce: the transport moves it (~5 ms a call on gloo)
        {
            "kind": "comm.slow_link",
            "start_s": 2.4,
            "duration_s": 1.0,
            "params": {"extra_floats": 1 << 20},
        },
    ]
    eng = LLMEngine(tiny_config(tp=2), run_dir=tmp_path, faults=faults)
    try:
        t0 = time.time_ns()
        eng.arm_faults(t0)
        n = 0
        while time.time_ns() - t0 < 4.0e9:
            while len(eng.scheduler.running) + len(eng.scheduler.waiting) < 2:
                eng.add_request(f"r{n}", [3 + n % 50, 4, 5], greedy(30))
                n += 1
            eng.step()
    finally:
        eng.close()
    windows = {f["kind"]: f for f in pq.read_table(tmp_path / "faults.parquet").to_pylist()}
    assert {f["cause"] for f in windows.values()} == {"communication"}
    steps = pq.read_table(tmp_path / "steps.parquet").to_pylist()
    starts = {(r["rank"], r["step"]): r for r in steps}

    # Classify by rank 0's step timing (lockstep), excluding steps that straddle a boundary.
    def within(step, kind):
        r0, w = starts[(0, step)], windows[kind]
        return w["start_ns"] <= r0["start_ns"] and r0["end_ns"] <= w["end_ns"]

    def touches(step):
        r0 = starts[(0, step)]
        return any(
            r0["start_ns"] <= w["end_ns"] and w["start_ns"] <= r0["end_ns"]
            for w in windows.values()
        )

    def med(rank, pred):
        xs = [r["comm_ms"] for r in steps if r["rank"] == rank and pred(r["step"])]
        assert len(xs) >= 5
        return statistics.median(xs)

    base = {rank: med(rank, lambda s: not touches(s)) for rank in (0, 1)}
    strag = {rank: med(rank, lambda s: within(s, "comm.straggler")) for rank in (0, 1)}
    slow = {rank: med(rank, lambda s: within(s, "comm.slow_link")) for rank in (0, 1)}
    # Straggler on rank 1: rank 0 waits ~30 ms per step; rank 1 itself does not.
    assert strag[0] > base[0] + 15 and strag[1] < strag[0] - 15
    # Slow link: 4 all-reduces per step (2 layers), each moving 4 MiB more, on both ranks.
    assert slow[0] > base[0] + 8 and slow[1] > base[1] + 8
    slow_steps = sum(1 for r in steps if r["rank"] == 0 and within(r["step"], "comm.slow_link"))
    assert eng.comm.bytes_reduced >= slow_steps * 4 * (1 << 20) * 4  # the bytes really moved


def test_slow_link_pads_the_collective_and_keeps_values(tmp_path):
    import torch
    import torch.distributed as dist

    from engine.parallel.comm import TPComm

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        comm = TPComm(0, 1, torch.device("cpu"))
        t = torch.arange(6, dtype=torch.float32).view(2, 3)
        comm.all_reduce(t)
        plain = comm.bytes_reduced
        comm.link_extra_floats = 1000
        for _ in range(2):  # the reused buffer's padding is zeroed every call
            comm.all_reduce(t)
        assert plain == 6 * 4 and comm.bytes_reduced - plain == 2 * (6 + 1000) * 4
        assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        assert comm.take_ms() > 0
    finally:
        dist.destroy_process_group()
