"""`spikelens engine`: serve spikelens' engine alone, as `vllm serve` does, until Ctrl-C.

The flags are laid over an optional CONFIG.json and handed to `python -m engine serve` in a
child process that this command stops gracefully on Ctrl-C or SIGTERM. To add a flag: a
parameter of `engine` and its key in `engine_flags` (the engine block) or `server_flags`.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import typer

from flows.cli_run import fail
from flows.paths import StatePaths
from flows.progress import console


def engine(
    model_arg: str | None = typer.Argument(
        None, metavar="[MODEL]", help="Same as --model (as in `vllm serve MODEL`)."
    ),
    model: str | None = typer.Option(
        None,
        help="Preset (tiny, small, medium; default small) or a Hugging Face Llama "
        "checkpoint folder.",
    ),
    config: Path | None = typer.Option(
        None,
        exists=True,
        dir_okay=False,
        help="CONFIG.json {engine, faults, server} (docs/engine-server.md); every flag "
        "given on the command line overrides the file's value.",
    ),
    max_model_len: int | None = typer.Option(
        None,
        help="Context length (prompt + output). Default: the model's "
        "max_position_embeddings, capped by the KV cache (kv-blocks × block-size).",
    ),
    max_num_seqs: int | None = typer.Option(None, help="Running-batch limit (default 32)."),
    kv_blocks: int | None = typer.Option(
        None,
        "--kv-blocks",
        "--num-gpu-blocks-override",
        help="Paged KV cache size in blocks (default 512).",
    ),
    kv_cache_memory_bytes: str | None = typer.Option(
        None, help="KV cache size per rank instead of --kv-blocks, e.g. 512MiB or 2GiB."
    ),
    block_size: int | None = typer.Option(None, help="Tokens per KV block (default 16)."),
    max_num_batched_tokens: int | None = typer.Option(
        None, help="Tokens one step may process (default: max-model-len)."
    ),
    dtype: str | None = typer.Option(
        None,
        help="float32 (default), bfloat16, float16; also half, float, auto "
        "(the checkpoint's dtype).",
    ),
    tensor_parallel_size: int | None = typer.Option(
        None, "--tensor-parallel-size", "--tp", help="Tensor-parallel ranks (default 1)."
    ),
    seed: int | None = typer.Option(
        None, help="Seed of synthetic weights and unseeded sampling (default 0)."
    ),
    device: str | None = typer.Option(None, help="cpu (default), cuda or auto."),
    chat_template: str | None = typer.Option(
        None,
        help="Chat template: a Jinja file or the template itself (as vLLM's). Default: the "
        "checkpoint's chat_template.jinja, chat_template.json or tokenizer_config.json.",
    ),
    served_model_name: str | None = typer.Option(
        None, help="Model id answered by /v1/models (default spikelens)."
    ),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8000, help="Port."),
    run_dir: Path | None = typer.Option(None, help="Where to write telemetry files."),
) -> None:
    """Serve the engine alone (OpenAI-compatible API, as `vllm serve` does) until Ctrl-C.

    `spikelens engine --model DIR` needs no other flag: the context length comes from the
    checkpoint. With --config FILE, the flags given override the file's values.
    """
    _check_engine_flags(model_arg, model, kv_blocks is not None, kv_cache_memory_bytes, device)
    engine_flags = {
        "model": model or model_arg,
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "kv_blocks": kv_blocks,
        "kv_cache_memory_bytes": kv_cache_memory_bytes,
        "block_size": block_size,
        "max_num_batched_tokens": max_num_batched_tokens,
        "dtype": dtype,
        "tp": tensor_parallel_size,
        "seed": seed,
        "device": device,
        "chat_template": chat_template,
    }
    data = _engine_run_config(config, engine_flags, {"model_name": served_model_name})
    run_dir = run_dir or StatePaths.from_env().ensure().runs / "adhoc-engine"
    raise typer.Exit(_serve_engine(data, run_dir, host, port))


def _check_engine_flags(
    model_arg: str | None,
    model: str | None,
    kv_blocks_given: bool,
    kv_cache_memory_bytes: str | None,
    device: str | None,
) -> None:
    """Flags that contradict each other fail (exit 2); a GPU device notes what is missing."""
    if kv_blocks_given and kv_cache_memory_bytes is not None:
        fail("give the KV cache size once: --kv-blocks or --kv-cache-memory-bytes")
    if device in ("cuda", "auto"):
        _note_missing_requirements("engine --device cuda")
    if model_arg and model and model_arg != model:
        fail(f"give the model once: MODEL {model_arg!r} and --model {model!r} differ")


def _note_missing_requirements(what: str) -> None:
    """Print (not fail) what `what` needs and this machine lacks (flows.requirements)."""
    from rich.markup import escape

    from flows.requirements import note

    missing = note(what)
    if missing:
        console.print(f"[yellow]note:[/yellow] {escape(missing)}", highlight=False, soft_wrap=True)


def _serve_engine(data: dict, run_dir: Path, host: str, port: int) -> int:
    """`python -m engine serve` on the merged config (kept in run_dir for the record) until it
    stops; its exit code."""
    import json

    run_dir.mkdir(parents=True, exist_ok=True)
    merged = run_dir / "engine-config.json"  # what the server ran with, for the record
    merged.write_text(json.dumps(data, indent=1))
    command = [sys.executable, "-m", "engine", "serve", "--config", str(merged)]
    command += ["--run-dir", str(run_dir), "--host", host, "--port", str(port)]
    return _serve_until_stopped(command)


def _engine_run_config(config: Path | None, engine_flags: dict, server_flags: dict) -> dict:
    """CONFIG.json for `python -m engine serve`: the --config file (if any) with the flags given
    laid over its `engine` and `server` blocks. The server validates the result."""
    import json

    data: dict = {"run_id": "adhoc", "faults": []}
    if config is not None:
        try:
            data = json.loads(config.read_text())
        except json.JSONDecodeError as e:
            fail(f"--config {config}: not valid JSON ({e})")
        if not isinstance(data, dict):
            fail(f"--config {config}: must hold a JSON object {{engine, faults, server}}")
    for block, flags in (("engine", engine_flags), ("server", server_flags)):
        given = {k: v for k, v in flags.items() if v is not None}
        if given:
            current = data.get(block)
            base = current if isinstance(current, dict) else {}
            data[block] = {**base, **given}
    return data


def _serve_until_stopped(cmd: list[str]) -> int:
    """Run the server until it exits; Ctrl-C and SIGTERM of this process stop it gracefully.

    It runs in its own session, so each stop reaches it once (forwarded from here): a second
    signal would make uvicorn skip the graceful period. It still dies with a SIGKILLed CLI.
    """
    import subprocess

    from flows.supervisor import die_with_parent

    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=die_with_parent)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # stop the server the same way; it flushes, then exits
            proc.send_signal(signal.SIGINT)
