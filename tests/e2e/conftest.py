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
