"""What a long command shows on the terminal while a flow works: one dim-timed line per step and
one progress bar, fed by the `spikelens.progress` logger the flows and tasks write to.

The console is stderr: stdout is kept for the one result line scripts read (a report's path).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)
PROGRESS_LOGGER = "spikelens.progress"
TICK_S = 0.5  # how often a timed step's bar moves with the clock
_R = TypeVar("_R")


class ProgressHandler(logging.Handler):
    """Prints each `spikelens.progress` message as a step line and drives one progress bar: a
    message logged with `extra={"duration_s": N}` (the load phase) fills the bar over N seconds;
    any other message shows as a pulsing bar until the next one."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.INFO)
        self.progress, self.t0 = progress, time.monotonic()
        self.task = progress.add_task("starting", total=None)
        self.timed: tuple[float, float] | None = None  # (start, duration) of a timed step
        self._lock = threading.Lock()  # the ticker thread must not update a removed bar

    def emit(self, record: logging.LogRecord) -> None:
        try:  # the display never fails the flow that logs to it
            self._show(record)
        except Exception:
            self.handleError(record)

    def _show(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        self.progress.console.print(
            f"[dim]{time.monotonic() - self.t0:6.1f}s[/dim] {msg}", highlight=False
        )
        duration = getattr(record, "duration_s", None)
        with self._lock:  # a new bar per step: rich cannot set a total back to None (pulsing)
            old = self.task
            self.task = self.progress.add_task(msg, total=float(duration) if duration else None)
            self.timed = (time.monotonic(), float(duration)) if duration else None
            with contextlib.suppress(KeyError):  # gone if an interrupt cut the last switch short
                self.progress.remove_task(old)

    def tick(self) -> None:
        """Advance a timed step's bar with the clock (called from the refresh loop)."""
        with self._lock:
            if self.timed:
                start, duration = self.timed
                self.progress.update(self.task, completed=min(time.monotonic() - start, duration))


def _tick_until(stop: threading.Event, handler: ProgressHandler) -> None:
    while not stop.wait(TICK_S):
        handler.tick()


def with_progress(title: str, fn: Callable[..., _R], *args, **kwargs) -> _R:
    """Print `title`, then run `fn(*args, **kwargs)` under a spinner and bar fed by the progress
    logger (transient: the bar disappears, the step lines stay). Returns what `fn` returns."""
    logger = logging.getLogger(PROGRESS_LOGGER)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    columns = (
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("/"),
        TimeRemainingColumn(),
    )
    console.print(f"[bold]{title}[/bold]")
    with Progress(*columns, console=console, transient=True) as progress:
        handler = ProgressHandler(progress)
        logger.addHandler(handler)
        stop = threading.Event()
        ticker = threading.Thread(target=_tick_until, args=(stop, handler), daemon=True)
        ticker.start()
        try:
            return fn(*args, **kwargs)
        finally:
            stop.set()
            logger.removeHandler(handler)
