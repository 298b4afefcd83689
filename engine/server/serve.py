"""The engine server process: CONFIG.json → ``LLMEngine`` → uvicorn, with a clean SIGTERM path.

``python -m engine serve --config CONFIG.json --run-dir DIR --host 127.0.0.1 --port N``.

Shutdown: SIGTERM or SIGINT makes uvicorn stop accepting, give open streams
``ServerConfig.graceful_shutdown_s`` to finish (then they are ended in-band and aborted), then run
the app's lifespan exit (which stops the engine thread). Only then are the telemetry files flushed, from this thread, so nothing steps while
they are written. The process exits 0.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from engine.config import EngineConfig
from engine.server.app import create_app
from engine.server.config import ServerConfig
from engine.server.wire_clock import WireH11Protocol
from spikelens_common.config_keys import ALL_UNKNOWN, strict_keys
from spikelens_common.socket_clock import keep_stamping_on

log = logging.getLogger("engine.server")

RUN_CONFIG_KEYS = ("run_id", "engine", "faults", "server")


@dataclass
class EngineRunConfig:
    """CONFIG.json as handed over by flows (docs/INTERFACES.md)."""

    run_id: str | None  # names the run in logs; the files themselves live in --run-dir
    engine: EngineConfig
    faults: list[dict[str, Any]] = field(
        default_factory=list
    )  # the whole scenario list; engine skips others' kinds
    server: ServerConfig = field(default_factory=ServerConfig)

    @classmethod
    def load(cls, path: str | Path) -> EngineRunConfig:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise ValueError(
                f"{path}: must hold a JSON object with keys {', '.join(RUN_CONFIG_KEYS)}"
            )
        strict_keys(
            data,
            RUN_CONFIG_KEYS,
            str(path),
            message=ALL_UNKNOWN,
            error=ValueError,
            sort_unknown=True,
            valid=RUN_CONFIG_KEYS,
        )
        faults = data.get("faults") or []
        if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
            raise ValueError(f"{path}: faults must be a list of objects")
        return cls(
            run_id=data.get("run_id"),
            engine=EngineConfig.from_dict(data.get("engine")),
            faults=faults,
            server=ServerConfig.from_dict(data.get("server")),
        )


class _EngineServer(uvicorn.Server):
    """uvicorn, plus a clean end for streams still open when the graceful period runs out.

    uvicorn would cancel their tasks (a traceback per stream, a truncated chunked body); instead,
    at ``grace_s`` every open request is ended in-band (an error event, then ``data: [DONE]``) and
    aborted in the engine, so the responses complete. uvicorn's own cancel stays as a backstop.
    """

    def __init__(self, config: uvicorn.Config, app, grace_s: float):
        super().__init__(config)
        self._app = app
        self._grace_s = grace_s

    async def shutdown(self, sockets=None) -> None:
        timer = asyncio.get_running_loop().call_later(
            self._grace_s, self._app.state.async_engine.abort_all, "the server is shutting down"
        )
        try:
            await super().shutdown(sockets)
        finally:
            timer.cancel()


def build_engine(run_config: EngineRunConfig, run_dir: Path | None):
    """The ``LLMEngine`` for this run (model loaded, fault schedule handed over, not yet armed)."""
    from engine.llm_engine import LLMEngine

    return LLMEngine(run_config.engine, run_dir=run_dir, faults=run_config.faults)


def serve(
    config_path: str | Path, run_dir: str | Path, host: str = "127.0.0.1", port: int = 8000
) -> int:
    """Run the server until SIGTERM/SIGINT; flush telemetry; return the exit code."""
    run_config = EngineRunConfig.load(config_path)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    engine = build_engine(run_config, run_dir)
    app = create_app(engine, run_config.server)
    if run_config.server.gc_freeze:
        # Everything loaded so far lives until exit: out of the collector's reach, a full GC walks
        # only serving-time objects (what vLLM does after startup).
        gc.collect()
        gc.freeze()
    grace_s = run_config.server.graceful_shutdown_s
    server = _EngineServer(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            http=WireH11Protocol,  # stamps when each request's bytes were read (server_requests.parquet)
            # uvicorn annotates int, but only hands it to asyncio.wait_for: a float is exact
            timeout_graceful_shutdown=grace_s + 5.0,  # type: ignore[arg-type]
        ),
        app,
        grace_s,
    )
    # uvicorn handles SIGTERM/SIGINT while it runs and re-raises the signal afterwards through the
    # handler that was installed before it; a no-op one lets us flush and exit 0 instead of dying.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    e = run_config.engine
    log.warning(
        "engine %s serving %s on http://%s:%d (max_model_len=%d, max_num_seqs=%d, kv_blocks=%dx%d, "
        "dtype %s, tp %d; run dir %s)",
        run_config.run_id or "-",
        e.model,
        host,
        port,
        e.max_model_len,
        e.max_num_seqs,
        e.kv_blocks,
        e.block_size,
        e.dtype,
        e.tp,
        run_dir,
    )
    _log_chat_template(engine.tokenizer, e.model)
    stamping = keep_stamping_on()  # the kernel stamps every request's arrival from the first on
    try:
        server.run()
    finally:
        stamping.close()
        engine.close()  # ends active faults, writes steps/gc/engine_requests/faults parquet
        app.state.wire_log.write(run_dir)  # server_requests.parquet: the socket-side times
        log.warning("engine stopped; telemetry flushed to %s", run_dir)
    return 0 if server.started else 1


def _log_chat_template(tokenizer, model: str) -> None:
    """Say at start-up which chat template chat requests render with, or that they get 400."""
    origin = tokenizer.chat_template_origin
    if origin is None:
        log.warning(
            "no chat template: chat requests will be answered 400 (add chat_template.jinja to %s, "
            "or start with --chat-template FILE|TEMPLATE)",
            model,
        )
    else:
        log.warning("chat template: %s", origin)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m engine", description="spikelens decoding engine"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="serve the OpenAI-compatible HTTP API")
    p.add_argument("--config", required=True, help="CONFIG.json: {run_id, engine, faults, server}")
    p.add_argument(
        "--run-dir", required=True, help="directory for steps/gc/faults/engine_requests parquet"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return serve(args.config, args.run_dir, args.host, args.port)
    except ValueError as e:  # bad CONFIG.json: say which key, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
