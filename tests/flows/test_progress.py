"""The progress display (flows/progress.py): each progress message is a timed step line, a step
with a duration fills the bar with the clock, and the handler leaves with the flow."""

import io
import logging
import time

from rich.console import Console
from rich.progress import Progress

from flows import progress
from flows.progress import PROGRESS_LOGGER, ProgressHandler, with_progress


def _console(out: io.StringIO) -> Console:
    return Console(file=out, width=200, color_system=None)


def test_steps_print_as_lines_under_the_title_and_the_handler_leaves(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress, "console", _console(out))
    log = logging.getLogger(PROGRESS_LOGGER)

    def flow():
        log.info("starting engine (%s)", "tiny")
        log.info("ingesting %s", "run-1")
        return "done"

    assert with_progress("running demo", flow) == "done"
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    assert lines[0] == "running demo"
    assert [ln.split("s ", 1)[1] for ln in lines[1:]] == [
        "starting engine (tiny)",
        "ingesting run-1",
    ]
    assert not [h for h in log.handlers if isinstance(h, ProgressHandler)]


def _bar(progress_bar: Progress, handler: ProgressHandler):
    return next(t for t in progress_bar.tasks if t.id == handler.task)


def test_a_timed_step_fills_the_bar_with_the_clock():
    with Progress(console=_console(io.StringIO())) as bar:
        handler = ProgressHandler(bar)
        record = logging.LogRecord(PROGRESS_LOGGER, logging.INFO, "", 0, "load", None, None)
        record.duration_s = 0.2
        handler.emit(record)
        time.sleep(0.05)
        handler.tick()
        task = _bar(bar, handler)
        assert task.total == 0.2 and 0.04 <= task.completed < 0.2
        time.sleep(0.2)
        handler.tick()
        assert _bar(bar, handler).completed == 0.2  # never past the step's length
        handler.emit(logging.LogRecord(PROGRESS_LOGGER, logging.INFO, "", 0, "next", None, None))
        assert len(bar.tasks) == 1 and _bar(bar, handler).total is None and handler.timed is None
