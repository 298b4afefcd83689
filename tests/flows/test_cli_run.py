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
