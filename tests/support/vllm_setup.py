"""Shared by the vLLM end-to-end tests: a tiny Llama checkpoint vLLM's CPU build can serve, and
the interpreter of the virtualenv `make setup-vllm` builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from flows.vllm_config import DEFAULT_VLLM_PYTHON

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "build_llama_checkpoint.py"
SUITE = ROOT / "scenarios" / "eval-vllm"  # the vLLM fault suite (`make evaluate-vllm`)

# vLLM on 2 busy cores: /health after 26-60 s quiet, a few minutes when the box is contended.
STARTUP_TIMEOUT_S = 600


def vllm_python() -> str:
    """The vLLM virtualenv's interpreter; skips the test where it was not built."""
    if not DEFAULT_VLLM_PYTHON.is_file():
        pytest.skip(f"{DEFAULT_VLLM_PYTHON} missing: run `make setup-vllm`")
    return str(DEFAULT_VLLM_PYTHON)


def build_tiny_llama(folder: Path) -> Path:
    """A random 2-layer Llama (head_dim 64: vLLM's CPU attention rejects 16) with the project's
    tokenizer and a chat template, built by the shipped scripts/build_llama_checkpoint.py."""
    out = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), str(folder)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return Path(out.stdout.strip().splitlines()[-1])


def tiny_vllm_command(ckpt: Path, port: int, served_name: str) -> list[str]:
    """`python -m vllm.entrypoints.openai.api_server` serving the tiny Llama on 127.0.0.1, as
    the tests start a vLLM by hand: float32, eager, 512 tokens of context, 8 sequences."""
    return [
        vllm_python(),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(ckpt),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--served-model-name",
        served_name,
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "8",
    ]


def processes_using(path: Path) -> list[psutil.Process]:
    """Live processes whose command line names `path` (a vLLM serving that checkpoint)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(str(path) in a for a in p.info["cmdline"] or ()):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def vllm_scenario(
    path: Path,
    ckpt: Path,
    *,
    duration_s: float,
    warmup_s: float,
    users: int,
    faults: tuple[str, ...] = (),
) -> Path:
    """A short `engine: {kind: vllm}` scenario over `ckpt` (the tiny checkpoint's settings:
    fp32, eager, 512 positions, 1 GiB of KV cache), written to `path`; `faults` are YAML flow
    mappings, one per fault."""
    fault_lines = "".join(f"  - {f}\n" for f in faults)
    path.write_text(
        f"""\
name: {path.stem}
duration_s: {duration_s}
warmup_s: {warmup_s}
engine:
  kind: vllm
  model: {ckpt}
  dtype: float32
  enforce_eager: true
  max_model_len: 512
  max_num_seqs: 8
  kv_cache_space_gib: 1
  startup_timeout_s: {STARTUP_TIMEOUT_S}
workload:
  prompt_tokens: {{mean: 24, std: 4, min: 8, max: 48}}
  output_tokens: {{mean: 16, std: 4, min: 4, max: 24}}
load: {{shape: constant, users: {users}}}
"""
        + (f"faults:\n{fault_lines}" if faults else "")
    )
    return path


def run_suite_case(home: Path, ckpt: Path, case: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run scenarios/eval-vllm/<case>.yaml on `ckpt` (run_vllm_scenario)."""
    return run_vllm_scenario(home, ckpt, SUITE / f"{case}.yaml")


def run_vllm_scenario(
    home: Path, ckpt: Path, scenario: Path
) -> tuple[subprocess.CompletedProcess, dict]:
    """Run a vLLM scenario file on `ckpt` through the real CLI, state under `home`; (the CLI's
    result, the run's run.json). Fails the test unless the run exited 0 without errors; the run
    id is run.json's `run_id`, the report the CLI's last line."""
    env = {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }  # a migrated Prefect DB: faster
    overrides = json.dumps({"engine": {"model": str(ckpt)}})
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", str(scenario)] + ["--overrides", overrides],
        env=env,
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S + 300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    run_id = Path(proc.stdout.strip().splitlines()[-1]).parent.name
    run = json.loads((home / "runs" / run_id / "run.json").read_text())
    assert run["errors"] == [], run["errors"]
    return proc, run
