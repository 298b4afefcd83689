"""The Triton backend of Sampler: kernel (a) then kernel (b), the same stages as the reference.

What: `triton_penalties` (penalty stage, for engines that time it separately) and `triton_sample`.
Why two launches and not one: the penalty pass is embarrassingly parallel over [B, V] blocks,
while the threshold search wants one program per row; the scaled logits round-trip once through
memory (L2 for one row at a time).
"""

from __future__ import annotations

import torch

from engine.kernels.penalties import fused_penalties_temperature
from engine.kernels.topk_topp_sample import filtered_sample
from engine.sampling.metadata import SamplingMetadata


def row_seeds(meta: SamplingMetadata, generator: torch.Generator | None = None) -> torch.Tensor:
    """[B] int64 Philox seeds: the request's step seed for seeded rows, a fresh device draw otherwise.

    Draws on the device (no sync); `generator` (on that device) makes unseeded rows reproducible.
    """
    if meta.seeds is None or meta.seeded is None:
        raise ValueError(
            "row_seeds: the metadata carries no seeds (build it with SamplingMetadata.build)"
        )
    fresh = torch.randint(
        0,
        2**62,
        (meta.batch_size,),
        dtype=torch.int64,
        device=meta.seeds.device,
        generator=generator,
    )
    return torch.where(meta.seeded, meta.seeds, fresh)


def triton_sample(
    logits: torch.Tensor,
    meta: SamplingMetadata,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
) -> torch.Tensor:
    """Next ids [B] int64. Pure (logits untouched); no host sync; two kernel launches (+ one for seeds)."""
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    scaled = fused_penalties_temperature(logits, meta)
    ids, _ = filtered_sample(scaled, meta, row_seeds(meta, generator), noise)
    return ids


def triton_sample_after_penalties(
    penalized: torch.Tensor, meta: SamplingMetadata, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Next ids from already-penalized fp32 logits (temperature still to apply). Pure; no host sync."""
    penalized = penalized if penalized.stride(1) == 1 else penalized.contiguous()
    scaled = fused_penalties_temperature(penalized, meta, apply_penalties=False)
    ids, _ = filtered_sample(scaled, meta, row_seeds(meta, generator))
    return ids
