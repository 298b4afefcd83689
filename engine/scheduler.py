"""Continuous batching: a FCFS waiting queue and a running set, rescheduled before every step.

Each step every running sequence decodes one token; waiting sequences join the running set between
steps (their whole context is prefilled in the same forward as the others' decode tokens) while
``max_num_seqs``, the step's token budget and the KV blocks allow. When a running sequence needs a
new block and none is left, the most recently admitted sequence is preempted *by recompute*: its
blocks and slot are freed and it goes back to the front of the queue with its prompt and output so
far, to be prefilled again later (its penalty counts are rebuilt from those tokens on re-admission).
When the KV budget is shrunk (``memory.kv_pressure``) below what one sequence needs, a sequence
running alone may exceed it, so the engine always makes progress.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.kv_cache import BlockAllocator, blocks_needed
from engine.sequence import Sequence, SequenceStatus


@dataclass
class ScheduledBatch:
    """What one step runs: decode sequences (1 token each) then prefill sequences (whole context)."""

    decode: list[Sequence] = field(default_factory=list)
    prefill: list[Sequence] = field(default_factory=list)
    preempted: int = 0  # sequences preempted while scheduling this step

    @property
    def sequences(self) -> list[Sequence]:
        """Row order of the step's logits: decode rows first, then prefill rows."""
        return self.decode + self.prefill

    @property
    def num_prefill_tokens(self) -> int:
        return sum(s.num_tokens for s in self.prefill)

    def __len__(self) -> int:
        return len(self.decode) + len(self.prefill)


class Scheduler:
    """Owns the waiting queue, the running list, KV block tables and penalty-state slots."""

    def __init__(
        self, allocator: BlockAllocator, block_size: int, max_num_seqs: int, token_budget: int
    ):
        self.allocator = allocator
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.token_budget = token_budget
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # admission order; the last one is preempted first
        self._free_slots = list(range(max_num_seqs - 1, -1, -1))
        self.total_preemptions = 0

    # ---- queue --------------------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def finish(self, seq: Sequence, reason: str, now_ns: int) -> None:
        """Mark finished (stop/length/abort) and release its blocks and slot."""
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
            self._release(seq)
        elif seq.status is SequenceStatus.WAITING:
            self.waiting.remove(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
        seq.done_ns = now_ns

    # ---- scheduling ---------------------------------------------------------------------------
    def schedule(self) -> ScheduledBatch:
        """Pick this step's sequences; mutates queue, running set, block tables and slots."""
        batch = ScheduledBatch()
        # A shrunk budget (memory.kv_pressure) may leave more blocks in use than allowed.
        while self.allocator.num_used > self.allocator.budget and len(self.running) > 1:
            self._preempt(self.running[-1], batch)
        # Decode: each running sequence needs room for the token it feeds this step.
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            need = blocks_needed(seq.num_tokens, self.block_size) - len(seq.block_ids)
            while (
                need > 0 and not self.allocator.can_allocate(need) and self.running[-1] is not seq
            ):
                self._preempt(self.running[-1], batch)
            alone = len(self.running) == 1  # liveness: the last sequence may exceed a shrunk budget
            if need > 0 and not self.allocator.can_allocate(need) and not alone:
                self._preempt(seq, batch)  # nothing younger left to evict: recompute this one later
                continue
            if need > 0:
                seq.block_ids += self.allocator.allocate(need, ignore_budget=alone)
            i += 1
        batch.decode = list(self.running)
        if batch.preempted:
            return batch  # admitting now would only thrash: wait until blocks free up
        # Prefill: admit waiting sequences FCFS while slots, tokens and blocks allow.
        tokens = len(batch.decode)
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            need = blocks_needed(seq.num_tokens, self.block_size)
            alone = (
                not self.running
            )  # liveness: with nothing running, admit even over a shrunk budget
            fits = self.allocator.can_allocate(need) or (
                alone and need <= self.allocator.num_blocks - self.allocator.num_used
            )
            if tokens + seq.num_tokens > self.token_budget or not fits:
                break
            self.waiting.popleft()
            seq.block_ids = self.allocator.allocate(need, ignore_budget=alone)
            seq.slot = self._free_slots.pop()
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            batch.prefill.append(seq)
            tokens += seq.num_tokens
        return batch

    def _preempt(self, seq: Sequence, batch: ScheduledBatch) -> None:
        self.running.remove(seq)
        self._release(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.waiting.appendleft(seq)
        batch.preempted += 1
        self.total_preemptions += 1

    def _release(self, seq: Sequence) -> None:
        self.allocator.free(seq.block_ids)
        seq.block_ids = []
        seq.num_computed = 0
        if seq.slot is not None:
            self._free_slots.append(seq.slot)
            seq.slot = None
