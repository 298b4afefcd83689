"""A worker rank (1..tp-1): holds its slice of the model and KV cache and runs each forward that
rank 0 broadcasts, in lockstep. It writes its own steps/gc rows (``rank`` column set) and applies
the ``comm.*`` faults (the others act on rank 0's scheduler, sampler or process)."""

from __future__ import annotations

import time
from datetime import timedelta

import torch
import torch.distributed as dist

from engine.config import EngineConfig
from engine.faults import FaultClock
from engine.kv_cache import KVCache
from engine.model_loader import load_model, resolve_device
from engine.parallel.comm import TPComm
from engine.parallel.protocol import (
    HEADER_LEN,
    OP_ARM,
    OP_FLUSH,
    OP_STEP,
    OP_STOP,
    StepHeader,
    unpack_step,
)
from engine.telemetry import StepRecord, Telemetry
from spikelens_common.fault_spec import parse_fault_specs


class WorkerContext:
    """What fault injectors may touch on a worker (the same attribute names as on LLMEngine)."""

    def __init__(self, comm: TPComm, device: torch.device):
        self.comm, self.device = comm, device


def rank_device(config: EngineConfig, rank: int) -> torch.device:
    device = resolve_device(config)
    if device.type == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    return device


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def init_group(rank: int, world_size: int, port: int, device: torch.device) -> None:
    dist.init_process_group(
        backend_for(device),
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=300),
    )


def worker_main(
    rank: int,
    world_size: int,
    port: int,
    config_dict: dict,
    run_dir: str | None,
    faults: list[dict],
) -> None:
    config = EngineConfig.from_dict(config_dict)
    torch.set_num_threads(config.threads)
    device = rank_device(config, rank)
    init_group(rank, world_size, port, device)
    model, _ = load_model(config, device, rank, world_size)
    args = model.args
    kv = KVCache(
        args.n_layers,
        config.kv_blocks,
        config.block_size,
        model.model.decoder_layers()[0].self_attn.n_kv_heads,
        args.head_dim,
        model.lm_head.weight.dtype,
        device,
    )
    comm = TPComm(rank, world_size, device)
    ctx = WorkerContext(comm, device)
    telemetry = Telemetry(run_dir, rank)
    fault_sched = FaultClock([s for s in parse_fault_specs(faults) if s.kind.startswith("comm.")])
    header = torch.zeros(HEADER_LEN, dtype=torch.long, device=device)
    try:
        while True:
            comm.broadcast(header, timed=False)  # waiting here is idle time, not comm time
            h = header.tolist()
            op = h[0]
            if op == OP_STEP:
                _run_step(
                    StepHeader.from_list(h), model, kv, comm, ctx, telemetry, fault_sched, device
                )
            elif op == OP_ARM:
                fault_sched.arm(h[11])
            elif op == OP_FLUSH:
                telemetry.flush()
                dist.barrier()
            elif op == OP_STOP:
                fault_sched.shutdown(ctx)
                telemetry.flush()
                dist.barrier()
                break
    finally:
        telemetry.close()
        dist.destroy_process_group()


def _run_step(
    h: StepHeader,
    model,
    kv,
    comm: TPComm,
    ctx,
    telemetry: Telemetry,
    fault_sched: FaultClock,
    device,
) -> None:
    start_ns = time.time_ns()
    fault_sched.begin_step(ctx, start_ns)
    comm.begin_step()
    comm.link_extra_floats = h.link_extra_floats  # rank 0 decides: buffers must match
    payload = torch.empty(h.payload_len, dtype=torch.long, device=device)
    comm.broadcast(payload, timed=False)  # sent right after the header: part of receiving the step
    ids, pos, attn = unpack_step(h, payload)
    t1 = time.perf_counter_ns()
    model(ids, pos, attn, kv.layers, comm, compute_logits=False)
    if device.type == "cuda":
        torch.cuda.synchronize(
            device
        )  # workers have no sampled ids to wait for: sync to close the step
    t2 = time.perf_counter_ns()
    end_ns = time.time_ns()
    fault_sched.end_step(end_ns)
    telemetry.steps.record(
        StepRecord(
            step=h.step,
            start_ns=start_ns,
            end_ns=end_ns,
            batch_size=h.batch_size,
            prefill_tokens=int(sum(attn.prefill_lens)),
            decode_tokens=h.num_decode,
            schedule_ms=0.0,
            forward_ms=(t2 - t1) / 1e6,
            penalty_ms=0.0,
            sample_ms=0.0,
            comm_ms=comm.take_ms(),
            kv_blocks_used=h.kv_used,
            kv_blocks_total=h.kv_total,
            preempted=h.preempted,
            waiting=h.waiting,
        )
    )
