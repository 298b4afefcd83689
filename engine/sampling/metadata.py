"""SamplingMetadata: one step's sampling parameters as flat batched tensors (vLLM v1 style).

What: per-row [B] parameter tensors on the logits' device, the rows of the persistent PenaltyState
that the batch uses, per-row generators for seeded requests, and host-side flags that let the
sampler skip whole stages (no penalties in the batch, all greedy, no top-p...). Why: the sampler and
the kernels then never look at Python objects or read the device to decide what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from engine.sampling.penalty_state import PAD_SLOT, PenaltyState
from engine.sampling.seeds import step_seed
from engine.sampling_params import SamplingParams

# Row order of the packed float tensor built on the host and copied to the device in one transfer.
_FLOAT_FIELDS = (
    "temperature",
    "top_p",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
)


@dataclass
class SamplingMetadata:
    """Batched sampling inputs for one decode step. Built by `build`; read-only for the sampler."""

    temperature: torch.Tensor  # [B] fp32; greedy rows hold 1.0 (their sampled id is discarded)
    greedy: torch.Tensor  # [B] bool; argmax after penalties
    top_k: torch.Tensor  # [B] int64 in [1, V]; V = off
    top_p: torch.Tensor  # [B] fp32 in (0, 1]; 1 = off
    min_p: torch.Tensor  # [B] fp32 in [0, 1]; 0 = off
    frequency_penalty: torch.Tensor  # [B] fp32
    presence_penalty: torch.Tensor  # [B] fp32
    repetition_penalty: torch.Tensor  # [B] fp32; 1 = off
    rows: torch.Tensor  # [B] int64 row of PenaltyState storage (padding -> spare row)
    counts_storage: torch.Tensor  # [S+1, V+1] int32, PenaltyState's padding-aware storage (shared)
    prompt_storage: torch.Tensor  # [S+1, V+1] bool, idem
    vocab_size: int
    generators: dict[int, torch.Generator] = field(
        default_factory=dict
    )  # batch row -> its seeded generator
    seeds: torch.Tensor | None = (
        None  # [B] int64 this step's seed of seeded rows (0 elsewhere); Triton's Philox key
    )
    seeded: torch.Tensor | None = None  # [B] bool rows with a seed (non-greedy)
    history_ids: torch.Tensor | None = (
        None  # [B, L] prompt+output ids per row (None when no penalties)
    )
    params: tuple[SamplingParams, ...] = ()  # the rows' params, host side (for host-side decisions)
    all_greedy: bool = False
    all_random: bool = True
    no_penalties: bool = True
    no_min_p: bool = True
    no_top_k: bool = True
    no_top_p: bool = True

    @property
    def batch_size(self) -> int:
        return int(self.temperature.shape[0])

    def select(self, batch_rows: Sequence[int]) -> SamplingMetadata:
        """The metadata of a subset of rows (host-given), flags recomputed for that subset. No sync."""
        index = torch.tensor(list(batch_rows), dtype=torch.long).to(
            self.temperature.device, non_blocking=True
        )
        params = [self.params[row] for row in batch_rows]
        position = {row: new for new, row in enumerate(batch_rows)}
        return SamplingMetadata(
            temperature=self.temperature[index],
            greedy=self.greedy[index],
            top_k=self.top_k[index],
            top_p=self.top_p[index],
            min_p=self.min_p[index],
            frequency_penalty=self.frequency_penalty[index],
            presence_penalty=self.presence_penalty[index],
            repetition_penalty=self.repetition_penalty[index],
            rows=self.rows[index],
            counts_storage=self.counts_storage,
            prompt_storage=self.prompt_storage,
            vocab_size=self.vocab_size,
            generators={position[row]: g for row, g in self.generators.items() if row in position},
            seeds=None if self.seeds is None else self.seeds[index],
            seeded=None if self.seeded is None else self.seeded[index],
            history_ids=None if self.history_ids is None else self.history_ids[index],
            params=tuple(params),
            **host_flags(params, self.vocab_size),
        )

    def output_counts(self) -> torch.Tensor:
        """The batch's output counts [B, V] int32 (a gathered copy; no sync)."""
        return self.counts_storage.index_select(0, self.rows)[:, : self.vocab_size]

    def prompt_mask(self) -> torch.Tensor:
        """The batch's prompt masks [B, V] bool (a gathered copy; no sync)."""
        return self.prompt_storage.index_select(0, self.rows)[:, : self.vocab_size]

    def output_counts_at(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Output counts at `token_ids` [B, L] (ids in [0, V)), int32 [B, L]. No sync."""
        return self.counts_storage[self.rows.unsqueeze(1), token_ids]

    def prompt_mask_at(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Prompt mask at `token_ids` [B, L], bool [B, L]. No sync."""
        return self.prompt_storage[self.rows.unsqueeze(1), token_ids]

    @classmethod
    def build(
        cls,
        params_list: Sequence[SamplingParams],
        slots: Sequence[int],
        state: PenaltyState,
        step_seeds: Sequence[int | None] | None = None,
    ) -> SamplingMetadata:
        """Pack one step's per-row params; row i is `params_list[i]` in PenaltyState slot `slots[i]`.

        `slots[i] = -1` marks a padded row (its penalty rows are the spare zeros). `step_seeds[i]`
        overrides the seed of row i's draw this step; by default a seeded request's draw uses
        `step_seed(params.seed, tokens generated so far)` (from `state`), so it is reproducible alone,
        in any batch, and across preemption. Host -> device copies only; never reads the device.
        """
        _check_rows(params_list, slots, step_seeds)
        vocab = state.vocab_size
        device = state.device
        greedy = [p.is_greedy for p in params_list]
        floats = torch.tensor(
            [[1.0 if g else p.temperature for p, g in zip(params_list, greedy)]]
            + [[float(getattr(p, name)) for p in params_list] for name in _FLOAT_FIELDS[1:]],
            dtype=torch.float32,
        )  # [6, B] on the host, one transfer below
        row_seeds = _row_seeds(params_list, slots, state, step_seeds)
        ints = torch.tensor(
            [
                [min(p.top_k, vocab) if p.top_k_enabled else vocab for p in params_list],
                greedy,
                [seed is not None for seed in row_seeds],
                [seed or 0 for seed in row_seeds],
            ],
            dtype=torch.long,
        )  # [4, B]: top_k, greedy, seeded, seed
        floats = floats.to(device, non_blocking=True)
        ints = ints.to(device, non_blocking=True)

        generators = _generators(row_seeds, device)
        # Valid values below fp32's smallest normal (top_p = 5e-324 is in (0, 1]) would round to 0
        # and turn "keep the top token" into "keep nothing": keep them positive.
        floats[1].clamp_(min=torch.finfo(torch.float32).tiny)
        floats[5].clamp_(min=torch.finfo(torch.float32).tiny)
        no_penalties = not any(p.needs_penalties for p in params_list)
        return cls(
            temperature=floats[0],
            top_p=floats[1],
            min_p=floats[2],
            frequency_penalty=floats[3],
            presence_penalty=floats[4],
            repetition_penalty=floats[5],
            top_k=ints[0],
            greedy=ints[1].bool(),
            seeded=ints[2].bool(),
            seeds=ints[3],
            rows=state.rows_tensor(slots),
            counts_storage=state.counts_storage,
            prompt_storage=state.prompt_storage,
            vocab_size=vocab,
            generators=generators,
            history_ids=None if no_penalties else state.history_ids(slots),
            params=tuple(params_list),
            **host_flags(params_list, vocab),
        )


def _check_rows(
    params_list: Sequence[SamplingParams],
    slots: Sequence[int],
    step_seeds: Sequence[int | None] | None,
) -> None:
    """One slot (and step seed, if given) per row, and at least one row."""
    batch = len(params_list)
    if len(slots) != batch:
        raise ValueError(f"slots has {len(slots)} rows but params_list has {batch}")
    if step_seeds is not None and len(step_seeds) != batch:
        raise ValueError(f"step_seeds has {len(step_seeds)} rows but params_list has {batch}")
    if batch == 0:
        raise ValueError("params_list is empty: a step samples at least one row")


def _row_seeds(
    params_list: Sequence[SamplingParams],
    slots: Sequence[int],
    state: PenaltyState,
    step_seeds: Sequence[int | None] | None,
) -> list[int | None]:
    """Each row's seed for this step's draw (None: greedy, or sampled from the global RNG)."""
    row_seeds: list[int | None] = []
    for row, (params, slot) in enumerate(zip(params_list, slots)):
        override = step_seeds[row] if step_seeds is not None else None
        if params.is_greedy or (params.seed is None and override is None):
            row_seeds.append(None)
            continue
        if override is not None:
            seed = override
        else:
            assert params.seed is not None  # neither greedy nor unseeded: checked just above
            position = state.num_output_tokens[slot] if slot != PAD_SLOT else 0
            seed = step_seed(params.seed, position)
        row_seeds.append(seed & (2**63 - 1))  # int64-packable, accepted by manual_seed
    return row_seeds


def _generators(row_seeds: list[int | None], device: torch.device) -> dict[int, torch.Generator]:
    """A seeded generator per seeded row (row index → generator)."""
    generators: dict[int, torch.Generator] = {}
    for row, seed in enumerate(row_seeds):
        if seed is not None:
            generator = torch.Generator(device=device)
            generator.manual_seed(seed)
            generators[row] = generator
    return generators


def host_flags(params: Sequence[SamplingParams], vocab_size: int) -> dict[str, bool]:
    """Stage switches of a batch, from its params (host only): which stages any row needs."""
    sampled = [p for p in params if not p.is_greedy]  # filters only matter for rows that sample
    return dict(
        all_greedy=not sampled,
        all_random=len(sampled) == len(params),
        no_penalties=not any(p.needs_penalties for p in params),
        no_min_p=all(p.min_p == 0.0 for p in sampled),
        no_top_k=all(not p.top_k_enabled or p.top_k >= vocab_size for p in sampled),
        no_top_p=all(p.top_p == 1.0 for p in sampled),
    )
