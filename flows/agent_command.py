"""`spikelens agent`: the collectors beside a production engine, as a Prometheus exporter
(collectors/agent.py does the work; this parses, checks, prints and waits for Ctrl-C/SIGTERM).

Use: print the environment that puts the GC hook into the engine, start the engine with it, then
start the agent beside it and point Prometheus at http://HOST:PORT/metrics:

    spikelens agent --print-env          # paste its lines before the engine's command
    spikelens agent --match 'vllm serve' # or --pid PID

The GC hook writes into --gc-dir, by default /tmp/spikelens-agent-gc (`--print-env` creates it,
because the hook only writes into a folder that exists).
"""

from __future__ import annotations

import shlex
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from flows.cli_run import fail
from flows.progress import console

if TYPE_CHECKING:
    from collectors.agent import AgentOptions

# Where the GC hook writes when --gc-dir is not given. (The collectors package imports pyarrow:
# it is imported only when the command runs, so every other command starts as fast as before.)
DEFAULT_GC_DIR = Path("/tmp/spikelens-agent-gc")

# AgentOptions field → the flag that sets it, so an error names what the user typed
_FLAGS = {
    "pid/match": "--pid/--match",
    "pid": "--pid",
    "match": "--match",
    "port": "--port",
    "host": "--host",
    "interval_s": "--interval",
    "stacks_hz": "--stacks-hz",
}


def agent(
    pid: int | None = typer.Option(None, help="The engine's root process (or --match)."),
    match: str | None = typer.Option(
        None,
        help="Regex over each process's command line, e.g. 'vllm serve': every match that "
        "descends from no other match is followed; a restarted engine is found again.",
    ),
    port: int = typer.Option(9464, help="Port of /metrics."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (0.0.0.0: every interface)."),
    gc_dir: Path = typer.Option(
        DEFAULT_GC_DIR, "--gc-dir", help="Folder the engine's GC hook writes gc-<pid>.jsonl into."
    ),
    interval: float = typer.Option(1.0, help="Seconds between /proc readings (0.05 to 60)."),
    stacks_hz: int = typer.Option(
        10, help="py-spy samples per second and process (0: no stacks; needs ptrace rights)."
    ),
    print_env: bool = typer.Option(
        False,
        "--print-env",
        help="Print the shell lines to put before the engine's command so the GC hook runs in "
        "it (and create --gc-dir), then exit.",
    ),
) -> None:
    """Serve the engine's GC pauses, CPU, scheduling and stack regions as Prometheus /metrics.

    Start the engine with --print-env's lines before its command (for GC pauses), then this
    beside it; it runs until Ctrl-C or SIGTERM."""
    if print_env:
        print(hook_lines(gc_dir))
        return
    from collectors.agent import AgentOptionError, AgentOptions

    try:
        options = AgentOptions(
            pid=pid,
            match=match,
            port=port,
            host=host,
            gc_dir=gc_dir,
            interval_s=interval,
            stacks_hz=stacks_hz,
        )
    except AgentOptionError as e:
        fail(f"{_FLAGS.get(e.field, e.field)} {e.rule}")
    _serve(options)


def hook_lines(gc_dir: Path) -> str:
    """`export VAR=value` lines (collectors.gc_hook's variables) for the engine's shell, meant for
    `eval "$(spikelens agent --print-env)"` before the engine's command (or for a unit file's
    environment); creates gc_dir, since the hook writes only into an existing folder."""
    from collectors.agent import ROOT_ROLE
    from collectors.gc_hook import DIR_ENV, ROLE_ENV, SITE_DIR

    gc_dir = gc_dir.resolve()
    try:
        gc_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"--gc-dir {gc_dir}: {e.strerror or e}")
    return "\n".join(
        [
            # no trailing ':' when PYTHONPATH is unset: an empty entry would put the cwd on the path
            f"export PYTHONPATH={shlex.quote(str(SITE_DIR))}${{PYTHONPATH:+:$PYTHONPATH}}",
            f"export {DIR_ENV}={shlex.quote(str(gc_dir))}",
            f"export {ROLE_ENV}={ROOT_ROLE}",
        ]
    )


def _serve(options: AgentOptions) -> None:
    """Start the agent (exit 2 on a refusal), say where it serves, wait for Ctrl-C or SIGTERM,
    stop it and exit 0."""
    from rich.markup import escape

    from collectors.agent import Agent, AgentError

    def say(line: str) -> None:
        console.print(escape(line), highlight=False, soft_wrap=True)

    try:
        running = Agent(options, log=say).start()
    except AgentError as e:
        fail(str(e))
    # Ctrl-C and SIGTERM only set a flag: a KeyboardInterrupt raised wherever the main thread
    # happens to be (inside the console's lock, say) could leave a lock the agent's threads need
    # while stop() joins them. Handled explicitly, SIGINT stops the agent even where it was
    # inherited ignored (a background job of a non-interactive shell).
    stopping = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stopping.set())
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        say(running.describe())
        while not stopping.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        running.stop()
    say("agent stopped")
