"""The trained model behind ``penalty.repetition``: its outputs end on their own (EOS honoured)
under the workload's sampling, and loop until ``max_tokens`` under the fault's (greedy, frequency
penalty -2). A 60-step training keeps the test short; the shipped defaults train far longer."""

import pytest

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from loadgen.prompts import PromptBuilder
from loadgen.traffic_faults import RepetitionParams
from scripts.train_small_model import TrainOptions, passages, train

MAX_TOKENS = 192


def finish_reasons(engine: LLMEngine, make_params, prompts: list[str]) -> list[str]:
    reasons: dict[str, str] = {}
    for i, text in enumerate(prompts):
        engine.add_request(
            f"{len(reasons)}-{i}-{id(make_params)}", engine.tokenizer.encode(text), make_params(i)
        )
    while engine.has_unfinished():
        for o in engine.step():
            if o.finished:
                reasons[o.request_id] = o.finish_reason
    return list(reasons.values())


@pytest.mark.e2e
@pytest.mark.untimed  # a seeded training run: beside the unit tests in `make test`
def test_outputs_end_on_their_own_and_loop_under_the_fault(tmp_path):
    import random

    opts = TrainOptions(
        tmp_path / "lm",
        steps=60,
        minutes=2,
        hidden=32,
        layers=1,
        heads=1,
        max_chars=100_000,
        lr=1e-2,
    )
    figures = train(opts)
    assert figures["last20_loss"] < figures["first_loss"]  # it learned something
    engine = LLMEngine(EngineConfig(model=str(opts.out), max_num_seqs=8, kv_blocks=512))
    rng = random.Random(0)
    prompts = [PromptBuilder().prompt(48, rng) for _ in range(8)]
    fault = RepetitionParams()
    normal = finish_reasons(
        engine, lambda i: SamplingParams(temperature=0.7, max_tokens=MAX_TOKENS, seed=i), prompts
    )
    looped = finish_reasons(
        engine,
        lambda i: SamplingParams(
            temperature=fault.temperature,
            frequency_penalty=fault.frequency_penalty,
            max_tokens=MAX_TOKENS,
            seed=i,
        ),
        prompts,
    )
    engine.close()
    assert normal.count("stop") >= 5  # EOS ends most outputs before max_tokens
    assert looped.count("length") >= 7  # the same prompts loop to max_tokens under the fault


def test_passages_end_where_the_text_does():
    docs = passages(TrainOptions(out=None, max_chars=20_000))  # type: ignore[arg-type]
    assert len(docs) > 50 and all(d.strip() for d in docs)
    assert any(
        d.startswith("It is a truth universally acknowledged") for d in docs
    )  # the prompts' text
