"""The one way long commands run their flow (flows/cli_run.py): the result comes back; Ctrl-C
and SIGTERM exit 130 with one line; an expected error exits 2 with its message; a bug keeps its
traceback. In-process (the supervised-child flag set), no Prefect server."""

import io
import os
import signal

import pytest
import typer
from rich.console import Console

from flows import cli_run, progress
from flows.cli_run import (
    INTERRUPTED,
    INTERRUPTED_MESSAGE,
    USAGE_ERROR,
    FailureLine,
    failure_line,
    run_flow,
)
from flows.supervisor import _ENV_FLAG


@pytest.fixture
def screen(monkeypatch):
    """What the command prints on stderr, as text; run here, not in a supervised child."""
    out = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=out, width=200, color_system=None))
    monkeypatch.setattr(cli_run, "console", progress.console)
    monkeypatch.setenv(_ENV_FLAG, "1")
    previous = signal.getsignal(signal.SIGTERM)
    yield out
    signal.signal(signal.SIGTERM, previous)


def test_the_flow_result_comes_back_under_its_title(screen):
    assert run_flow("adding", lambda a, b: a + b, 2, b=3) == 5
    assert screen.getvalue().splitlines()[0] == "adding"


def _interrupted():
    raise KeyboardInterrupt


def _terminated():
    os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` or the supervisor forwards it
    signal.pause()  # the handler raises before this returns


@pytest.mark.parametrize("flow", [_interrupted, _terminated], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_flow_exits_130_with_one_line(screen, flow):
    with pytest.raises(typer.Exit) as e:
        run_flow("long", flow)
    assert e.value.exit_code == INTERRUPTED == 130
    assert screen.getvalue().splitlines()[-1] == f"error: {INTERRUPTED_MESSAGE}"


def test_prefects_external_signal_counts_as_an_interrupt(screen):
    from prefect.exceptions import TerminationSignal

    def flow():
        raise TerminationSignal(signal.SIGTERM)

    with pytest.raises(typer.Exit) as e:
        run_flow("long", flow)
    assert e.value.exit_code == 130


def test_an_expected_error_exits_2_with_its_message_and_others_propagate(screen):
    def missing():
        raise FileNotFoundError("no run abc in runs/")

    with pytest.raises(typer.Exit) as e:
        run_flow("replaying abc", missing, expected=(FileNotFoundError,))
    assert e.value.exit_code == USAGE_ERROR == 2
    assert screen.getvalue().splitlines()[-1] == "error: no run abc in runs/"
    with pytest.raises(FileNotFoundError):  # not expected by this command: a traceback
        run_flow("replaying abc", missing)


def test_failure_line_is_the_one_place_a_failure_becomes_a_line():
    assert failure_line(KeyboardInterrupt(), ()) == FailureLine(INTERRUPTED_MESSAGE, 130)
    assert failure_line(ValueError("bad"), (ValueError,)) == FailureLine("bad", 2)
    assert failure_line(ValueError("bad"), (KeyError,)) is None


def test_unsupervised_the_command_reruns_in_a_child_and_exits_with_its_code(monkeypatch):
    """The parent runs nothing itself: it exits with the supervised child's code."""
    monkeypatch.delenv(_ENV_FLAG, raising=False)
    calls = []
    monkeypatch.setattr("flows.supervisor.run_supervised", lambda argv: calls.append(argv) or 3)
    with pytest.raises(typer.Exit) as e:
        run_flow("long", lambda: pytest.fail("ran in the parent"))
    assert e.value.exit_code == 3 and len(calls) == 1


def test_a_server_that_did_not_start_exits_2_with_its_one_line_however_wrapped(screen):
    from spikelens_common.startup_failure import StartupFailure

    cause = StartupFailure("vLLM", "ValueError: no memory", "/runs/r/vllm.log", "set engine.x")

    def flow():
        try:
            raise cause
        except StartupFailure as e:
            raise RuntimeError("task failed") from e

    assert failure_line(cause, ()) == FailureLine(str(cause), USAGE_ERROR)
    with pytest.raises(typer.Exit) as e:
        run_flow("running s.yaml", flow)
    assert e.value.exit_code == USAGE_ERROR
    assert screen.getvalue().splitlines()[-1] == (
        "error: vLLM did not start: ValueError: no memory (log: /runs/r/vllm.log); "
        "fix: set engine.x"
    )


def test_prefects_own_report_of_a_startup_failure_stays_off_the_terminal():
    """Prefect logs a failed task's and flow's traceback and a 'Finished in state Failed(...)'
    line; while a command runs, the terminal's handlers drop those about a startup failure and
    keep everything else."""
    import logging

    from spikelens_common.startup_failure import StartupFailure

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("prefect.task_runs")
    logger.addHandler(handler)
    failure = StartupFailure("vLLM", "ValueError: no memory")
    try:
        with cli_run.quiet_startup_failures():
            try:
                raise failure
            except StartupFailure:
                logger.exception("Task run failed with exception")
            logger.error(
                "Finished in state Failed('Task run encountered an exception %s')", failure
            )
            logger.error("Finished in state Failed('other')")
        logger.exception("after the command", exc_info=failure)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Finished in state Failed('other')"
    assert lines[1] == "after the command" and "Traceback" in out.getvalue()
