"""Train a small Llama once, on CPU, so the engine serves a model whose outputs end on their own.

Why: the engine's presets carry synthetic weights, which never choose EOS for a reason; the
``penalty.repetition`` fault needs a model that normally stops (samples EOS at the end of a passage)
and that loops when sampling turns greedy with a negative frequency penalty. A few minutes of
training on the text the project's tokenizer was trained on is enough for both.

Data: the CPython standard library text of ``engine.train_tokenizer`` (English comments, docstrings
and code), cut into blank-line separated passages, plus the load generator's own prompt corpus cut
into groups of sentences (the prompts it sends are cut from it). Every passage is followed by the
tokenizer's EOS, then passages are packed into fixed-length windows, so the model learns that a
passage ends and what follows its end. Why the loss is taken over the ids that occur in the text
only (a few thousand of the 32k): the 32k-wide output layer is most of the cost of a step on 2
shared cores; ids that never occur keep their small random embeddings and so stay unlikely.

Output: a Hugging Face Llama folder (``config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``, ``training.json`` with the measured losses) that ``engine.model`` accepts.
Needs ``transformers`` (the ``test`` extra). Run:
``python scripts/train_small_model.py --out models/small-lm [--steps 300] [--minutes 6]``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from engine.tokenizer import DEFAULT_TOKENIZER_PATH, EOS, Tokenizer
from engine.train_tokenizer import corpus_files

LOADGEN_CORPUS = Path(__file__).resolve().parent.parent / "loadgen" / "corpus.txt"


@dataclass(frozen=True)
class TrainOptions:
    out: Path  # checkpoint folder to write
    steps: int = 300  # optimizer steps (stops earlier at ``minutes``)
    minutes: float = 6.0  # wall-clock cap on training
    batch: int = 8  # windows per step
    window: int = 64  # tokens per window
    hidden: int = 64  # model width (head_dim 64 // heads)
    layers: int = 2
    heads: int = 2
    lr: float = 3e-3
    max_chars: int = 400_000  # stdlib text read (sorted file order); the whole of it is ~12 MB
    seed: int = 0
    threads: int = 2


def passages(opts: TrainOptions) -> list[str]:
    """Blank-line separated stdlib passages (4..800 chars) and 2-sentence groups of the prompt corpus."""
    out: list[str] = []
    read = 0
    for path in corpus_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        out += [p.strip("\n") for p in re.split(r"\n\s*\n", text) if 4 <= len(p.strip()) <= 800]
        read += len(text)
        if read >= opts.max_chars:
            break
    sentences = re.split(r"(?<=[.!?\"])\s+", LOADGEN_CORPUS.read_text(encoding="utf-8"))
    prose = [" ".join(sentences[i : i + 2]).strip() for i in range(0, len(sentences), 2)]
    prose = [p for p in prose if p]
    return out + prose * 20  # the prompts' own register, weighted up (the corpus is small)


def token_stream(opts: TrainOptions, tok: Tokenizer) -> torch.Tensor:
    """Every passage's ids followed by EOS, in a shuffled order, as one int64 tensor."""
    docs = passages(opts)
    random.Random(opts.seed).shuffle(docs)
    ids: list[int] = []
    for doc in docs:
        ids += tok.encode(doc) + [tok.eos_token_id]
    return torch.tensor(ids, dtype=torch.long)


def build_model(opts: TrainOptions, vocab: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=opts.hidden,
        intermediate_size=opts.hidden * 3,
        num_hidden_layers=opts.layers,
        num_attention_heads=opts.heads,
        num_key_value_heads=opts.heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,  # halves the weights: the 32k-row embedding is most of them
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
    )
    return LlamaForCausalLM(cfg)


def restricted_loss(model, batch: torch.Tensor, used: torch.Tensor, remap: torch.Tensor):
    """Next-token cross-entropy with the (tied) output layer evaluated at the ``used`` ids only."""
    hidden = model.model(input_ids=batch).last_hidden_state[:, :-1]  # [B, T-1, H]
    weight = model.lm_head.weight[used]  # [U, H]
    logits = hidden @ weight.T  # [B, T-1, U]
    target = remap[batch[:, 1:]]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, used.numel()), target.reshape(-1))


def train(opts: TrainOptions) -> dict:
    """Train, save the folder, return the measured figures (also written to training.json)."""
    torch.manual_seed(opts.seed)
    torch.set_num_threads(opts.threads)
    tok = Tokenizer.default()
    stream = token_stream(opts, tok)
    used = torch.unique(stream)  # [U] ids that occur: the loss's output classes
    remap = torch.full((tok.vocab_size,), -100, dtype=torch.long)
    remap[used] = torch.arange(used.numel())
    model = build_model(opts, tok.vocab_size)
    optim = torch.optim.AdamW(model.parameters(), lr=opts.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(opts.seed)
    losses: list[float] = []
    t0 = time.monotonic()
    for step in range(opts.steps):
        starts = torch.randint(0, stream.numel() - opts.window - 1, (opts.batch,), generator=gen)
        batch = torch.stack([stream[s : s + opts.window] for s in starts.tolist()])
        lr = opts.lr * min(1.0, (step + 1) / 20)  # short warm-up
        for group in optim.param_groups:
            group["lr"] = lr
        loss = restricted_loss(model, batch, used, remap)
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        losses.append(float(loss.detach()))
        if step % 20 == 0:
            print(f"step {step} loss {losses[-1]:.3f} ({time.monotonic() - t0:.0f} s)", flush=True)
        if time.monotonic() - t0 > opts.minutes * 60:
            break
    figures = {
        "steps": len(losses),
        "seconds": round(time.monotonic() - t0, 1),
        "tokens_in_stream": int(stream.numel()),
        "distinct_ids": int(used.numel()),
        "first_loss": round(losses[0], 3),
        "last20_loss": round(sum(losses[-20:]) / len(losses[-20:]), 3),
        "options": {k: str(v) for k, v in asdict(opts).items()},
    }
    save(model, opts.out, figures)
    return figures


def save(model, out: Path, figures: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    shutil.copy(DEFAULT_TOKENIZER_PATH, out / "tokenizer.json")
    (out / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": EOS, "bos_token": "<|bos|>"}, indent=1)
    )
    (out / "training.json").write_text(json.dumps(figures, indent=1))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=TrainOptions.steps)
    ap.add_argument("--minutes", type=float, default=TrainOptions.minutes)
    ap.add_argument("--seed", type=int, default=TrainOptions.seed)
    a = ap.parse_args(argv)
    if a.steps < 1 or a.minutes <= 0:
        ap.error("--steps must be >= 1 and --minutes > 0")
    print(json.dumps(train(TrainOptions(a.out, a.steps, a.minutes, seed=a.seed)), indent=1))


if __name__ == "__main__":
    main()
