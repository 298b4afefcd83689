"""Build a small random Llama checkpoint that vLLM (its CPU build included) can serve.

What: a Hugging Face folder (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json with a chat template) written by `transformers`, with spikelens' own
32k-token tokenizer. Why: spikelens' vLLM demo and end-to-end tests need a checkpoint that loads in
seconds on 2 cores and downloads nothing. The defaults (2 layers, hidden 256, 4 heads of 64) keep
it at ~70 MB in float32; head_dim must stay 64 or more (vLLM's CPU attention rejects 16), and the
vocabulary is the production-size tokenizer's, so penalty work costs what it costs in production.

Run with any interpreter that has torch and transformers (`.venv-vllm/bin/python` has both):
    python scripts/build_llama_checkpoint.py checkpoints/tiny-llama [--layers 2 --hidden 256 ...]
It prints the folder; an existing checkpoint built with the same options is kept as it is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

TOKENIZER = Path(__file__).resolve().parent.parent / "engine" / "assets" / "tokenizer.json"
# vLLM's chat endpoint needs a template; the completions endpoint does not.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
STAMP = "spikelens-build.json"  # the options a folder was built with


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="where to write the checkpoint")
    p.add_argument("--layers", type=int, default=2, help="decoder layers (>= 1)")
    p.add_argument("--hidden", type=int, default=256, help="hidden size (heads x head_dim)")
    p.add_argument("--heads", type=int, default=4, help="attention heads (head_dim >= 64)")
    p.add_argument("--intermediate", type=int, default=512, help="MLP size")
    p.add_argument("--max-positions", type=int, default=512, help="max_position_embeddings")
    p.add_argument("--seed", type=int, default=0, help="torch seed of the random weights")
    p.add_argument("--tokenizer", type=Path, default=TOKENIZER, help="a tokenizer.json")
    args = p.parse_args(argv)
    checks = (
        ("--layers", args.layers >= 1, "must be >= 1"),
        ("--heads", args.heads >= 1, "must be >= 1"),
        ("--hidden", args.hidden % max(args.heads, 1) == 0, "must be a multiple of --heads"),
        (
            "--hidden",
            args.hidden // max(args.heads, 1) >= 64,
            "/ --heads (head_dim) must be >= 64: vLLM's CPU attention rejects smaller heads",
        ),
        ("--intermediate", args.intermediate >= 1, "must be >= 1"),
        ("--max-positions", 16 <= args.max_positions <= 131_072, "must be in [16, 131072]"),
        ("--tokenizer", args.tokenizer.is_file(), f"{args.tokenizer} is not a file"),
    )
    for flag, ok, message in checks:
        if not ok:
            p.error(f"{flag}: {message}")
    return args


def build(args: argparse.Namespace) -> Path:
    """Write the checkpoint (skipped when the folder holds one built with the same options)."""
    stamp = {k: str(v) for k, v in sorted(vars(args).items()) if k != "folder"}
    folder: Path = args.folder
    if (folder / STAMP).is_file() and json.loads((folder / STAMP).read_text()) == stamp:
        return folder
    import torch
    import transformers

    vocab = len(json.loads(args.tokenizer.read_text())["model"]["vocab"])
    cfg = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=args.max_positions,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        torch_dtype="float32",
    )
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    transformers.LlamaForCausalLM(cfg).eval().save_pretrained(folder, safe_serialization=True)
    shutil.copy(args.tokenizer, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|bos|>",
                "eos_token": "<|eos|>",
                "pad_token": "<|pad|>",
                "model_max_length": args.max_positions,
                "chat_template": CHAT_TEMPLATE,
            }
        )
    )
    (folder / STAMP).write_text(json.dumps(stamp))
    return folder


def main(argv: list[str] | None = None) -> int:
    print(build(parse_args(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
