"""Preemption by recompute: a preempted request resumes with the same tokens it would have produced
uninterrupted — its penalty counts (and seeded draws) survive the preemption."""

import pytest

from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

TARGET = [11, 12, 13, 14]


def penalised(**kw):
    # Penalties that *reward* repeats (r < 1, negative f/p) pull decoding back to tokens already
    # seen, so the output depends on the counts (with synthetic weights, ordinary penalties rarely
    # change a 12-token output: the top logit leads by more than they subtract).
    return SamplingParams(
        max_tokens=12,
        ignore_eos=True,
        frequency_penalty=-2.0,
        presence_penalty=-2.0,
        repetition_penalty=0.5,
        **kw,
    )


@pytest.mark.parametrize(
    "params",
    [penalised(temperature=0.0), penalised(temperature=1.0, seed=77)],
    ids=["greedy", "seeded"],
)
def test_penalty_state_survives_preemption(params, tiny_config, run_to_completion):
    cfg = dict(kv_blocks=8, block_size=4, max_model_len=32)
    alone = LLMEngine(tiny_config(**cfg))
    alone.add_request("t", TARGET, params)
    ref = run_to_completion(alone)["t"]

    crowded = LLMEngine(tiny_config(**cfg))
    crowded.add_request(
        "x", list(range(100, 110)), SamplingParams(temperature=0.0, max_tokens=20, ignore_eos=True)
    )
    crowded.step()
    crowded.add_request("t", TARGET, params)  # younger: preempted when x needs its blocks
    out = run_to_completion(crowded)
    steps = crowded.telemetry.steps.buffer.columns
    assert sum(steps["preempted"]) >= 1 and crowded.scheduler.total_preemptions >= 1
    assert out["t"] == ref

    plain = LLMEngine(tiny_config(**cfg))
    plain.add_request(
        "t",
        TARGET,
        SamplingParams(
            temperature=params.temperature, seed=params.seed, max_tokens=12, ignore_eos=True
        ),
    )
    assert (
        run_to_completion(plain)["t"] != ref
    )  # the penalties matter, so losing their counts would show
