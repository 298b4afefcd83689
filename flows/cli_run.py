"""How every long CLI command runs its flow: supervised (no orphans), under progress, with Ctrl-C
and SIGTERM stopping it cleanly, and any failure it expects said in one line with an exit code.

Commands check their arguments first (exit 2 before Prefect starts), then call `run_flow`, then
print the result. `failure_line` is the one place where a failed run becomes what the user reads
and the exit code the shell sees.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn, TypeVar

import typer

from flows.progress import console, with_progress
from spikelens_common.startup_failure import DID_NOT_START, startup_failure_in

USAGE_ERROR = 2  # a bad argument, file or run id: nothing ran, or what ran could not start
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
INTERRUPTED_MESSAGE = "interrupted; the engine and Locust were stopped"
_R = TypeVar("_R")


@dataclass(frozen=True)
class FailureLine:
    """What the user reads when a run fails, and the exit code the shell gets."""

    message: str
    code: int


def fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    """Print `error: message` (one line on stderr, however narrow the terminal: scripts grep
    for it) and exit with `code`."""
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def failure_line(error: BaseException, expected: tuple[type[Exception], ...]) -> FailureLine | None:
    """The one line and exit code of a failed run; None: not a failure users should see as a
    line (a bug), so its traceback shows.

    Ctrl-C and SIGTERM (which arrives as KeyboardInterrupt, see `run_flow`) exit 130; a server
    that did not start (a StartupFailure, however wrapped) exits 2 with its root cause line, log
    path and fix; an error the command expects (`expected`, e.g. an unknown run id) exits 2 with
    its own message."""
    if isinstance(error, KeyboardInterrupt):
        return FailureLine(INTERRUPTED_MESSAGE, INTERRUPTED)
    startup = startup_failure_in(error)
    if startup is not None:
        return FailureLine(str(startup), USAGE_ERROR)
    if isinstance(error, expected):
        return FailureLine(str(error), USAGE_ERROR)
    return None


def supervise(argv: list[str] | None = None) -> None:
    """Re-run this command in a supervised child (see flows/supervisor.py): no orphans, ever.
    In the parent this exits with the child's code; in the child (or where the kernel cannot
    supervise) it returns and the command runs here."""
    from flows.supervisor import run_supervised, supervised

    if not supervised():
        code = run_supervised(sys.argv[1:] if argv is None else argv)
        if code != -1:
            raise typer.Exit(code)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_flow(
    title: str,
    fn: Callable[..., _R],
    *args,
    expected: tuple[type[Exception], ...] = (),
    **kwargs,
) -> _R:
    """Run the flow `fn(*args, **kwargs)` as every long command does and return its result.

    Supervised first; then under progress, titled `title`, with SIGTERM behaving like Ctrl-C
    (the flow stops its engine and Locust and keeps what was collected). A failure
    `failure_line` knows is printed as one line and exits with its code; any other propagates.
    """
    supervise()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with quiet_startup_failures():
            return _run_interruptible(title, fn, *args, **kwargs)
    except (Exception, KeyboardInterrupt) as e:
        line = failure_line(e, expected)
        if line is None:
            raise
        fail(line.message, line.code)


class _NoStartupFailureStacks(logging.Filter):
    """Drops Prefect's records about a server that did not start (its tracebacks of the task
    and the flow, its 'Finished in state Failed(... did not start: ...)' lines): the CLI says
    that failure in one line (`failure_line`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("prefect"):
            return True
        if record.exc_info and startup_failure_in(record.exc_info[1]) is not None:
            return False
        return DID_NOT_START not in record.getMessage()


@contextlib.contextmanager
def quiet_startup_failures() -> Iterator[None]:
    """While the block runs, the terminal's log handlers (the root logger's and Prefect's,
    set up when prefect is imported) show no startup failure; Prefect's API handler keeps
    them for its UI."""
    from prefect.logging.handlers import APILogHandler

    quiet = _NoStartupFailureStacks()
    loggers = [logging.getLogger()] + [
        logging.getLogger(name)
        for name in list(logging.root.manager.loggerDict)
        if name.startswith("prefect")
    ]
    handlers = {h for lg in loggers for h in lg.handlers if not isinstance(h, APILogHandler)}
    for h in handlers:
        h.addFilter(quiet)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(quiet)


def _run_interruptible(title: str, fn: Callable[..., _R], *args, **kwargs) -> _R:
    """`fn` under progress; Prefect's ExternalSignal (SIGTERM inside a flow) as Ctrl-C."""
    from prefect.exceptions import ExternalSignal

    try:
        return with_progress(title, fn, *args, **kwargs)
    except ExternalSignal as e:
        raise KeyboardInterrupt(type(e).__name__) from e
