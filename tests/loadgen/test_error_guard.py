"""loadgen.error_guard: a run that is mostly errors is stopped, with the reason in one line."""

import pytest

from loadgen.error_guard import ErrorGuard, ErrorGuardConfig, short_error

VLLM_404 = (
    'HTTP 404: {"error":{"message":"The model `spikelens` does not exist.",'
    '"type":"NotFoundError","param":"model","code":404}}'
)


def test_trips_once_when_the_error_share_passes_the_threshold_after_enough_requests():
    guard = ErrorGuard(ErrorGuardConfig(min_requests=200, max_error_share=0.9))
    verdicts = [guard.observe(i % 50 != 0, VLLM_404 if i % 50 else None) for i in range(199)]
    assert verdicts == [None] * 199  # mostly errors, but not enough requests yet
    verdict = guard.observe(True, VLLM_404)
    assert verdict["requests"] == 200 and verdict["failed"] == 196
    assert verdict["reason"] == (
        "98% of the first 200 requests failed: HTTP 404: The model `spikelens` does not exist."
    )
    assert guard.observe(True, VLLM_404) is None  # once


def test_a_healthy_run_with_some_errors_is_never_stopped():
    guard = ErrorGuard(ErrorGuardConfig(min_requests=10, max_error_share=0.9))
    assert all(guard.observe(i % 4 == 0, "HTTP 503: busy") is None for i in range(1000))


def test_error_texts_are_shortened_to_their_message():
    assert (
        short_error('HTTP 400: {"detail": "temperature: must be >= 0"}')
        == "HTTP 400: temperature: must be >= 0"
    )
    assert (
        short_error('HTTP 400: {"object": "error", "message": "no chat template"}')
        == "HTTP 400: no chat template"
    )
    assert short_error("HTTP 502: <html>bad gateway</html>") == "HTTP 502: <html>bad gateway</html>"
    assert (
        short_error("connection: ConnectionRefusedError(111)")
        == "connection: ConnectionRefusedError(111)"
    )


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"min_requests": 0}, "min_requests"),
        ({"max_error_share": 0.0}, "max_error_share"),
        ({"max_error_share": 1.5}, "max_error_share"),
    ],
)
def test_thresholds_are_validated(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        ErrorGuardConfig(**kwargs)
