"""Output tokens/s of the spikelens engine vs ``transformers`` ``generate`` on the same weights (CPU).

For each concurrency B (default 1 and 32): B requests with ``--prompt-tokens``-token prompts each
generate exactly ``--output-tokens`` tokens, greedy (EOS ignored); tokens/s = B x output tokens / wall
time, prefill included, for:
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
``greedy_match`` is the fraction of batch-1 tokens where both produce the same ids before the first
divergence (fp32 rounding can flip a near-tie, so 1.0 is expected but not guaranteed).

Run: ``python bench/decode.py [--preset small] [--concurrency 1 32] [--threads 1] [--http]``; prints
one JSON object.
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

    return LlamaConfig(vocab_size=args.vocab_size, hidden_size=args.dim, intermediate_size=args.ffn_dim,
                       num_hidden_layers=args.n_layers, num_attention_heads=args.n_heads,
                       num_key_value_heads=args.n_kv_heads, rms_norm_eps=args.norm_eps,
                       rope_theta=args.rope_theta, max_position_embeddings=args.max_position,
                       tie_word_embeddings=args.tie_embeddings, attention_bias=False, mlp_bias=False,
                       bos_token_id=0, eos_token_id=1, pad_token_id=2)


def save_random_checkpoint(args: ModelArgs, folder: Path, seed: int) -> Path:
    """A random HF Llama of ``args``' shape plus the project tokenizer, as ``save_pretrained`` writes it."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    LlamaForCausalLM(hf_config(args)).save_pretrained(folder, safe_serialization=True)
    shutil.copy(DEFAULT_TOKENIZER_PATH, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|bos|>", "eos_token": "<|eos|>"}))
    return folder


def load_models(preset: str, checkpoint: str | None, max_num_seqs: int, threads: int, workdir: Path):
    """(engine, hf_model, weights description, engine config) over the same weights."""
    from transformers import LlamaForCausalLM

    can_load_hf = importlib.util.find_spec("engine.checkpoint") is not None
    if checkpoint is None and can_load_hf:
        checkpoint = str(save_random_checkpoint(ModelArgs.from_name(preset), workdir / "ckpt", seed=0))
        weights = f"random HF Llama ({preset} shape) saved with transformers"
    elif checkpoint is not None:
        weights = f"HF checkpoint {checkpoint}"
    else:
        weights = f"engine synthetic '{preset}' weights copied into transformers (engine.checkpoint missing)"
    config = EngineConfig(model=checkpoint or preset, max_num_seqs=max_num_seqs, threads=threads,
                          kv_blocks=4096, max_model_len=2048)
    engine = LLMEngine(config, run_dir=None)
    if checkpoint is not None:
        hf = LlamaForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32)
    else:
        hf = LlamaForCausalLM(hf_config(engine.model.args))
        state = {k: v for k, v in engine.model.state_dict().items() if not k.startswith("rope_")}
        hf.load_state_dict(state, strict=True)
    hf.eval()
    hf.generation_config.eos_token_id = None  # always generate exactly max_new_tokens
    hf.generation_config.pad_token_id = 2
    return engine, hf, weights, config


def prompts(batch: int, length: int, vocab: int) -> list[list[int]]:
    return [[(i * 7919 + j * 104729) % (vocab - 100) + 10 for j in range(length)] for i in range(batch)]


def run_engine(engine: LLMEngine, batch_prompts: list[list[int]], n_out: int) -> tuple[float, list[list[int]]]:
    params = SamplingParams(temperature=0.0, max_tokens=n_out, ignore_eos=True)
    out: dict[str, list[int]] = {}
    t0 = time.perf_counter()
    for i, p in enumerate(batch_prompts):
        engine.add_request(f"b{len(batch_prompts)}-{i}-{t0}", p, params)
    while engine.has_unfinished():
        for o in engine.step():
            out.setdefault(o.request_id, []).extend(o.new_token_ids)
    wall = time.perf_counter() - t0
    return wall, [out[k] for k in sorted(out, key=lambda k: int(k.split("-")[1]))]


@torch.inference_mode()
def run_hf(hf, batch_prompts: list[list[int]], n_out: int) -> tuple[float, list[list[int]]]:
    ids = torch.tensor(batch_prompts)  # [B, P], equal lengths: no padding
    t0 = time.perf_counter()
    out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_out, min_new_tokens=n_out,
                      do_sample=False)
    wall = time.perf_counter() - t0
    return wall, out[:, ids.shape[1]:].tolist()


def run_server(config: EngineConfig, batch_prompts: list[list[int]], n_out: int, workdir: Path,
               repeats: int) -> float:
    """Best wall time of ``repeats`` rounds of the batch sent concurrently to one server process."""
    import httpx

    from engine.server.launch import EngineProcess

    with EngineProcess({"engine": config.to_dict(), "server": {"max_waiting": None}},
                       workdir / f"server-{len(batch_prompts)}") as proc:
        async def go() -> float:
            limits = httpx.Limits(max_connections=len(batch_prompts))
            async with httpx.AsyncClient(base_url=proc.url, timeout=600, limits=limits) as client:
                async def one(p):
                    body = {"prompt": p, "max_tokens": n_out, "temperature": 0, "ignore_eos": True, "stream": True}
                    async with client.stream("POST", "/v1/completions", json=body) as r:
                        async for _ in r.aiter_bytes():
                            pass
                await one(batch_prompts[0][:8])  # warm-up
                walls = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    await asyncio.gather(*(one(p) for p in batch_prompts))
                    walls.append(time.perf_counter() - t0)
                return min(walls)

        return asyncio.run(go())


def prefix_match(a: list[int], b: list[int]) -> float:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return n / max(len(a), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--checkpoint", default=None, help="HF Llama folder (default: a random one built here)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads, both sides")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure; the best is reported")
    ap.add_argument("--http", action="store_true", help="also measure through the HTTP server")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        engine, hf, weights, config = load_models(a.preset, a.checkpoint, max(a.concurrency), a.threads, workdir)
        vocab = engine.model.args.vocab_size
        # transformers' import graph is millions of objects the engine's own allocations would make
        # every full GC walk; the server process does not carry them, so take them out of GC here.
        gc.collect()
        gc.freeze()
        run_engine(engine, prompts(1, 8, vocab), 4)  # warm-up both
        run_hf(hf, prompts(1, 8, vocab), 4)
        results = []
        for b in a.concurrency:
            batch = prompts(b, a.prompt_tokens, vocab)
            engine_runs, hf_runs = [], []
            for _ in range(a.repeats):  # interleaved, so a burst of other load hits both sides alike
                engine_runs.append(run_engine(engine, batch, a.output_tokens))
                hf_runs.append(run_hf(hf, batch, a.output_tokens))
            engine_wall, engine_tokens = min(engine_runs, key=lambda r: r[0])
            hf_wall, hf_tokens = min(hf_runs, key=lambda r: r[0])
            row = {"concurrency": b, "output_tokens": b * a.output_tokens,
                   "engine_tok_s": round(b * a.output_tokens / engine_wall, 1),
                   "hf_tok_s": round(b * a.output_tokens / hf_wall, 1),
                   "ratio": round(hf_wall / engine_wall, 2),
                   "greedy_match": round(sum(prefix_match(x, y) for x, y in zip(engine_tokens, hf_tokens)) / b, 3)}
            if a.http:
                server_wall = run_server(config, batch, a.output_tokens, workdir, a.repeats)
                row["server_tok_s"] = round(b * a.output_tokens / server_wall, 1)
            results.append(row)
        engine.telemetry.close()
        gc.unfreeze()  # let interpreter shutdown release them normally
    print(json.dumps({"bench": "decode", "weights": weights,
                      "preset_or_checkpoint": config.model if a.checkpoint else a.preset,
                      "prompt_tokens": a.prompt_tokens, "output_tokens_per_request": a.output_tokens,
                      "threads": a.threads, "repeats": a.repeats, "device": "cpu",
                      "loadavg_1m": round(os.getloadavg()[0], 2),  # the box is shared: judge the noise
                      "results": results}))


if __name__ == "__main__":
    main()
