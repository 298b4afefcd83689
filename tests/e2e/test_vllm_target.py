"""spikelens drives a vLLM it did not start, through `target:`: a vLLM-CPU server started here by
hand under another model name, driven over chat and over completions, each run to a rendered
report. Real vLLM, Prefect, Locust and DuckDB; one vLLM start serves every test of the module.

Opt-in (make test-slow), over CI's 45 minutes: in CI, test_agent_e2e.py drives its own
hand-started vLLM over chat through `target:` (no vLLM start of its own)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engine.server.launch import free_port
from tests.support.slow_e2e import slow_e2e
from tests.support.spikelens_cli import run_cli
from tests.support.target_run import run_against_target
from tests.support.vllm_setup import (
    STARTUP_TIMEOUT_S,
    tiny_vllm_command,
)

pytestmark = [pytest.mark.e2e, slow_e2e]

SERVED_NAME = "tiny-served"  # not the folder's name: loadgen must ask /v1/models


@pytest.fixture(scope="module")
def vllm_server(tiny_llama, tmp_path_factory):
    ckpt = tiny_llama  # skips before anything is built where vLLM was not set up
    port = free_port()
    log = open(tmp_path_factory.mktemp("vllm") / "vllm.log", "wb")
    started = time.monotonic()
    proc = subprocess.Popen(
        tiny_vllm_command(ckpt, port, SERVED_NAME),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            assert proc.poll() is None, Path(log.name).read_text()[-4000:]
            assert time.monotonic() - started < STARTUP_TIMEOUT_S, "vLLM not healthy in time"
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        print(f"vLLM healthy after {time.monotonic() - started:.1f} s", file=sys.stderr)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


# completions is opt-in: the flow-started vLLM runs of test_vllm_engine.py and test_vllm_faults.py
# drive it over completions already; chat is the one path only this module covers.
@pytest.mark.parametrize("endpoint", ["chat", pytest.param("completions", marks=slow_e2e)])
def test_target_run_against_vllm_renders_a_report(vllm_server, tmp_path, endpoint):
    out = run_against_target(tmp_path, vllm_server, endpoint)
    # 'invalid' = the load generator itself was starved (2 cores shared with vLLM's busy-polling
    # worker): latencies are then the client's, but every request must still have succeeded
    assert out["run"]["status"] in ("ok", "invalid") and out["run"]["errors"] == [], out["run"]
    assert (
        out["run"]["extra"]["model"] == SERVED_NAME and out["run"]["extra"]["endpoint"] == endpoint
    )
    assert out["ok"] >= 5 and out["failed"] == 0, out
    html = out["report"].read_text()
    assert vllm_server in html and SERVED_NAME in html and f"<code>{endpoint}</code>" in html


def test_a_run_against_a_model_the_target_does_not_serve_stops_early(vllm_server, tmp_path):
    """The old default, `model: spikelens`: every request is refused, and the load stops."""
    scenario = tmp_path / "wrong-model.yaml"
    scenario.write_text(
        f"name: wrong-model\nduration_s: 120\nwarmup_s: 0\n"
        f"target: {{url: '{vllm_server}', model: spikelens}}\n"
        f"load: {{shape: constant, users: 4}}\n"
    )
    home = tmp_path / "state"
    started = time.monotonic()
    proc = run_cli(["run", str(scenario)], home, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert time.monotonic() - started < 100  # not the 120 s of load the scenario asked for
    said = " ".join((proc.stdout + proc.stderr).split())  # the console wraps long lines
    assert "stopped early:" in said and "The model `spikelens` does not exist" in said, said
    report = Path(proc.stdout.strip().splitlines()[-1])
    run = json.loads((home / "runs" / report.parent.name / "run.json").read_text())
    assert run["status"] == "failed" and run["extra"]["stopped_early"]["error_share"] > 0.9
    assert "stopped early: " in report.read_text()
