"""LLMEngine with the tiny preset: generation, stop conditions, determinism, seeds, abort."""

import pytest
import torch

from engine.kv_cache import KVCache
from engine.llm_engine import LLMEngine
from engine.model import AttentionBatch
from engine.sampling_params import SamplingParams

PROMPT = [101, 202, 303, 404, 505]


def greedy(n, **kw):
    return SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True, **kw)


def test_generates_max_tokens_and_reports_length(tiny_config):
    eng = LLMEngine(tiny_config())
    eng.add_request("r", PROMPT, greedy(6))
    outs = []
    while eng.has_unfinished():
        outs += eng.step()
    assert [len(o.new_token_ids) for o in outs] == [1] * 6
    assert (
        outs[-1].finished
        and outs[-1].finish_reason == "length"
        and not any(o.finished for o in outs[:-1])
    )
    assert (outs[-1].prompt_tokens, outs[-1].output_tokens) == (5, 6)
    assert eng.kv.allocator.num_used == 0  # finished sequences free their blocks


def test_greedy_is_deterministic_and_batch_independent(tiny_config, run_to_completion):
    alone = LLMEngine(tiny_config())
    alone.add_request("g", PROMPT, greedy(10))
    ref = run_to_completion(alone)["g"]
    busy = LLMEngine(tiny_config())
    busy.add_request("x", [7, 8, 9, 10, 11, 12, 13], greedy(3))
    busy.step()
    busy.add_request("g", PROMPT, greedy(10))  # joins mid-flight next to a decoding sequence
    busy.add_request("y", [42] * 9, SamplingParams(temperature=1.0, max_tokens=12))
    assert run_to_completion(busy)["g"] == ref


def test_seeded_request_reproducible_alone_and_in_a_busy_batch(tiny_config, run_to_completion):
    params = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=10, seed=1234, ignore_eos=True)
    alone = LLMEngine(tiny_config())
    alone.add_request("s", PROMPT, params)
    ref = run_to_completion(alone)["s"]
    assert len(set(ref)) > 3  # temperature 1 gives varied tokens
    busy = LLMEngine(tiny_config())
    torch.manual_seed(99)  # the unseeded neighbours draw from a different global stream
    for i in range(3):
        busy.add_request(f"o{i}", [9 + i] * 4, SamplingParams(temperature=1.0, max_tokens=8))
    busy.step()
    busy.add_request("s", PROMPT, params)
    assert run_to_completion(busy)["s"] == ref


def test_stop_token_ids_and_eos(tiny_config, run_to_completion):
    eng = LLMEngine(tiny_config())
    eng.add_request("probe", PROMPT, greedy(4))
    first = run_to_completion(eng)["probe"][0]
    eng.add_request(
        "stop", PROMPT, SamplingParams(temperature=0.0, max_tokens=20, stop_token_ids=[first])
    )
    outs = []
    while eng.has_unfinished():
        outs += eng.step()
    assert [o.new_token_ids for o in outs] == [[first]] and outs[0].finish_reason == "stop"


def test_max_model_len_caps_output(tiny_config, run_to_completion):
    eng = LLMEngine(tiny_config(max_model_len=16, kv_blocks=8))
    eng.add_request("r", PROMPT, greedy(100))
    assert len(run_to_completion(eng)["r"]) == 16 - len(PROMPT)


def test_abort_frees_blocks_and_is_logged(tiny_config):
    eng = LLMEngine(tiny_config())
    eng.add_request("a", PROMPT, greedy(50))
    eng.step()
    assert eng.kv.allocator.num_used > 0
    eng.abort_request("a")
    assert not eng.has_unfinished() and eng.kv.allocator.num_used == 0
    assert eng.telemetry.requests.buffer.columns["finish_reason"] == ["abort"]


def test_more_requests_than_slots_all_finish(tiny_config, run_to_completion):
    eng = LLMEngine(tiny_config(max_num_seqs=2))
    for i in range(5):
        eng.add_request(f"r{i}", [i + 1] * 3, greedy(4))
    out = run_to_completion(eng)
    assert sorted(out) == [f"r{i}" for i in range(5)] and all(len(v) == 4 for v in out.values())
    assert max(eng.telemetry.steps.buffer.columns["batch_size"]) == 2


@pytest.mark.parametrize(
    "prompt,field", [([], "prompt"), ([1] * 128, "max_model_len"), ([32000], "outside")]
)
def test_bad_prompts_rejected(prompt, field, tiny_config):
    eng = LLMEngine(tiny_config())
    with pytest.raises(ValueError, match=field):
        eng.add_request("r", prompt, greedy(1))


def test_duplicate_request_id_rejected(tiny_config):
    eng = LLMEngine(tiny_config())
    eng.add_request("r", PROMPT, greedy(2))
    with pytest.raises(ValueError, match="request_id"):
        eng.add_request("r", PROMPT, greedy(2))


def test_chat_prompt_generates_text(tiny_config, run_to_completion):
    eng = LLMEngine(tiny_config())
    ids = eng.tokenizer.apply_chat_template([{"role": "user", "content": "Tell me a story."}])
    eng.add_request("c", ids, SamplingParams(temperature=0.8, max_tokens=8, seed=1))
    text = eng.tokenizer.decode(run_to_completion(eng)["c"])
    assert isinstance(text, str) and text


def test_bfloat16_weights_still_give_fp32_logits(tiny_config, run_to_completion):
    eng = LLMEngine(tiny_config(dtype="bfloat16"))
    assert (
        eng.model.lm_head.weight.dtype == torch.bfloat16
        and eng.model.rope_cos.dtype == torch.float32
    )
    a = eng.model.args
    kv = KVCache(a.n_layers, 4, 4, a.n_kv_heads, a.head_dim, torch.bfloat16, torch.device("cpu"))
    n = len(PROMPT)
    attn = AttentionBatch(
        torch.arange(n),
        0,
        torch.zeros(0, 0, dtype=torch.long),
        torch.zeros(0, dtype=torch.long),
        [n],
        torch.tensor([n - 1]),
    )
    assert eng.model(torch.tensor(PROMPT), torch.arange(n), attn, kv.layers).dtype == torch.float32
    eng.add_request("b", PROMPT, greedy(5))
    assert len(run_to_completion(eng)["b"]) == 5
