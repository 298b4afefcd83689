"""LLMEngine: the step loop that ties scheduler, model, KV cache, sampling, telemetry and faults.

One ``step()`` = schedule (admit waiting requests, preempt if blocks ran out) → one forward over
every running sequence (decode tokens and new prefills together) → penalties → sampling → append
tokens, stop checks → one ``steps.parquet`` row. Not thread-safe: call every method from the thread
that steps (the server's ``AsyncEngine`` queues its commands and runs them between steps).

Stage times (``schedule_ms``, ``forward_ms``, ``penalty_ms``, ``sample_ms``) come from
``StageClock``: ``perf_counter_ns`` on the CPU, CUDA events on a GPU (read after the step's single
sync, the read-back of the sampled ids). ``comm_ms`` is 0 without tensor parallelism; with ``tp > 1``
it is the time in collectives (input broadcast + all-reduces) and ``forward_ms`` includes the
all-reduces. Worker ranks (engine.parallel.worker) write their own rows with their own comm_ms.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.config import EngineConfig
from engine.faults import FaultClock
from engine.kv_cache import KVCache
from engine.model import AttentionBatch
from engine.model_loader import load_model, resolve_device
from engine.parallel import TPComm, TPGroup
from engine.parallel.protocol import StepHeader
from engine.sampling import PenaltyState, Sampler, SamplingMetadata
from engine.sampling_params import SamplingParams
from engine.scheduler import ScheduledBatch, Scheduler
from engine.sequence import Sequence as Seq
from engine.sequence import SequenceStatus
from engine.stage_clock import StageClock
from engine.telemetry import StepRecord, Telemetry
from engine.telemetry.thread_stats import page_faults
from spikelens_common.fault_spec import FaultSpec, parse_fault_specs


@dataclass
class RequestOutput:
    """Tokens a request produced in one step (one token per step; the finishing step says why)."""

    request_id: str
    new_token_ids: list[int]
    finished: bool
    finish_reason: str | None  # stop | length (None while running)
    prompt_tokens: int = 0  # for usage
    output_tokens: int = 0  # generated so far, including new_token_ids


class LLMEngine:
    def __init__(
        self,
        config: EngineConfig,
        run_dir: str | Path | None = None,
        faults: Sequence[FaultSpec | Mapping[str, Any]] = (),
    ):
        self.config = config
        torch.set_num_threads(config.threads)
        torch.manual_seed(
            config.seed
        )  # unseeded requests draw from the global stream: reproducible runs
        fault_specs = [f for f in faults if isinstance(f, FaultSpec)] + parse_fault_specs(
            [f for f in faults if not isinstance(f, FaultSpec)]
        )
        for i, f in enumerate(fault_specs):
            if (
                f.kind.startswith("comm.") and config.tp < 2
            ):  # no collectives: the fault could not act
                raise ValueError(
                    f"faults[{i}].kind: {f.kind} needs engine.tp >= 2 (collectives between ranks), got tp={config.tp}"
                )
        self.faults = FaultClock(fault_specs)  # validates params before anything starts
        self.tp: TPGroup | None = None
        self.comm: TPComm | None = None  # timed all-reduce of tensor parallelism (None with tp: 1)
        if config.tp > 1:
            self.tp = TPGroup(config, run_dir, [dataclasses.asdict(f) for f in fault_specs])
            self.comm = self.tp.comm
            self.device = self.tp.device
        else:
            self.device = resolve_device(config)
        try:
            self.model, self.tokenizer = load_model(config, self.device, 0, config.tp)
            if config.context_len > self.model.args.max_position:
                raise ValueError(
                    f"engine.max_model_len: must be <= the model's max_position={self.model.args.max_position}, got {config.max_model_len}"
                )
        except BaseException:
            if self.tp is not None:
                self.tp.abort()  # workers would otherwise wait for rank 0 forever
            raise
        args = self.model.args
        self.vocab_size = args.vocab_size
        self.kv = KVCache(
            args.n_layers,
            config.kv_blocks,
            config.block_size,
            self.model.model.decoder_layers()[0].self_attn.n_kv_heads,
            args.head_dim,
            self.model.lm_head.weight.dtype,
            self.device,
        )
        self.scheduler = Scheduler(
            self.kv.allocator, config.block_size, config.max_num_seqs, config.token_budget
        )
        self.penalty_state = PenaltyState(config.max_num_seqs, self.vocab_size, self.device)
        self.sampler = Sampler()
        self.clock = StageClock(self.device)
        self.telemetry = Telemetry(run_dir)
        self._seqs: dict[str, Seq] = {}
        self._step = 0

    # ---- requests -----------------------------------------------------------------------------
    def add_request(
        self,
        request_id: str,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        arrival_ns: int | None = None,
    ) -> None:
        """Queue a request; it joins the running batch at a coming step. Validates the prompt."""
        prompt = list(prompt_ids)
        if not prompt:
            raise ValueError("prompt: must contain at least one token")
        if len(prompt) >= self.config.context_len:
            raise ValueError(
                f"prompt: {len(prompt)} tokens; must be < max_model_len={self.config.max_model_len}"
            )
        bad = next(
            (
                t
                for t in prompt
                if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self.vocab_size
            ),
            None,
        )
        if bad is not None:
            raise ValueError(f"prompt: token id {bad!r} outside [0, {self.vocab_size})")
        if not isinstance(params, SamplingParams):
            raise TypeError(f"params: expected SamplingParams, got {type(params).__name__}")
        seq = Seq(
            request_id, prompt, params, arrival_ns if arrival_ns is not None else time.time_ns()
        )
        if request_id in self._seqs:
            raise ValueError(f"request_id: {request_id!r} is already in the engine")
        self._seqs[request_id] = seq
        self.scheduler.add(seq)

    def abort_request(self, request_id: str) -> None:
        """Stop a request (client gone) now: its KV blocks and slot are freed; unknown ids are ignored."""
        seq = self._seqs.get(request_id)
        if seq is not None and seq.status is not SequenceStatus.FINISHED:
            self.scheduler.finish(seq, "abort", time.time_ns())
            self._log_finished(seq)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    # ---- faults and files ---------------------------------------------------------------------
    def arm_faults(self, t0_ns: int) -> None:
        """Start the fault clock (``POST /spikelens/arm``)."""
        self.faults.arm(t0_ns)
        if self.tp is not None:
            self.tp.arm(t0_ns)

    def flush(self) -> list[Path]:
        """Write steps/gc/engine_requests/faults Parquet files now (repeatable, atomic per file).
        With tensor parallelism the workers write first and rank 0 merges their rows."""
        if self.tp is not None and self.telemetry.run_dir is not None:
            self.tp.flush()
        written = self.telemetry.flush()
        if self.telemetry.run_dir is not None:
            written.append(self.faults.write(self.telemetry.run_dir / "faults.parquet"))
        return written

    def close(self) -> None:
        """End active faults, stop the worker ranks, write the files, remove the GC probe. Idempotent."""
        self.faults.shutdown(self)
        if self.tp is not None:
            self.tp.close()  # workers write their final files before they exit
        self.telemetry.flush()
        if self.telemetry.run_dir is not None:
            self.faults.write(self.telemetry.run_dir / "faults.parquet")
        self.telemetry.close()

    def __enter__(self) -> LLMEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- the step -----------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one engine step; returns one output per sequence that produced a token."""
        if not self.scheduler.has_unfinished():
            return []
        clock = self.clock
        # Fault windows open/close and state-only hooks run before the step's timers: a fault's
        # cost must land where its phenomenon's does (see each kind's module), not in schedule_ms.
        self.faults.begin_step(self, time.time_ns())
        faults0 = page_faults()
        start_ns = time.time_ns()
        m0 = clock.mark()
        if self.comm is not None:
            self.comm.begin_step()
        batch = self.scheduler.schedule()
        if not batch:
            self.faults.end_step(time.time_ns())
            return []  # everything waits (e.g. the KV budget is shrunk below any prompt)
        kv_used = self.kv.allocator.num_used  # before this step's finished sequences free theirs
        seqs = batch.sequences
        input_ids, positions, attn = self._prepare_inputs(batch)
        params_list = [s.params for s in seqs]
        slots = [s.running_slot() for s in seqs]
        m1 = clock.mark()
        if self.tp is not None:  # workers run the same forward on their slices
            self._broadcast_step(self.tp, batch, input_ids, positions, attn, kv_used)

        self.faults.in_forward(self)  # e.g. memory.alloc_churn: the forward's own allocations
        logits = self.model(input_ids, positions, attn, self.kv.layers, self.comm)  # [B, V] fp32
        m2 = clock.mark()

        for s in (
            batch.prefill
        ):  # new or recomputed: rebuild counts from its tokens (survives preemption)
            self.penalty_state.assign(s.running_slot(), s.prompt_ids, s.output_ids)
        m3 = clock.mark()
        meta = SamplingMetadata.build(
            params_list, slots, self.penalty_state
        )  # after assign: seeds use output counts
        m4 = clock.mark()
        penalized = self.sampler.penalties(logits, meta)  # fp32 [B, V]
        m5 = clock.mark()
        next_ids = self.sampler.sample(penalized, meta, penalized=True)
        self.penalty_state.update(slots, next_ids)
        token_ids = next_ids.tolist()  # the step's one host-device sync
        m6 = clock.mark()

        outputs = self._process_outputs(seqs, token_ids)
        end_ns = time.time_ns()
        self.faults.end_step(end_ns)
        marks = (m0, m1, m2, m3, m4, m5, m6)
        self._record_step(batch, attn, (start_ns, end_ns), marks, kv_used, faults0)
        self._step += 1
        return outputs

    def _record_step(
        self,
        batch: ScheduledBatch,
        attn: AttentionBatch,
        span_ns: tuple[int, int],
        marks: tuple[Any, ...],  # StageClock marks m0..m6 (ns, or CUDA events)
        kv_used: int,
        faults0: int,
    ) -> None:
        """One row of step telemetry: the stage times between the step's clock marks
        (schedule, forward, penalties, sampling), the batch and the KV cache."""
        clock, (m0, m1, m2, m3, m4, m5, m6) = self.clock, marks
        self.telemetry.steps.record(
            StepRecord(
                step=self._step,
                start_ns=span_ns[0],
                end_ns=span_ns[1],
                batch_size=len(batch.sequences),
                prefill_tokens=sum(attn.prefill_lens),
                decode_tokens=len(batch.decode),
                schedule_ms=clock.ms(m0, m1),
                forward_ms=clock.ms(m1, m2),
                penalty_ms=clock.ms(m2, m3) + clock.ms(m4, m5),
                sample_ms=clock.ms(m3, m4) + clock.ms(m5, m6),
                comm_ms=self.comm.take_ms() if self.comm is not None else 0.0,
                kv_blocks_used=kv_used,
                kv_blocks_total=self.kv.allocator.budget,
                preempted=batch.preempted,
                waiting=len(self.scheduler.waiting),
                page_faults=page_faults() - faults0,
                alloc_retries=torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)
                if self.device.type == "cuda"
                else None,
            )
        )

    def _broadcast_step(
        self,
        tp: TPGroup,
        batch: ScheduledBatch,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attn: AttentionBatch,
        kv_used: int,
    ) -> None:
        """Send the step's header and inputs to the tensor-parallel workers."""
        header = StepHeader(
            step=self._step,
            num_tokens=int(input_ids.numel()),
            num_decode=attn.num_decode,
            max_blocks=int(attn.decode_block_tables.shape[1]),
            num_prefill=len(attn.prefill_lens),
            batch_size=len(batch.sequences),
            kv_used=kv_used,
            kv_total=self.kv.allocator.budget,
            preempted=batch.preempted,
            waiting=len(self.scheduler.waiting),
            link_extra_floats=self.comm.link_extra_floats if self.comm else 0,
        )
        tp.broadcast_step(header, input_ids, positions, attn)

    def _prepare_inputs(
        self, batch: ScheduledBatch
    ) -> tuple[torch.Tensor, torch.Tensor, AttentionBatch]:
        """Flatten the step's new tokens (decode first, then prefills) and their KV slots."""
        bs = self.config.block_size
        ids: list[int] = []
        pos: list[int] = []
        slot_mapping: list[int] = []
        for s in batch.decode:
            p = s.num_tokens - 1  # the last sampled token is fed at its position
            ids.append(s.token_at(p))
            pos.append(p)
            slot_mapping.append(s.block_ids[p // bs] * bs + p % bs)
        logits_indices = list(range(len(batch.decode)))
        prefill_lens = []
        for s in batch.prefill:
            n = s.num_tokens
            ids += s.all_ids()
            pos += range(n)
            table = s.block_ids
            slot_mapping += [table[i // bs] * bs + i % bs for i in range(n)]
            prefill_lens.append(n)
            logits_indices.append(len(ids) - 1)
        nd = len(batch.decode)
        max_blocks = max((len(s.block_ids) for s in batch.decode), default=0)
        tables = [s.block_ids + [0] * (max_blocks - len(s.block_ids)) for s in batch.decode]
        dev = self.device
        to = lambda x: torch.tensor(x, dtype=torch.long).to(dev, non_blocking=True)  # noqa: E731
        attn = AttentionBatch(
            slot_mapping=to(slot_mapping),
            num_decode=nd,
            decode_block_tables=to(tables).view(nd, max_blocks),  # [Bd, max_blocks]
            decode_context_lens=to([s.num_tokens for s in batch.decode]),
            prefill_lens=prefill_lens,
            logits_indices=to(logits_indices),
        )
        return to(ids), to(pos), attn

    def _process_outputs(self, seqs: list[Seq], token_ids: list[int]) -> list[RequestOutput]:
        now = time.time_ns()
        eos = self.tokenizer.eos_token_id
        outputs = []
        for seq, tok in zip(seqs, token_ids):
            seq.num_computed = seq.num_tokens  # everything fed this step is now in the cache
            seq.output_ids.append(tok)
            if seq.first_token_ns is None:
                seq.first_token_ns = now
            p = seq.params
            reason = None
            if (tok == eos and not p.ignore_eos) or tok in p.stop_token_ids:
                reason = "stop"
            elif len(seq.output_ids) >= p.max_tokens or seq.num_tokens >= self.config.context_len:
                reason = "length"
            if reason is not None:
                self.scheduler.finish(seq, reason, now)
                self._log_finished(seq)
            outputs.append(
                RequestOutput(
                    seq.request_id,
                    [tok],
                    reason is not None,
                    reason,
                    len(seq.prompt_ids),
                    len(seq.output_ids),
                )
            )
        return outputs

    def _log_finished(self, seq: Seq) -> None:
        if seq.done_ns is None or seq.finish_reason is None:
            raise RuntimeError(f"{seq.request_id}: logged before the scheduler finished it")
        self._seqs.pop(seq.request_id, None)
        self.telemetry.requests.record(
            seq.request_id,
            seq.arrival_ns,
            seq.first_token_ns,
            seq.done_ns,
            len(seq.prompt_ids),
            len(seq.output_ids),
            seq.finish_reason,
            seq.output_ids,
        )
