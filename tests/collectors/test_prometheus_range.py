"""collectors.prometheus_range: the window's checks, time parsing and the matrix → rows mapping.
The pull from a real Prometheus server is in tests/e2e/test_agent_e2e.py and test_observed_incident.py."""

import json
import socket

import pytest

from collectors.prometheus_range import (
    MAX_POINTS,
    MIN_POINTS,
    PrometheusError,
    RangeRequest,
    check_range,
    matrix_rows,
    parse_time,
    validate_window,
)


def test_times_are_rfc3339_with_a_zone_or_unix_seconds():
    assert parse_time("1764741600", "--from") == 1764741600.0
    assert parse_time("1764741600.5", "--from") == 1764741600.5
    assert parse_time("2025-12-03T06:00:00Z", "--from") == 1764741600.0
    assert parse_time("2025-12-03T08:00:00+02:00", "--to") == 1764741600.0
    with pytest.raises(PrometheusError, match="--to: '2025-12-03T06:00:00' has no time zone"):
        parse_time("2025-12-03T06:00:00", "--to")
    with pytest.raises(PrometheusError, match="--from: 'yesterday' is neither RFC 3339"):
        parse_time("yesterday", "--from")


def _req(**kw):
    base = {"url": "http://127.0.0.1:9090", "start_s": 1000.0, "end_s": 1600.0, "step_s": 15.0}
    return RangeRequest(**{**base, **kw})


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"end_s": 1000.0}, "--to must be after --from"),
        ({"step_s": 0.0}, "--step must be > 0 seconds"),
        ({"step_s": 60.0}, f"too coarse .* 11 points, at least {MIN_POINTS} needed"),
        ({"step_s": 0.01}, f"too fine .* at most {MAX_POINTS}"),
        ({"url": "localhost:9090"}, "--prometheus: 'localhost:9090' is not an http"),
        ({"match": "  "}, "--match: an empty selector"),
    ],
)
def test_a_bad_window_is_refused_before_any_request(kw, message):
    with pytest.raises(PrometheusError, match=message):
        validate_window(_req(**kw))


def test_a_good_window_passes_and_counts_its_points():
    req = _req()
    validate_window(req)
    assert req.points == 41


def test_an_unreachable_server_is_one_line_naming_the_flag():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(
        PrometheusError, match=r"cannot reach Prometheus at http://127\.0\.0\.1:\d+ .*--prometheus"
    ):
        check_range(_req(url=f"http://127.0.0.1:{port}", timeout_s=2.0))


def test_matrix_rows_keep_name_and_labels_apart_and_parse_special_values():
    result = [
        {
            "metric": {
                "__name__": "vllm:e2e_request_latency_seconds_bucket",
                "le": "+Inf",
                "job": "v",
            },
            "values": [[1000, "3"], [1015.5, "NaN"]],
        },
        {"metric": {"job": "v"}, "values": [[1000, "1"]]},  # an expression's result: no name
    ]
    cols = matrix_rows(result)
    assert cols["ts_ns"] == [1_000_000_000_000, 1_015_500_000_000]
    assert cols["name"] == ["vllm:e2e_request_latency_seconds_bucket"] * 2
    assert json.loads(cols["labels"][0]) == {"job": "v", "le": "+Inf"}
    assert cols["value"][0] == 3.0 and cols["value"][1] != cols["value"][1]  # NaN
