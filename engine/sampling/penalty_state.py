"""Persistent per-slot penalty state: output-token counts, the prompt-token mask, and the history ids.

What: per batch slot, int32 output counts [S, V] and a bool prompt mask [S, V] (dense: what the
fused GPU kernel streams), plus the slot's history ids (prompt then output, [S, cap] int64: what the
torch path gathers, so its penalty cost is O(history) rather than O(V)). All stay on the logits'
device and are updated in place after every sampled token. Why persistent: recounting a sequence's
whole history every step costs O(history) per step and grows with it (that is exactly the
`penalty.slow_path` fault, which switches `recount_passes` on: `update` then also rebuilds every
updated slot's counts and mask from its whole history the naive way, so the cost lands where this
bookkeeping runs, after the draw). Padding never counts: ids outside [0, V) and slot -1 land in a spare
column / spare row that no reader sees, so no host-side filtering (and no sync) is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

# Slot value of a padded batch row in `update` / SamplingMetadata.build.
PAD_SLOT = -1

_INITIAL_HISTORY = 256  # history columns to start with; doubled (host-decided, no sync) when full


class PenaltyState:
    """Per-slot penalty state. Mutable: `assign`, `update` and `release` write in place."""

    def __init__(self, max_slots: int, vocab_size: int, device: torch.device | str = "cpu"):
        if isinstance(max_slots, bool) or not isinstance(max_slots, int) or max_slots < 1:
            raise ValueError(f"max_slots must be an int >= 1, got {max_slots!r}")
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be an int >= 1, got {vocab_size!r}")
        self.max_slots = max_slots
        self.vocab_size = vocab_size
        self.device = torch.device(device)
        # Storage has one spare row (padded rows, slot -1) and one spare column (ids outside the
        # vocabulary); readers only see the [S, V] views below.
        self._counts_storage = torch.zeros(
            max_slots + 1, vocab_size + 1, dtype=torch.int32, device=self.device
        )
        self._prompt_storage = torch.zeros(
            max_slots + 1, vocab_size + 1, dtype=torch.bool, device=self.device
        )
        self.output_counts = self._counts_storage[
            :max_slots, :vocab_size
        ]  # [S, V] int32 view, row stride V+1
        self.prompt_mask = self._prompt_storage[
            :max_slots, :vocab_size
        ]  # [S, V] bool view, row stride V+1
        # History ids per slot (prompt then output; ids outside [0, V) stored as V). Entries past a
        # slot's length are stale but harmless: a penalty is computed from counts and mask, so an
        # extra id only recomputes a value that is already right.
        self._history = torch.zeros(
            max_slots + 1, _INITIAL_HISTORY, dtype=torch.long, device=self.device
        )
        # Host-side lengths (no device reads): tokens generated per slot (seeded sampling derives each
        # draw's seed from it) and history length per slot (prompt + output).
        self.num_output_tokens = [0] * max_slots
        self.history_len = [0] * max_slots
        # Slow path (0 = off): after each update, rebuild each updated slot's counts and mask from
        # its whole history this many times with dense one-hot reductions, O(history x V) per slot
        # instead of O(1). The values written equal the incremental ones, so outputs do not change.
        self.recount_passes = 0

    def assign(
        self,
        slot: int,
        prompt_ids: Sequence[int] | torch.Tensor,
        output_ids: Sequence[int] | torch.Tensor = (),
    ) -> None:
        """(Re)build `slot` for a sequence: new request, or rebuild after preemption.

        Mutates the slot's rows. Ids outside [0, V) are treated as padding and ignored. Does not sync
        (lists are copied host -> device).
        """
        self._check_slot(slot)
        prompt = self._clamp_pad(self._ids_tensor(prompt_ids))
        output = self._clamp_pad(self._ids_tensor(output_ids))
        self._counts_storage[slot].zero_()
        self._prompt_storage[slot].zero_()
        self._prompt_storage[slot].index_fill_(0, prompt, True)
        self._counts_storage[slot].index_add_(0, output, torch.ones_like(output, dtype=torch.int32))
        self._counts_storage[slot, self.vocab_size] = 0  # spare column: never read, kept tidy
        self._prompt_storage[slot, self.vocab_size] = False
        length = prompt.numel() + output.numel()
        self._reserve(length)
        self._history[slot, : prompt.numel()] = prompt
        self._history[slot, prompt.numel() : length] = output
        self.num_output_tokens[slot] = int(output.numel())
        self.history_len[slot] = int(length)

    def update(self, slots: Sequence[int] | torch.Tensor, next_ids: torch.Tensor) -> None:
        """counts[slot, id] += 1 and append id to the slot's history, for each row.

        `slots` is the per-row slot list given to SamplingMetadata.build (a list or a CPU tensor:
        the host needs it to keep lengths). Rows with slot -1 or an id outside [0, V) change no
        count. Mutates; no host-device sync (`next_ids` is never read on the host).
        """
        slot_list = self._slot_list(slots)
        ids = self._clamp_pad(next_ids.to(device=self.device, dtype=torch.long).reshape(-1))
        if ids.numel() != len(slot_list):
            raise ValueError(f"next_ids has {ids.numel()} rows but slots has {len(slot_list)}")
        rows = self._rows_tensor(slot_list)
        flat = rows * (self.vocab_size + 1) + ids  # [B] positions in the flat counts storage
        self._counts_storage.view(-1).index_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        positions = []
        for slot in slot_list:  # sequentially, so a slot listed twice appends twice
            if slot == PAD_SLOT:
                positions.append(0)
            else:
                positions.append(self.history_len[slot])
                self.num_output_tokens[slot] += 1
                self.history_len[slot] += 1
        self._reserve(max(positions) + 1)
        self._history[
            rows, torch.tensor(positions, dtype=torch.long).to(self.device, non_blocking=True)
        ] = ids
        for _ in range(self.recount_passes):
            for slot in dict.fromkeys(s for s in slot_list if s != PAD_SLOT):
                self.recount_from_history(slot)

    def recount_from_history(self, slot: int) -> None:
        """Rebuild `slot`'s counts and prompt mask from its stored history with dense one-hot
        reductions ([history, V] each): the naive implementation the persistent state avoids.
        Mutates the slot's rows with the values they already hold; no sync."""
        self._check_slot(slot)
        n_out = self.num_output_tokens[slot]
        n_prompt = self.history_len[slot] - n_out
        history = self._history[slot, : self.history_len[slot]]
        V1 = self.vocab_size + 1  # padding ids are stored as V: they land in the spare column
        counts = torch.nn.functional.one_hot(history[n_prompt:], V1).sum(0)
        mask = torch.nn.functional.one_hot(history[:n_prompt], V1).amax(0).bool()
        counts[self.vocab_size], mask[self.vocab_size] = 0, False
        self._counts_storage[slot].copy_(counts)
        self._prompt_storage[slot].copy_(mask)

    def release(self, slot: int) -> None:
        """Forget `slot` (finished or preempted sequence). Mutates; a later `assign` rebuilds it."""
        self._check_slot(slot)
        self._counts_storage[slot].zero_()
        self._prompt_storage[slot].zero_()
        self.num_output_tokens[slot] = 0
        self.history_len[slot] = 0

    def rows_tensor(self, slots: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """Slots as an int64 [B] tensor on this device, slot -1 mapped to the spare (padding) row."""
        return self._rows_tensor(self._slot_list(slots))

    def history_ids(self, slots: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """[B, L] history ids of the given slots (L = the longest; shorter rows carry harmless stale
        ids), clamped into [0, V) so they can index logits. A gathered copy; no sync.
        """
        slot_list = self._slot_list(slots)
        longest = max([self.history_len[s] for s in slot_list if s != PAD_SLOT] + [1])
        rows = self._rows_tensor(slot_list)
        return self._history[rows, :longest].clamp(max=self.vocab_size - 1)

    # The padding-aware [S+1, V+1] storage, for kernels that index rows themselves.
    @property
    def counts_storage(self) -> torch.Tensor:
        return self._counts_storage

    @property
    def prompt_storage(self) -> torch.Tensor:
        return self._prompt_storage

    def _reserve(self, length: int) -> None:
        """Grow the history to hold `length` ids per slot (doubling; decided on the host)."""
        capacity = self._history.shape[1]
        if length <= capacity:
            return
        while capacity < length:
            capacity *= 2
        grown = torch.zeros(self.max_slots + 1, capacity, dtype=torch.long, device=self.device)
        grown[:, : self._history.shape[1]] = self._history
        self._history = grown

    def _slot_list(self, slots: Sequence[int] | torch.Tensor) -> list[int]:
        if isinstance(slots, torch.Tensor):
            if slots.device.type != "cpu":
                raise ValueError(
                    "slots must be a list or a CPU tensor (reading a device tensor would sync)"
                )
            slots = slots.tolist()
        slot_list = list(slots)
        for slot in slot_list:
            if slot != PAD_SLOT:
                self._check_slot(slot)
        return slot_list

    def _rows_tensor(self, slot_list: list[int]) -> torch.Tensor:
        rows = [
            self.max_slots if slot == PAD_SLOT else slot for slot in slot_list
        ]  # slot -1 -> spare row
        return torch.tensor(rows, dtype=torch.long).to(self.device, non_blocking=True)

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
