"""A request's state inside the engine: its tokens, KV blocks, batch slot and lifecycle."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from engine.sampling_params import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING = "waiting"  # queued (new, or preempted and waiting to be recomputed)
    RUNNING = "running"  # holds KV blocks and a penalty-state slot
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """One request. ``num_computed`` tokens have their K/V in the cache; the rest are fed next step."""

    request_id: str
    prompt_ids: list[int]
    params: SamplingParams
    arrival_ns: int
    output_ids: list[int] = field(default_factory=list)
    status: SequenceStatus = SequenceStatus.WAITING
    block_ids: list[int] = field(default_factory=list)
    num_computed: int = 0
    slot: int | None = None  # penalty-state row while running
    first_token_ns: int | None = None
    done_ns: int | None = None
    finish_reason: str | None = None  # stop | length | abort
    num_preemptions: int = 0

    def running_slot(self) -> int:
        """The penalty-state row; an error for a sequence that holds none (not running)."""
        if self.slot is None:
            raise RuntimeError(f"{self.request_id}: no penalty-state slot (not running)")
        return self.slot

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def is_prefill(self) -> bool:
        """True when nothing of this sequence is in the cache (new, or preempted → recompute)."""
        return self.num_computed == 0

    def token_at(self, i: int) -> int:
        n = len(self.prompt_ids)
        return self.prompt_ids[i] if i < n else self.output_ids[i - n]

    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids
