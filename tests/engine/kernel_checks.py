"""Equivalence checks of the Triton kernels against the torch reference.

Run by tests/engine/test_kernels.py in a subprocess: on the CPU with TRITON_INTERPRET=1 set before
Triton is imported (so the rest of the test session never sees the variable), and natively with
`--device cuda` when a GPU is present. Each `check_*` raises on a mismatch; `main` prints
{name: null | error text} as JSON. Shapes stay small: the interpreter costs ~2 ms per program instance.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

ON_GPU = "--device=cuda" in sys.argv
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

import torch  # noqa: E402

from engine.kernels.penalties import fused_penalties_temperature  # noqa: E402
from engine.kernels.sample import row_seeds  # noqa: E402
from engine.kernels.topk_topp_sample import filtered_sample  # noqa: E402
from engine.sampling import PAD_SLOT, PenaltyState, Sampler, SamplingMetadata  # noqa: E402
from engine.sampling.sampler import (  # noqa: E402
    exponential_noise,
    reference_filter,
    reference_penalties,
    reference_sample,
)
from engine.sampling_params import SamplingParams  # noqa: E402

V = 300
DEVICE = torch.device("cuda" if ON_GPU else "cpu")


def _state(seed: int, slots: int = 6) -> PenaltyState:
    gen = torch.Generator().manual_seed(seed)
    state = PenaltyState(slots, V, DEVICE)
    for slot in range(slots):
        state.assign(
            slot,
            torch.randint(0, V, (12,), generator=gen),
            torch.randint(0, V, (20,), generator=gen),
        )
    return state


def _params() -> list[SamplingParams]:
    return [
        SamplingParams(
            temperature=0.7,
            repetition_penalty=1.3,
            frequency_penalty=0.5,
            presence_penalty=0.2,
            top_k=20,
            top_p=0.8,
            min_p=0.02,
            seed=1,
        ),
        SamplingParams(temperature=0.0, repetition_penalty=1.5, frequency_penalty=-0.5),
        SamplingParams(temperature=1.3, top_p=0.5, repetition_penalty=0.8),
        SamplingParams(temperature=1.0, top_k=1),
        SamplingParams(temperature=0.5, min_p=0.3, presence_penalty=-2.0, seed=99),
        SamplingParams(temperature=2.0, top_k=150, top_p=0.95, frequency_penalty=2.0),
    ]


def _logits(seed: int, batch: int, dtype=torch.float32) -> torch.Tensor:
    return (torch.randn(batch, V, generator=torch.Generator().manual_seed(seed)) * 3).to(
        DEVICE, dtype
    )


def check_penalties_temperature_match_reference():
    for seed, dtype in [(0, torch.float32), (1, torch.bfloat16), (2, torch.float16)]:
        state = _state(seed)
        meta = SamplingMetadata.build(_params(), [0, 1, 2, 3, 4, PAD_SLOT], state)
        logits = _logits(seed, 6, dtype)
        expected = reference_penalties(logits, meta) / meta.temperature.unsqueeze(1)
        torch.testing.assert_close(
            fused_penalties_temperature(logits, meta), expected, rtol=1e-6, atol=1e-6
        )
        torch.testing.assert_close(
            fused_penalties_temperature(logits, meta, apply_temperature=False),
            reference_penalties(logits, meta),
            rtol=1e-6,
            atol=1e-6,
        )


def check_auto_runs_the_penalty_kernel_then_the_reference_draw():
    """What "auto" runs on CUDA: the fused penalty kernel, then the torch reference's draw (the
    faster of each stage on an H200): the same ids as the reference end to end, same generator."""
    state = _state(3)
    logits = _logits(3, 6)

    def meta() -> SamplingMetadata:  # fresh per draw: seeded rows' generators advance as they draw
        return SamplingMetadata.build(_params(), list(range(6)), state)

    auto = Sampler("auto", generator=torch.Generator(DEVICE).manual_seed(7))
    auto.backend = "triton"  # what select_backend answers on CUDA (on the CPU: the interpreter)
    reference = meta()
    expected = reference_sample(
        reference_penalties(logits, reference), reference, torch.Generator(DEVICE).manual_seed(7)
    )
    assert torch.equal(auto.sample(logits, meta()), expected)
    penalized = auto.penalties(logits, reference)
    torch.testing.assert_close(
        penalized, reference_penalties(logits, reference), rtol=1e-6, atol=1e-6
    )


def check_kept_sets_match_reference():
    params = _params()
    for seed in range(3):
        state = _state(seed)
        order = torch.randperm(len(params), generator=torch.Generator().manual_seed(seed)).tolist()
        batch_params = [params[i] for i in order]
        meta = SamplingMetadata.build(batch_params, list(range(6)), state)
        logits = _logits(seed + 10, 6)
        scaled = fused_penalties_temperature(logits, meta)
        _, thresholds = filtered_sample(scaled, meta, meta.seeds)
        ours = scaled >= thresholds.unsqueeze(1)
        reference = torch.isfinite(reference_filter(reference_penalties(logits, meta), meta))
        for row, p in enumerate(batch_params):
            if not p.is_greedy:
                assert torch.equal(ours[row], reference[row]), (
                    seed,
                    row,
                    p,
                    ours[row].sum(),
                    reference[row].sum(),
                )


def check_multi_block_loops_match_reference():
    """Blocks of 128 over V = 300 (three blocks, the last partial), as compiled GPU launches run."""
    state = _state(3)
    params = _params()
    meta = SamplingMetadata.build(params, list(range(6)), state)
    logits = _logits(30, 6)
    scaled = fused_penalties_temperature(logits, meta, block=128)
    torch.testing.assert_close(scaled, fused_penalties_temperature(logits, meta), rtol=0, atol=0)
    noise = exponential_noise(scaled, meta)
    ids, thresholds = filtered_sample(scaled, meta, meta.seeds, noise=noise, block=128)
    whole_ids, whole_thresholds = filtered_sample(scaled, meta, meta.seeds, noise=noise)
    assert torch.equal(ids, whole_ids) and torch.equal(thresholds, whole_thresholds)
    reference = torch.isfinite(reference_filter(reference_penalties(logits, meta), meta))
    for row, p in enumerate(params):
        if not p.is_greedy:
            assert torch.equal(scaled[row] >= thresholds[row], reference[row]), row


def check_same_noise_same_ids_as_reference():
    for seed in range(3):
        state = _state(seed)
        logits = _logits(seed + 20, 6)
        params = [
            SamplingParams(
                temperature=0.9,
                top_p=0.9,
                top_k=50,
                min_p=0.01,
                seed=seed * 10 + i,
                repetition_penalty=1.2,
            )
            for i in range(5)
        ] + [SamplingParams(temperature=0.0)]
        slots = list(range(6))
        meta = SamplingMetadata.build(params, slots, state)
        expected = reference_sample(reference_penalties(logits, meta), meta)
        meta = SamplingMetadata.build(
            params, slots, state
        )  # fresh generators: the same noise again
        scaled = fused_penalties_temperature(logits, meta)
        ids, _ = filtered_sample(scaled, meta, meta.seeds, noise=exponential_noise(scaled, meta))
        assert torch.equal(ids, expected), (ids, expected)


def check_greedy_rows_are_argmax_after_penalties():
    state = _state(5)
    logits = _logits(5, 6)
    params = [SamplingParams(temperature=0.0, repetition_penalty=1.7, frequency_penalty=1.0)] * 6
    meta = SamplingMetadata.build(params, list(range(6)), state)
    ids = Sampler(backend="triton").sample(logits, meta)
    assert torch.equal(ids, reference_penalties(logits, meta).argmax(dim=-1))


def check_philox_seeded_row_reproducible_alone_and_in_batch():
    seeded = SamplingParams(temperature=0.8, top_p=0.9, top_k=40, seed=4321, presence_penalty=0.5)
    row_logits = _logits(7, 1)
    alone_state, batch_state = _state(7), _state(7)
    alone_ids, batch_ids = [], []
    sampler = Sampler(backend="triton")
    for step in range(3):
        alone = sampler.sample(row_logits, SamplingMetadata.build([seeded], [3], alone_state))
        batch_logits = torch.cat([_logits(100 + step, 3), row_logits, _logits(200 + step, 2)])
        batch_params = _params()[:3] + [seeded] + _params()[4:]
        batch = sampler.sample(
            batch_logits, SamplingMetadata.build(batch_params, list(range(6)), batch_state)
        )
        alone_state.update([3], alone)
        batch_state.update(list(range(6)), batch)
        alone_ids.append(int(alone[0]))
        batch_ids.append(int(batch[3]))
    assert alone_ids == batch_ids, (alone_ids, batch_ids)
    assert len(set(alone_ids)) > 1, alone_ids


def check_philox_samples_inside_kept_set():
    state = _state(8)
    rows = 6
    meta = SamplingMetadata.build(_params(), list(range(rows)), state)
    scaled = fused_penalties_temperature(_logits(8, rows), meta)
    ids, thresholds = filtered_sample(
        scaled, meta, row_seeds(meta, torch.Generator(device=DEVICE).manual_seed(0))
    )
    assert bool((scaled.gather(1, ids.unsqueeze(1)).squeeze(1) >= thresholds).all())


def check_philox_race_follows_the_distribution():
    """Gumbel-max with Philox noise: frequencies over 300 rows match softmax(logits / T).

    No filters here: a filtered row costs ~0.2 s in the interpreter (16 search passes), a plain one
    two passes; the filters' kept sets are checked exactly above.
    """
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -5.0]], device=DEVICE)
    state = PenaltyState(1, 5, DEVICE)
    state.assign(0, [], [])
    rows = 300
    meta = SamplingMetadata.build([SamplingParams(temperature=0.8)] * rows, [0] * rows, state)
    ids, _ = filtered_sample(
        fused_penalties_temperature(logits.expand(rows, 5), meta),
        meta,
        row_seeds(meta, torch.Generator(device=DEVICE).manual_seed(0)),
    )
    freq = torch.bincount(ids, minlength=5).float() / rows
    torch.testing.assert_close(
        freq, torch.softmax(logits[0] / 0.8, dim=-1), atol=0.07, rtol=0
    )  # 300 draws: std of a frequency <= 0.029


def main() -> int:
    results = {}
    for name, check in sorted(globals().items()):
        if name.startswith("check_") and callable(check):
            try:
                check()
                results[name] = None
            except Exception:  # report every failing check, not just the first
                results[name] = traceback.format_exc()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
