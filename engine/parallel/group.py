"""Rank 0's side of tensor parallelism: start the worker processes, join the process group, and
broadcast each step's inputs and the control commands (arm faults, flush, stop)."""

from __future__ import annotations

import multiprocessing as mp
import socket
from pathlib import Path

import torch
import torch.distributed as dist

from engine.config import EngineConfig
from engine.model import AttentionBatch
from engine.parallel.comm import TPComm
from engine.parallel.protocol import (
    OP_ARM,
    OP_FLUSH,
    OP_STOP,
    StepHeader,
    control_header,
    pack_step,
)
from engine.parallel.worker import init_group, rank_device, worker_main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TPGroup:
    """Workers 1..tp-1 as spawned processes plus the process group; rank 0 is this process."""

    def __init__(self, config: EngineConfig, run_dir: str | Path | None, faults: list[dict]):
        self.world_size = config.tp
        self.device = rank_device(config, 0)
        port = free_port()
        ctx = mp.get_context("spawn")  # fresh interpreters: no forked torch/thread state
        self.workers = [
            ctx.Process(
                target=worker_main,
                name=f"spikelens-tp-rank{r}",
                daemon=True,
                args=(
                    r,
                    config.tp,
                    port,
                    config.to_dict(),
                    None if run_dir is None else str(run_dir),
                    faults,
                ),
            )
            for r in range(1, config.tp)
        ]
        for w in self.workers:
            w.start()
        init_group(0, config.tp, port, self.device)
        self.comm = TPComm(0, config.tp, self.device)
        self._closed = False

    def _send(self, t: torch.Tensor, timed: bool = True) -> None:
        self.comm.broadcast(t.to(self.device), timed=timed)

    def broadcast_step(
        self,
        header: StepHeader,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attn: AttentionBatch,
    ) -> None:
        """Send one step's inputs to the workers (timed into rank 0's comm_ms)."""
        self._send(header.to_tensor())
        self._send(pack_step(input_ids, positions, attn))

    def arm(self, t0_ns: int) -> None:
        self._send(control_header(OP_ARM, t0_ns), timed=False)

    def flush(self) -> None:
        """Ask the workers to write their files and wait until they have."""
        self._send(control_header(OP_FLUSH), timed=False)
        dist.barrier()

    def abort(self) -> None:
        """Tear down without the stop handshake (rank 0 failed during startup)."""
        self._closed = True
        for w in self.workers:
            w.terminate()
            w.join(5)
        dist.destroy_process_group()

    def close(self, timeout_s: float = 30.0) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._send(control_header(OP_STOP), timed=False)
            dist.barrier()
        finally:
            for w in self.workers:
                w.join(timeout_s)
                if w.is_alive():
                    w.terminate()
            dist.destroy_process_group()
