"""`spikelens agent` (flows/agent_command.py): the GC hook's environment for an engine started by
hand, and refusals in one `error:` line with exit code 2 before anything is served."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from collectors.gc_hook import DIR_ENV, ROLE_ENV, SITE_DIR
from engine.server.launch import free_port
from flows.cli import app
from tests.support.terminal import terminal_like


def run(*args: str):
    return CliRunner().invoke(app, ["agent", *args])


def test_print_env_gives_the_lines_that_put_the_gc_hook_in_an_engine(tmp_path):
    gc_dir = tmp_path / "gc"
    result = run("--print-env", "--gc-dir", str(gc_dir))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"export PYTHONPATH={SITE_DIR}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export {DIR_ENV}={gc_dir}",
        f"export {ROLE_ENV}=engine",
    ]
    assert gc_dir.is_dir()  # the hook writes only into a folder that exists
    # as the README shows it: eval'd in the engine's shell, the hook runs in the engine
    spikelens = Path(sys.executable).parent / "spikelens"
    script = (
        f'eval "$({spikelens} agent --print-env --gc-dir {gc_dir})"'
        f" && {sys.executable} -c 'import gc; gc.collect()'"
    )
    done = subprocess.run(["bash", "-c", script], env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0
    assert [p.name.startswith("gc-") for p in gc_dir.iterdir()] == [True]


def test_a_pid_that_does_not_exist_is_one_error_line_and_exit_2():
    result = run("--pid", "999999999", "--port", str(free_port()))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == ["error: no process with pid 999999999"], result.output


def test_bad_flags_are_named_as_typed():
    for args, line in (
        ([], "error: --pid/--match must be given, exactly one of them"),
        (["--pid", "1", "--interval", "0"], "error: --interval must be in [0.05, 60.0] s, got 0.0"),
        (["--pid", "1", "--port", "0"], "error: --port must be in [1, 65535], got 0"),
        (["--pid", "1", "--stacks-hz", "-1"], "error: --stacks-hz must be in [0, 1000] Hz, got -1"),
    ):
        result = run(*args)
        assert (result.exit_code, result.output.strip()) == (2, line)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_until_sigterm_or_ctrl_c_then_exits_0(tmp_path, stop):
    """The real console command beside this test's process: one line saying where it serves
    and what is up, /metrics answered, SIGTERM or Ctrl-C stops it with exit 0."""
    port = free_port()
    cmd = [sys.executable, "-m", "flows.cli", "agent", "--pid", str(os.getpid())]
    cmd += ["--port", str(port), "--gc-dir", str(tmp_path), "--stacks-hz", "0"]
    # as a terminal starts it: a background job's SIG_IGN for SIGINT would be inherited
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, preexec_fn=terminal_like)
    try:
        line = proc.stderr.readline()
        assert line.startswith(
            f"serving http://127.0.0.1:{port}/metrics for root pid {os.getpid()}"
        )
        assert "proc up; gc up; stacks down (off)" in line
        body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert f'spikelens_agent_process_threads{{pid="{os.getpid()}"' in body
    finally:
        time.sleep(0.1)
        proc.send_signal(stop)
        assert proc.wait(20) == 0
    assert proc.stderr.read().strip() == "agent stopped"
