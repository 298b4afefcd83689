"""Each tool's command line for one closed-loop concurrency benchmark against the no-op server.

Every tool gets the same target, concurrency, prompt and output length and measured duration,
and otherwise its documented defaults for a concurrency run: GuideLLM `--profile
kind=concurrent,streams=N` with a `max_duration` constraint and synthetic text; AIPerf
`--concurrency N --benchmark-duration S --streaming` with synthetic prompts. Neither may reach the
network here, so both read the engine's tokenizer (engine/assets/tokenizer.json) from a local
directory (`tokenizer_dir`); the no-op server ignores prompt content.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOKENIZER_JSON = REPO / "engine" / "assets" / "tokenizer.json"


@dataclass(frozen=True)
class RunSpec:
    """What every tool is asked to do."""

    url: str  # the no-op server's root, e.g. http://127.0.0.1:8123
    users: int  # concurrent streams, closed loop
    prompt_tokens: int
    output_tokens: int
    duration_s: float  # measured duration
    warmup_s: float  # loadgen's warm-up (the peers' default is none)
    model: str = "noop"


def tokenizer_dir(where: Path) -> Path:
    """A directory transformers' AutoTokenizer loads offline: the engine's tokenizer.json."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "tokenizer.json").write_bytes(TOKENIZER_JSON.read_bytes())
    (where / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"})
    )
    (where / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return where


def guidellm_command(venv: Path, spec: RunSpec, tokenizer: Path, output_json: Path) -> list[str]:
    return [
        str(venv / "bin" / "guidellm"),
        "run",
        "--backend",
        f"kind=openai_http,target={spec.url},model={spec.model}",
        "--tokenizer",
        f"kind=huggingface_auto,model={tokenizer}",
        "--profile",
        f"kind=concurrent,streams={spec.users}",
        "--constraint",
        f"kind=max_duration,seconds={spec.duration_s:g}",
        "--data",
        f"kind=synthetic_text,prompt_tokens={spec.prompt_tokens},output_tokens={spec.output_tokens}",
        "--output",
        f"kind=json,path={output_json}",
        "--disable-console-interactive",
    ]


def aiperf_command(venv: Path, spec: RunSpec, tokenizer: Path, artifact_dir: Path) -> list[str]:
    return [
        str(venv / "bin" / "aiperf"),
        "profile",
        "--model",
        spec.model,
        "--url",
        spec.url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        str(spec.users),
        "--benchmark-duration",
        f"{spec.duration_s:g}",
        "--prompt-input-tokens-mean",
        str(spec.prompt_tokens),
        "--prompt-output-tokens-mean",
        str(spec.output_tokens),
        "--tokenizer",
        str(tokenizer),
        "--ui",
        "none",
        "--output-artifact-dir",
        str(artifact_dir),
    ]


def spikelens_command(bench_script: Path, spec: RunSpec, run_dir: Path) -> list[str]:
    """bench/loadgen.py in child mode: run_locust (one Locust worker) into run_dir."""
    return [
        sys.executable,
        str(bench_script),
        "--spikelens-child",
        spec.url,
        str(run_dir),
        "--users",
        str(spec.users),
        "--duration-s",
        f"{spec.duration_s:g}",
        "--warmup-s",
        f"{spec.warmup_s:g}",
        "--prompt-tokens",
        str(spec.prompt_tokens),
        "--output-tokens",
        str(spec.output_tokens),
    ]
