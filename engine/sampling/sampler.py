"""The sampler: penalties, greedy/temperature, min-p, top-k, top-p, then a sync-free random draw.

What: `Sampler().sample(logits, meta)` returns the next token id of every row, following the
decode-step order of docs/design.md exactly. Why sync-free: the draw is an exponential race,
argmax(probs / E) with E ~ Exp(1) i.i.d. (equivalent to sampling from probs; vLLM does the same), so
nothing is read back to the host and the step loop can run ahead of the device. On the CPU (where
there is no device to run ahead of) the filters and the draw run on each row's top-K candidates
(engine/sampling/candidates.py), which gives the reference's kept sets without sorting the vocabulary.
"""

from __future__ import annotations

import torch

from engine.sampling.backend import BACKENDS, select_backend
from engine.sampling.candidates import candidate_sample
from engine.sampling.metadata import SamplingMetadata
from engine.sampling.penalties import apply_penalties_at
from engine.sampling.topk_topp import apply_min_p, apply_top_k_top_p


class Sampler:
    """Picks the next token per row. The backend (torch or Triton) is chosen once, on first use.

    Under "auto" on CUDA the two stages take what was measured faster on an H200
    (docs/benchmarks.md, "On an H200"): the fused penalty kernel (1.4–4.4× the torch
    stage) and the torch reference's draw — the Triton sampling kernel ran at 0.07–1.03× of it, since
    one program per row leaves most of the GPU idle at small batches. "triton" runs both kernels.

    `generator` (optional, on the logits' device) drives the draws of unseeded rows instead of
    torch's default generator; tests and benchmarks pass one. The engine passes none: its unseeded
    rows draw from the default generator, which LLMEngine seeds once from `EngineConfig.seed`
    (reproducible for the same sequence of batches). A request's own `seed` makes it reproducible
    whatever its batch: its rows draw with per-step seeds (engine/sampling/seeds.py, carried by
    SamplingMetadata), never from `generator`.
    """

    def __init__(self, backend: str = "auto", generator: torch.Generator | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.requested_backend = backend
        self.backend: str | None = None  # resolved on the first call, from the logits' device
        self.generator = generator

    def sample(
        self, logits: torch.Tensor, meta: SamplingMetadata, penalized: bool = False
    ) -> torch.Tensor:
        """Next ids [B] int64 on the logits' device. Never syncs; never mutates `logits`.

        logits [B, V] in any float dtype, promoted to fp32 first. `penalized=True`: the logits are
        the output of `self.penalties` (lets an engine time the two stages apart).
        """
        self._check(logits, meta)
        if self._backend(logits) == "triton" and self.requested_backend == "auto":
            penalized_logits = logits.float() if penalized else self.penalties(logits, meta)
            return reference_sample(penalized_logits, meta, self.generator)
        if self._backend(logits) == "triton":
            from engine.kernels.sample import triton_sample, triton_sample_after_penalties

            if penalized:
                return triton_sample_after_penalties(logits, meta, self.generator)
            return triton_sample(logits, meta, self.generator)
        penalized_logits = logits.float() if penalized else reference_penalties(logits, meta)
        if logits.device.type == "cpu":
            return candidate_sample(penalized_logits, meta, self.generator)
        return reference_sample(penalized_logits, meta, self.generator)

    def penalties(self, logits: torch.Tensor, meta: SamplingMetadata) -> torch.Tensor:
        """The penalty stage alone: a new fp32 [B, V] tensor (`logits` itself when fp32 and no penalties).

        Pure; no sync. Feed the result to `sample(..., penalized=True)`.
        """
        self._check(logits, meta)
        if self._backend(logits) == "triton":
            from engine.kernels.penalties import fused_penalties_temperature

            if meta.no_penalties:
                return logits.float()
            return fused_penalties_temperature(logits, meta, apply_temperature=False)
        return reference_penalties(logits, meta)

    def _backend(self, logits: torch.Tensor) -> str:
        if self.backend is None:
            self.backend = select_backend(logits.device, self.requested_backend)
        return self.backend

    @staticmethod
    def _check(logits: torch.Tensor, meta: SamplingMetadata) -> None:
        if (
            logits.dim() != 2
            or logits.shape[0] != meta.batch_size
            or logits.shape[1] != meta.vocab_size
        ):
            raise ValueError(
                f"logits must be [batch={meta.batch_size}, vocab={meta.vocab_size}], got {tuple(logits.shape)}"
            )


def reference_penalties(logits: torch.Tensor, meta: SamplingMetadata) -> torch.Tensor:
    """Penalty stage (repetition, then frequency/presence) in fp32, at each row's history ids only.

    Pure (a new tensor, or `logits` itself when fp32 and the batch has no penalties); no sync.
    """
    logits = logits.float()
    if meta.no_penalties:
        return logits
    ids = meta.history_ids
    if ids is None:
        raise ValueError("penalties: the metadata has penalties but no history_ids")
    return apply_penalties_at(
        logits,
        ids,
        meta.prompt_mask_at(ids),
        meta.output_counts_at(ids),
        meta.repetition_penalty,
        meta.frequency_penalty,
        meta.presence_penalty,
    )


def reference_filter(logits: torch.Tensor, meta: SamplingMetadata) -> torch.Tensor:
    """Temperature, then min-p, top-k, top-p on penalized fp32 logits. Pure; no sync."""
    logits = logits / meta.temperature.unsqueeze(1)
    if not meta.no_min_p:
        logits = apply_min_p(logits, meta.min_p)
    return apply_top_k_top_p(
        logits, None if meta.no_top_k else meta.top_k, None if meta.no_top_p else meta.top_p
    )


def exponential_noise(
    like: torch.Tensor, meta: SamplingMetadata, generator: torch.Generator | None = None
) -> torch.Tensor:
    """E ~ Exp(1) shaped like `like` [B, V]; seeded rows drawn from their own generators. No sync."""
    noise = torch.empty_like(like)
    if len(meta.generators) < meta.batch_size:
        noise.exponential_(generator=generator)
    for row, row_generator in meta.generators.items():
        noise[row].exponential_(generator=row_generator)
    return noise


def reference_sample(
    penalized: torch.Tensor,
    meta: SamplingMetadata,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sampling after the penalty stage, torch reference: next ids [B] int64. Pure; no sync.

    The race is argmax over kept tokens of (logit / T - log E), the log of probs / E, so every path
    (reference, CPU candidates, Triton with given noise) scores a token with the same float ops.
    `noise` [B, V] Exp(1) replaces the draw (the candidate path passes its seeded rows' noise).
    """
    penalized = penalized.float()
    greedy_ids = penalized.argmax(dim=-1)
    if meta.all_greedy:
        return greedy_ids
    filtered = reference_filter(penalized, meta)
    if noise is None:
        noise = exponential_noise(filtered, meta, generator)
    sampled_ids = (filtered - torch.log(noise)).argmax(dim=-1)
    if meta.all_random:
        return sampled_ids
    return torch.where(meta.greedy, greedy_ids, sampled_ids)
