"""Which model id to name in requests: the first one the server lists at GET /v1/models.

An OpenAI-compatible server refuses a request whose `model` it does not serve (vLLM: 404 "The
model `x` does not exist"), and the id is whatever the server was started with (a path, a
`--served-model-name`), so loadgen asks instead of guessing. A scenario may name it instead.
"""

from __future__ import annotations

import httpx


class ModelDiscoveryError(RuntimeError):
    """The server did not say which models it serves; the message names the URL and why."""


def served_model(base_url: str, api_key: str | None = None, timeout_s: float = 10.0) -> str:
    """The first model id of `GET {base_url}/v1/models`."""
    url = base_url.rstrip("/") + "/v1/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as e:
        raise ModelDiscoveryError(
            f"GET {url} failed ({type(e).__name__}: {e}); is the target up? "
            f"Name the model with `target: {{url, model}}` to skip this"
        ) from None
    if response.status_code != 200:
        raise ModelDiscoveryError(
            f"GET {url} answered {response.status_code}: {response.text[:300]}"
        )
    try:
        models = response.json()["data"]
        return str(models[0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelDiscoveryError(f"GET {url} listed no model id: {response.text[:300]}") from None
