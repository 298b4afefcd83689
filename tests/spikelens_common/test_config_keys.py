"""spikelens_common.config_keys.strict_keys: one check for unknown keys; the error carries its field."""

import pytest

from spikelens_common.config_keys import ALL_UNKNOWN, UnknownKeyError, strict_keys


class MyError(ValueError):
    pass


def test_known_keys_pass():
    strict_keys({"a": 1, "b": 2}, ("a", "b", "c"), "block")


def test_the_first_unknown_key_is_named_and_carried():
    with pytest.raises(
        UnknownKeyError,
        match=r"^load\.stages\[0\]: unknown key 'user' \(valid keys: at_s, users\)$",
    ) as e:
        strict_keys({"at_s": 1, "user": 2, "zz": 3}, ("users", "at_s"), "load.stages[0]")
    assert e.value.field == "load.stages[0].user" and e.value.unknown == ("user", "zz")


def test_the_caller_keeps_its_error_class_and_wording():
    with pytest.raises(
        MyError, match=r"^engine: unknown key\(s\) 'a', 'z'; valid keys: preset, tp$"
    ) as e:
        strict_keys(
            {"z": 1, "tp": 1, "a": 2},
            ("tp",),
            "engine",
            message=ALL_UNKNOWN,
            error=MyError,
            sort_unknown=True,
            valid=["preset", "tp"],
        )
    assert e.value.field == "engine.a"


def test_top_level_keys_have_no_prefix():
    with pytest.raises(UnknownKeyError) as e:
        strict_keys({"nmae": "x"}, ("name",), "", message="unknown key; valid keys: {valid}")
    assert e.value.field == "nmae" and str(e.value) == "unknown key; valid keys: name"
