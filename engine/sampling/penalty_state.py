"""Persistent per-slot penalty state: output-token counts and the prompt-token mask.

What: one row per batch slot of int32 output counts [S, V] and a bool prompt mask [S, V], kept on the
logits' device and updated in place after every sampled token. Why: recounting a sequence's whole
history every step costs O(history) per step (that is exactly the `penalty.slow_path` fault); a
persistent row costs one scatter per token. Padding never counts: ids outside [0, V) and slot -1 land
in a spare column / spare row that no reader ever sees, so no host-side filtering (and no sync) is
needed.
"""

from __future__ import annotations

from typing import Sequence

import torch

# Slot value of a padded batch row in `update` (its id is ignored, its host counter untouched).
PAD_SLOT = -1


class PenaltyState:
    """Per-slot output counts and prompt mask. Mutable: `assign` and `update` write in place."""

    def __init__(self, max_slots: int, vocab_size: int, device: torch.device | str = "cpu"):
        if not isinstance(max_slots, int) or max_slots < 1:
            raise ValueError(f"max_slots must be an int >= 1, got {max_slots!r}")
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}")
        self.max_slots = max_slots
        self.vocab_size = vocab_size
        self.device = torch.device(device)
        # Storage has one spare row (padded rows, slot -1) and one spare column (ids outside the
        # vocabulary); readers only see the [S, V] views below.
        self._counts_storage = torch.zeros(max_slots + 1, vocab_size + 1, dtype=torch.int32, device=self.device)
        self._prompt_storage = torch.zeros(max_slots + 1, vocab_size + 1, dtype=torch.bool, device=self.device)
        self.output_counts = self._counts_storage[:max_slots, :vocab_size]  # [S, V] int32 view, row stride V+1
        self.prompt_mask = self._prompt_storage[:max_slots, :vocab_size]    # [S, V] bool view, row stride V+1
        # Tokens generated so far per slot, kept on the host (seeded sampling derives each draw's seed
        # from it); maintained by assign/update without reading the device.
        self.num_output_tokens = [0] * max_slots

    def assign(self, slot: int, prompt_ids: Sequence[int] | torch.Tensor,
               output_ids: Sequence[int] | torch.Tensor = ()) -> None:
        """(Re)build `slot` for a sequence: new request, or rebuild after preemption.

        Mutates the slot's rows. Ids outside [0, V) are treated as padding and ignored. Does not sync
        when given device tensors (lists are copied host -> device).
        """
        self._check_slot(slot)
        prompt = self._ids_tensor(prompt_ids)
        output = self._ids_tensor(output_ids)
        self._counts_storage[slot].zero_()
        self._prompt_storage[slot].zero_()
        self._prompt_storage[slot].index_fill_(0, self._clamp_pad(prompt), True)
        self._counts_storage[slot].index_add_(
            0, self._clamp_pad(output), torch.ones_like(output, dtype=torch.int32))
        self._counts_storage[slot, self.vocab_size] = 0  # the spare column is never read; keep it tidy
        self.num_output_tokens[slot] = int(output.numel())

    def update(self, slots: Sequence[int] | torch.Tensor, next_ids: torch.Tensor) -> None:
        """counts[slot, id] += 1 for each row; rows with slot -1 or an id outside [0, V) change nothing.

        Mutates `output_counts`; no host-device sync (ids are never read on the host). `slots` is
        the same per-row slot list given to SamplingMetadata.build; a list keeps the host counters
        exact, a tensor leaves them to the caller (reading it would sync).
        """
        slot_list = slots.tolist() if isinstance(slots, torch.Tensor) and slots.device.type == "cpu" else slots
        rows = self._rows_tensor(slots)
        ids = next_ids.to(device=self.device, dtype=torch.long).reshape(-1)
        if ids.numel() != rows.numel():
            raise ValueError(f"next_ids has {ids.numel()} rows but slots has {rows.numel()}")
        flat = rows * (self.vocab_size + 1) + self._clamp_pad(ids)  # [B] positions in the flat storage
        self._counts_storage.view(-1).index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        if not isinstance(slot_list, torch.Tensor):
            for slot in slot_list:
                if slot != PAD_SLOT:
                    self.num_output_tokens[slot] += 1

    def release(self, slot: int) -> None:
        """Forget `slot` (finished or preempted sequence). Mutates; a later `assign` rebuilds it."""
        self._check_slot(slot)
        self._counts_storage[slot].zero_()
        self._prompt_storage[slot].zero_()
        self.num_output_tokens[slot] = 0

    def rows_tensor(self, slots: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Slots as an int64 [B] tensor on this device, slot -1 mapped to the spare (padding) row."""
        return self._rows_tensor(slots)

    # The padding-aware [S+1, V+1] storage, for kernels that index rows themselves.
    @property
    def counts_storage(self) -> torch.Tensor:
        return self._counts_storage

    @property
    def prompt_storage(self) -> torch.Tensor:
        return self._prompt_storage

    def _rows_tensor(self, slots: Sequence[int] | torch.Tensor) -> torch.Tensor:
        if isinstance(slots, torch.Tensor):
            rows = slots.to(device=self.device, dtype=torch.long).reshape(-1)
        else:
            for slot in slots:
                if slot != PAD_SLOT:
                    self._check_slot(slot)
            rows = torch.tensor(list(slots), dtype=torch.long).to(self.device, non_blocking=True)
        return torch.where(rows < 0, self.max_slots, rows)  # slot -1 -> spare row

    def _ids_tensor(self, ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        if isinstance(ids, torch.Tensor):
            return ids.to(device=self.device, dtype=torch.long).reshape(-1)
        return torch.tensor(list(ids), dtype=torch.long).to(self.device, non_blocking=True)

    def _clamp_pad(self, ids: torch.Tensor) -> torch.Tensor:
        """Map every id outside [0, V) to the spare column V (pure; no sync)."""
        outside = (ids < 0) | (ids >= self.vocab_size)
        return torch.where(outside, self.vocab_size, ids)

    def _check_slot(self, slot: int) -> None:
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < self.max_slots:
            raise ValueError(f"slot must be an int in [0, {self.max_slots - 1}], got {slot!r}")
