"""ServerConfig: presets, overrides, and errors that name the bad key or field."""

import pytest

from engine.server.config import SERVER_PRESETS, ServerConfig


def test_defaults_presets_and_overrides():
    assert ServerConfig.from_dict(None) == SERVER_PRESETS["default"]
    assert ServerConfig.from_dict({"preset": "unbounded"}).max_waiting is None
    cfg = ServerConfig.from_dict({"preset": "unbounded", "max_waiting": 3, "retry_after_s": 2})
    assert (cfg.max_waiting, cfg.retry_after_s) == (3, 2)


@pytest.mark.parametrize(
    "data,needle",
    [
        ({"max_wating": 3}, "'max_wating'"),
        ({"preset": "huge"}, "server.preset"),
        ({"max_waiting": -1}, "server.max_waiting"),
        ({"max_body_bytes": 10}, "server.max_body_bytes"),
        ({"graceful_shutdown_s": -1}, "server.graceful_shutdown_s"),
        ({"model_name": ""}, "server.model_name"),
    ],
)
def test_bad_values_name_the_key(data, needle):
    with pytest.raises(ValueError, match=needle.replace(".", r"\.")):
        ServerConfig.from_dict(data)


def test_gc_freeze_must_be_a_boolean():
    assert ServerConfig.from_dict({"gc_freeze": True}).gc_freeze is True
    with pytest.raises(ValueError, match=r"server\.gc_freeze"):
        ServerConfig.from_dict({"gc_freeze": "yes"})
