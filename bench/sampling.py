"""Penalties + sampling per decode step on the CPU: the engine's sampler vs transformers' chain.

For each vocabulary size V (default 32000 and 128000), B rows (default 64) with a history of
`--history` ids each (half prompt, half output) and the same parameters on both sides:
- ``engine``: SamplingMetadata.build + Sampler().sample + PenaltyState.update (the whole per-step
  cost; torch backend, CPU candidate path);
- ``hf``: LogitsProcessorList([RepetitionPenalty, Temperature, TopK, TopP, MinP]) on the [B, L]
  history, then softmax + torch.multinomial, as `generate(do_sample=True)` does.
Frequency/presence penalties are left at 0: transformers has no processor for them.
Two logit shapes: ``peaked`` (logit = -1.5 ln(rank) + N(0, 0.5), a Zipf-like LM-ish distribution
over a random permutation of the vocabulary) and ``flat`` (N(0, 1) x 3: a nucleus that spans most of
the vocabulary, where the engine's top-p-only rows outgrow its candidate pools and go to the
threshold search of engine/sampling/threshold.py).
Each figure is the median of `--repeats` timed runs after one warm-up; `ratio` = hf_ms / engine_ms.
Single-threaded by default (`--threads`): the machine is shared.

Run: ``python bench/sampling.py [--batch 64] [--vocab 32000 128000] [--repeats 5]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from flows.requirements import require

require("bench/sampling.py")  # before the transformers import below fails with a traceback
from transformers import (  # noqa: E402
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from engine.sampling import PenaltyState, Sampler, SamplingMetadata  # noqa: E402
from engine.sampling_params import SamplingParams  # noqa: E402

# name -> parameters shared by both sides (HF warpers skip a value meaning "off").
PARAM_SETS = {
    "topk50_topp095_minp005_rep11": dict(
        temperature=0.8, top_k=50, top_p=0.95, min_p=0.05, repetition_penalty=1.1
    ),
    "topp09_rep11": dict(temperature=0.8, top_p=0.9, repetition_penalty=1.1),
}


def hf_chain(values: dict) -> LogitsProcessorList:
    """The transformers processors for `values`, in generate()'s order."""
    chain = []
    if values.get("repetition_penalty", 1.0) != 1.0:
        chain.append(RepetitionPenaltyLogitsProcessor(values["repetition_penalty"]))
    chain.append(TemperatureLogitsWarper(values["temperature"]))
    if values.get("top_k", -1) >= 1:
        chain.append(TopKLogitsWarper(values["top_k"]))
    if values.get("top_p", 1.0) < 1.0:
        chain.append(TopPLogitsWarper(values["top_p"]))
    if values.get("min_p", 0.0) > 0.0:
        chain.append(MinPLogitsWarper(values["min_p"]))
    return LogitsProcessorList(chain)


def make_logits(shape: str, batch: int, vocab: int, gen: torch.Generator) -> torch.Tensor:
    """[B, V] fp32 logits of the named shape (see the module docstring)."""
    if shape == "flat":
        return torch.randn(batch, vocab, generator=gen) * 3
    ranks = torch.arange(1, vocab + 1, dtype=torch.float32)
    base = -1.5 * torch.log(ranks)
    rows = [base[torch.randperm(vocab, generator=gen)] for _ in range(batch)]
    return torch.stack(rows) + 0.5 * torch.randn(batch, vocab, generator=gen)


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bench_one(batch: int, vocab: int, history: int, values: dict, shape: str, repeats: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    history_ids = torch.randint(0, vocab, (batch, history), generator=gen)
    logits = make_logits(shape, batch, vocab, gen)
    chain = hf_chain(values)

    def hf_step():
        scores = chain(history_ids, logits)
        return torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1)

    state = PenaltyState(batch, vocab)
    half = history // 2
    for slot in range(batch):
        state.assign(slot, history_ids[slot, :half], history_ids[slot, half:])
    params = [SamplingParams(**values)] * batch
    slots = list(range(batch))
    sampler = Sampler(backend="torch")

    def engine_step():
        ids = sampler.sample(logits, SamplingMetadata.build(params, slots, state))
        state.update(slots, ids)
        return ids

    meta = SamplingMetadata.build(params, slots, state)
    hf_ms = median_ms(hf_step, repeats)
    engine_ms = median_ms(engine_step, repeats)
    return {
        "batch": batch,
        "vocab": vocab,
        "history": history,
        "params": values,
        "logits": shape,
        "engine_ms": round(engine_ms, 2),
        "hf_ms": round(hf_ms, 2),
        "ratio": round(hf_ms / engine_ms, 2),
        "engine_penalty_ms": round(median_ms(lambda: sampler.penalties(logits, meta), repeats), 2),
        "hf_repetition_ms": round(median_ms(lambda: chain[0](history_ids, logits), repeats), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--vocab", type=int, nargs="+", default=[32000, 128000])
    parser.add_argument("--history", type=int, default=512, help="prompt + output ids per row")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--shapes", nargs="+", default=["peaked", "flat"], choices=["peaked", "flat"]
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = [
        bench_one(args.batch, vocab, args.history, values, shape, args.repeats)
        for vocab in args.vocab
        for values in PARAM_SETS.values()
        for shape in args.shapes
    ]
    print(
        json.dumps(
            {
                "bench": "sampling",
                "device": "cpu",
                "threads": args.threads,
                "torch": torch.__version__,
                "target_ratio": 3.0,
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
