"""Penalties vs peers: HF's RepetitionPenaltyLogitsProcessor, and the OpenAI formula on output only."""

import torch
from transformers import RepetitionPenaltyLogitsProcessor

from engine.sampling import PenaltyState, SamplingMetadata
from engine.sampling.penalties import (
    apply_frequency_presence_penalties,
    apply_penalties,
    apply_repetition_penalty,
)
from engine.sampling.sampler import reference_penalties
from engine.sampling_params import SamplingParams

V = 64


def test_repetition_penalty_matches_hf_over_prompt_and_output():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, V, generator=gen) * 3
    history = torch.randint(0, V, (3, 12), generator=gen)  # prompt + output ids, with repeats
    for r in (0.5, 1.0, 1.3, 2.0):
        expected = RepetitionPenaltyLogitsProcessor(penalty=r)(history, logits.clone())
        seen = torch.zeros(3, V, dtype=torch.bool).scatter_(1, history, True)
        ours = apply_repetition_penalty(logits, seen, torch.full((3,), r))
        torch.testing.assert_close(ours, expected, rtol=0, atol=0)


def test_frequency_presence_is_openai_formula_on_output_only():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(2, V, generator=gen)
    prompt, output = [1, 2, 2, 3], [3, 3, 3, 7, 9]
    state = PenaltyState(1, V)
    state.assign(0, prompt, output)
    params = SamplingParams(frequency_penalty=0.7, presence_penalty=-0.4)
    meta = SamplingMetadata.build([params, params], [0, 0], state)
    ours = reference_penalties(logits, meta)
    expected = logits.clone()
    for row in range(2):
        for token in set(
            output
        ):  # OpenAI: mu[j] -= c[j] * alpha_frequency + float(c[j] > 0) * alpha_presence
            expected[row, token] -= output.count(token) * 0.7 + 1.0 * -0.4
    torch.testing.assert_close(ours, expected)
    assert torch.equal(ours[:, [1, 2]], logits[:, [1, 2]])  # prompt-only tokens untouched


def test_order_is_repetition_then_frequency_presence():
    logits = torch.tensor([[2.0, -2.0, 1.0]])
    counts = torch.tensor([[1, 2, 0]], dtype=torch.int32)
    prompt = torch.tensor([[False, False, True]])
    out = apply_penalties(
        logits, prompt, counts, torch.tensor([2.0]), torch.tensor([0.5]), torch.tensor([1.0])
    )
    # token 0: 2/2 - 0.5*1 - 1 = -0.5; token 1: -2*2 - 0.5*2 - 1 = -6; token 2 (prompt only): 1/2 = 0.5
    torch.testing.assert_close(out, torch.tensor([[-0.5, -6.0, 0.5]]))


def test_penalties_do_not_mutate_inputs_and_stay_fp32():
    logits = torch.randn(1, V, dtype=torch.bfloat16)
    state = PenaltyState(1, V)
    state.assign(0, [1], [2])
    meta = SamplingMetadata.build([SamplingParams(repetition_penalty=1.5)], [0], state)
    before = logits.clone()
    out = reference_penalties(logits, meta)
    assert out.dtype == torch.float32 and torch.equal(logits, before)
    out2 = apply_frequency_presence_penalties(
        out, torch.zeros(1, V, dtype=torch.int32), torch.ones(1), torch.ones(1)
    )
    assert torch.equal(out2, out)


def test_engine_penalty_path_does_not_drift_over_1000_tokens():
    """int32 counts + fp32 recomputation from the fresh logit: the error never accumulates."""
    logit = torch.tensor([[10.0]], dtype=torch.bfloat16).float()
    counts = torch.arange(1, 1001, dtype=torch.int32).reshape(1000, 1)
    out = apply_frequency_presence_penalties(
        logit.expand(1000, 1), counts, torch.full((1000,), 0.01), torch.zeros(1000)
    )
    exact = 10.0 - 0.01 * torch.arange(1, 1001, dtype=torch.float64)
    assert (out.double().squeeze(1) - exact).abs().max() < 1e-5
    # The same decrement accumulated into a bf16 logit stalls at once (spacing 0.0625 at 10).
    stored = torch.tensor(10.0, dtype=torch.bfloat16)
    for _ in range(10):
        stored = stored - torch.tensor(0.01, dtype=torch.bfloat16)
    assert float(stored) == 10.0
