"""Output tokens/s of the spikelens engine vs ``transformers`` ``generate`` on the same weights.

For each concurrency B (default 1 and 32) and each workload, greedy (EOS ignored), tokens/s =
requested output tokens / wall time, prefill included:
- ``uniform``: every request has a ``--prompt-tokens`` prompt and wants exactly ``--output-tokens``
  tokens — transformers' best case (one dense batch, no padding, no row finishes early);
- ``mixed``: what a server sees — prompt lengths drawn from [P/4, 2P] and output lengths from
  [O/8, 2O] (seeded). ``generate`` must left-pad the batch to its longest prompt and step it until
  its longest output is done (finished rows keep computing); the engine batches continuously, so a
  finished request leaves the batch. Only the tokens each request asked for count, on both sides.

The two sides:
- ``engine``: ``LLMEngine`` in-process, all B requests added at once, stepped until done (continuous
  batching);
- ``hf``: one ``LlamaForCausalLM.generate`` call over the [B, prompt] batch (equal prompt lengths, so
  no padding);
- ``server`` (with ``--http``): the same B requests sent concurrently to ``python -m engine serve``
  as streaming completions (the HTTP/SSE layer's cost on top of the engine; the client shares the CPU).
Each figure is the best of ``--repeats`` runs, engine and hf interleaved (the machine is shared; the
fastest run is the least disturbed one). ``ratio`` = engine / hf. Same weights on both sides:
- ``--checkpoint DIR``: a local HF Llama folder, loaded by the engine's checkpoint path and by
  transformers;
- otherwise a random Llama of the ``--preset`` shape is built with transformers and saved to a
  temporary folder, loaded the same way; if the engine cannot load HF folders yet
  (no ``engine.checkpoint``), the engine's synthetic preset weights are copied into the transformers
  model instead (parameter names are HF's). ``weights`` in the output says which.
``lm_head_floor_s`` and ``ratio_ceiling`` bound what any engine could show here: the floor is the
time of the LM head alone (the ``[rows, dim] x [dim, vocab]`` matmul both sides must run every
decode step, at the rows the engine still has running at that step, best of ``--repeats``), and the
ceiling is ``hf`` wall / that floor — the ratio of an engine whose steps cost nothing but the LM
head. ``engine_lm_head_share`` = floor / engine wall: how much of the engine's time is that matmul.
``work_ratio`` counts what the two sides must compute, no timing: token rows through the decoder
layers — ``generate``'s padded batch, B x (longest prompt + longest output - 1), over the engine's
sum of (prompt + output - 1) per request. It is what continuous batching and no padding can buy
on a model whose every row costs the same on both sides (1.0 uniform: generate does exactly the
engine's work there); a ratio above it comes from per-step overhead alone (op dispatch, cache
handling, sampling). Where a step costs what streaming the weights costs, whatever its rows (a
larger model on one core), the number of steps bounds the gain instead.
``greedy_match`` is the fraction of batch-1 tokens where both produce the same ids before the first
divergence (fp32 rounding can flip a near-tie, so 1.0 is expected but not guaranteed).

``--device cuda`` runs both sides on the GPU (the engine samples with its Triton kernels; greedy
here, so the sampler's share is small); every wall time ends after a device sync.

Run: ``python bench/decode.py [--preset small] [--concurrency 1 32] [--threads 1] [--http]
[--device cpu]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from engine.config import EngineConfig, ModelArgs
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.tokenizer import DEFAULT_TOKENIZER_PATH


def hf_config(args: ModelArgs):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=args.vocab_size,
        hidden_size=args.dim,
        intermediate_size=args.ffn_dim,
        num_hidden_layers=args.n_layers,
        num_attention_heads=args.n_heads,
        num_key_value_heads=args.n_kv_heads,
        rms_norm_eps=args.norm_eps,
        rope_theta=args.rope_theta,
        max_position_embeddings=args.max_position,
        tie_word_embeddings=args.tie_embeddings,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
    )


def save_random_checkpoint(args: ModelArgs, folder: Path, seed: int) -> Path:
    """A random HF Llama of ``args``' shape plus the project tokenizer, as ``save_pretrained`` writes it."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    LlamaForCausalLM(hf_config(args)).save_pretrained(folder, safe_serialization=True)
    shutil.copy(DEFAULT_TOKENIZER_PATH, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<|bos|>", "eos_token": "<|eos|>"})
    )
    return folder


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU), so a wall time includes it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load_models(
    preset: str,
    checkpoint: str | None,
    max_num_seqs: int,
    threads: int,
    workdir: Path,
    device: str = "cpu",
):
    """(engine, hf_model, weights description, engine config) over the same weights."""
    from transformers import LlamaForCausalLM

    can_load_hf = importlib.util.find_spec("engine.checkpoint") is not None
    if checkpoint is None and can_load_hf:
        checkpoint = str(
            save_random_checkpoint(ModelArgs.from_name(preset), workdir / "ckpt", seed=0)
        )
        weights = f"random HF Llama ({preset} shape) saved with transformers"
    elif checkpoint is not None:
        weights = f"HF checkpoint {checkpoint}"
    else:
        weights = f"engine synthetic '{preset}' weights copied into transformers (engine.checkpoint missing)"
    config = EngineConfig(
        model=checkpoint or preset,
        max_num_seqs=max_num_seqs,
        threads=threads,
        kv_blocks=4096,
        max_model_len=2048,
        device=device,
    )
    engine = LLMEngine(config, run_dir=None)
    if checkpoint is not None:
        hf = LlamaForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32)
    else:
        hf = LlamaForCausalLM(hf_config(engine.model.args))
        state = {k: v for k, v in engine.model.state_dict().items() if not k.startswith("rope_")}
        hf.load_state_dict(state, strict=True)
    hf.to(engine.device).eval()
    hf.generation_config.eos_token_id = None  # always generate exactly max_new_tokens
    hf.generation_config.pad_token_id = 2
    return engine, hf, weights, config


PAD_ID = 2


def prompt_ids(i: int, length: int, vocab: int) -> list[int]:
    return [(i * 7919 + j * 104729) % (vocab - 100) + 10 for j in range(length)]


def workload(
    kind: str, batch: int, prompt_tokens: int, output_tokens: int, vocab: int, seed: int = 0
) -> tuple[list[list[int]], list[int]]:
    """(prompts, output lengths) of one batch: uniform, or mixed lengths as a server sees them."""
    if kind == "uniform":
        return [prompt_ids(i, prompt_tokens, vocab) for i in range(batch)], [output_tokens] * batch
    import random

    rng = random.Random(seed * 1_000_003 + batch)
    lengths = [rng.randint(max(1, prompt_tokens // 4), 2 * prompt_tokens) for _ in range(batch)]
    outputs = [rng.randint(max(1, output_tokens // 8), 2 * output_tokens) for _ in range(batch)]
    return [prompt_ids(i, n, vocab) for i, n in enumerate(lengths)], outputs


def run_engine(
    engine: LLMEngine, batch_prompts: list[list[int]], n_out: list[int]
) -> tuple[float, list[list[int]]]:
    """All requests added at once, stepped until done; (wall s, tokens per request)."""
    out: dict[str, list[int]] = {}
    t0 = time.perf_counter()
    for i, (p, n) in enumerate(zip(batch_prompts, n_out)):
        engine.add_request(
            f"b{len(batch_prompts)}-{i}-{t0}",
            p,
            SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True),
        )
    while engine.has_unfinished():
        for o in engine.step():
            out.setdefault(o.request_id, []).extend(o.new_token_ids)
    wall = time.perf_counter() - t0
    return wall, [out[k] for k in sorted(out, key=lambda k: int(k.split("-")[1]))]


@torch.inference_mode()
def run_hf(hf, batch_prompts: list[list[int]], n_out: list[int]) -> tuple[float, list[list[int]]]:
    """One ``generate`` over the left-padded batch until the longest output is done; (wall s, the
    tokens each request asked for)."""
    width = max(len(p) for p in batch_prompts)
    ids = torch.tensor([[PAD_ID] * (width - len(p)) + p for p in batch_prompts])  # [B, P]
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch_prompts])  # [B, P]
    longest = max(n_out)
    sync(hf.device)
    t0 = time.perf_counter()
    out = hf.generate(
        ids.to(hf.device),
        attention_mask=mask.to(hf.device),
        max_new_tokens=longest,
        min_new_tokens=longest,
        do_sample=False,
    )  # [B, P + longest]
    sync(hf.device)
    wall = time.perf_counter() - t0
    return wall, [row[:n] for row, n in zip(out[:, width:].tolist(), n_out)]


def run_server(
    config: EngineConfig,
    batch_prompts: list[list[int]],
    n_out: list[int],
    workdir: Path,
    repeats: int,
) -> float:
    """Best wall time of ``repeats`` rounds of the batch sent concurrently to one server process."""
    import httpx

    from engine.server.launch import EngineProcess

    with EngineProcess(
        {"engine": config.to_dict(), "server": {"max_waiting": None}},
        workdir / f"server-{len(batch_prompts)}",
    ) as proc:

        async def go() -> float:
            limits = httpx.Limits(max_connections=len(batch_prompts))
            async with httpx.AsyncClient(base_url=proc.url, timeout=600, limits=limits) as client:

                async def one(p, n):
                    body = {
                        "prompt": p,
                        "max_tokens": n,
                        "temperature": 0,
                        "ignore_eos": True,
                        "stream": True,
                    }
                    async with client.stream("POST", "/v1/completions", json=body) as r:
                        async for _ in r.aiter_bytes():
                            pass

                await one(batch_prompts[0][:8], 4)  # warm-up
                walls = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    await asyncio.gather(*(one(p, n) for p, n in zip(batch_prompts, n_out)))
                    walls.append(time.perf_counter() - t0)
                return min(walls)

        return asyncio.run(go())


def rows_per_step(n_out: list[int]) -> list[int]:
    """Sequences the engine still runs at each step when all start together: step t has every
    request that wants more than t tokens (the first step is the prefill)."""
    return [sum(n > t for n in n_out) for t in range(max(n_out))]


@torch.inference_mode()
def lm_head_floor(hf, n_out: list[int], repeats: int) -> float:
    """Seconds the LM head matmul alone takes over the engine's steps (best of ``repeats``)."""
    w = hf.lm_head.weight  # [V, dim]
    per_rows = {}
    for rows in sorted(set(rows_per_step(n_out))):
        h = torch.randn(rows, w.shape[1], dtype=w.dtype, device=w.device)  # [rows, dim]
        best = float("inf")
        for _ in range(repeats):
            sync(w.device)
            t0 = time.perf_counter()
            torch.nn.functional.linear(h, w)  # [rows, V]
            sync(w.device)
            best = min(best, time.perf_counter() - t0)
        per_rows[rows] = best
    return sum(per_rows[r] for r in rows_per_step(n_out))


def work_ratio(batch_prompts: list[list[int]], n_out: list[int]) -> float:
    """Decoder-layer token rows of ``generate`` (left-padded batch, stepped to the longest output)
    over the engine's (each request's own prompt and outputs)."""
    hf_rows = len(batch_prompts) * (max(len(p) for p in batch_prompts) + max(n_out) - 1)
    engine_rows = sum(len(p) + n - 1 for p, n in zip(batch_prompts, n_out))
    return hf_rows / engine_rows


def prefix_match(a: list[int], b: list[int]) -> float:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return n / max(len(a), 1)


def _measure(engine, hf, batch: list, n_out: list[int], a: argparse.Namespace) -> dict:
    """One (workload, concurrency) cell: the engine and transformers on the same batch, the best
    of `a.repeats` interleaved runs each, beside the LM-head floor."""
    b, wanted = len(batch), sum(n_out)
    engine_runs, hf_runs = [], []
    for _ in range(a.repeats):  # interleaved, so a burst of other load hits both sides alike
        engine_runs.append(run_engine(engine, batch, n_out))
        hf_runs.append(run_hf(hf, batch, n_out))
    engine_wall, engine_tokens = min(engine_runs, key=lambda r: r[0])
    hf_wall, hf_tokens = min(hf_runs, key=lambda r: r[0])
    floor = lm_head_floor(hf, n_out, max(a.repeats, 5))
    return {
        "output_tokens": wanted,
        "prompt_tokens": sum(len(p) for p in batch),
        "engine_tok_s": round(wanted / engine_wall, 1),
        "hf_tok_s": round(wanted / hf_wall, 1),
        "ratio": round(hf_wall / engine_wall, 2),
        "lm_head_floor_s": round(floor, 4),
        "ratio_ceiling": round(hf_wall / floor, 2),
        "engine_lm_head_share": round(floor / engine_wall, 2),
        "work_ratio": round(work_ratio(batch, n_out), 2),
        "greedy_match": round(
            sum(prefix_match(x, y) for x, y in zip(engine_tokens, hf_tokens)) / b, 3
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument(
        "--checkpoint", default=None, help="HF Llama folder (default: a random one built here)"
    )
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument(
        "--workload", nargs="+", choices=["uniform", "mixed"], default=["uniform", "mixed"]
    )
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads, both sides")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure; the best is reported")
    ap.add_argument("--http", action="store_true", help="also measure through the HTTP server")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="both sides")
    a = ap.parse_args()
    from flows.requirements import require

    require("bench/decode.py")  # transformers missing: say so before the engine side runs
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        engine, hf, weights, config = load_models(
            a.preset, a.checkpoint, max(a.concurrency), a.threads, workdir, a.device
        )
        vocab = engine.model.args.vocab_size
        # transformers' import graph is millions of objects the engine's own allocations would make
        # every full GC walk; the server process does not carry them, so take them out of GC here.
        gc.collect()
        gc.freeze()
        warm = [prompt_ids(0, 8, vocab)]
        run_engine(engine, warm, [4])  # warm-up both
        run_hf(hf, warm, [4])
        results = []
        for kind in a.workload:
            for b in a.concurrency:
                batch, n_out = workload(kind, b, a.prompt_tokens, a.output_tokens, vocab)
                row = {"workload": kind, "concurrency": b, **_measure(engine, hf, batch, n_out, a)}
                if a.http:
                    server_wall = run_server(config, batch, n_out, workdir, a.repeats)
                    row["server_tok_s"] = round(sum(n_out) / server_wall, 1)
                results.append(row)
        engine.telemetry.close()
        gc.unfreeze()  # let interpreter shutdown release them normally
    print(
        json.dumps(
            {
                "bench": "decode",
                "weights": weights,
                "preset_or_checkpoint": config.model if a.checkpoint else a.preset,
                "prompt_tokens": a.prompt_tokens,
                "output_tokens_per_request": a.output_tokens,
                "mixed_ranges": {
                    "prompt": [max(1, a.prompt_tokens // 4), 2 * a.prompt_tokens],
                    "output": [max(1, a.output_tokens // 8), 2 * a.output_tokens],
                },
                "threads": a.threads,
                "repeats": a.repeats,
                "device": str(engine.device),
                "device_name": torch.cuda.get_device_name(engine.device)
                if engine.device.type == "cuda"
                else None,
                "loadavg_1m": round(os.getloadavg()[0], 2),  # the box is shared: judge the noise
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
