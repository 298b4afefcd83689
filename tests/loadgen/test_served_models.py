"""loadgen.served_models: the model id comes from the server's GET /v1/models."""

import pytest

from engine.server.launch import free_port
from loadgen.served_models import ModelDiscoveryError, served_model
from tests.support.sse_server import SSEServer, SSEServerConfig


def test_first_model_id_of_v1_models():
    with SSEServer(SSEServerConfig()) as server:
        assert served_model(server.url) == "noop"
        assert served_model(server.url + "/") == "noop"


def test_an_unreachable_server_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(
        ModelDiscoveryError, match=f"GET {url}/v1/models failed.*target: {{url, model}}"
    ):
        served_model(url, timeout_s=2)
