"""SamplingParams validation: every field's range, and errors that name the field."""

import pytest

from engine.sampling_params import SamplingParams, SamplingParamsError


def test_defaults_are_valid_and_not_greedy():
    params = SamplingParams()
    assert not params.is_greedy and not params.needs_penalties and not params.top_k_enabled


@pytest.mark.parametrize(
    "field, value",
    [
        ("temperature", -1),
        ("temperature", 2.01),
        ("temperature", float("nan")),
        ("top_p", 0),
        ("top_p", 1.5),
        ("top_k", -2),
        ("top_k", 2.5),
        ("min_p", -0.1),
        ("min_p", 1.1),
        ("frequency_penalty", 3),
        ("frequency_penalty", -2.5),
        ("presence_penalty", 2.1),
        ("repetition_penalty", 0),
        ("repetition_penalty", 2.5),
        ("max_tokens", 0),
        ("max_tokens", True),
        ("seed", "7"),
        ("stop_token_ids", [1, -3]),
        ("stop_token_ids", "abc"),
        ("ignore_eos", 1),
    ],
)
def test_out_of_range_names_field_and_range(field, value):
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams(**{field: value})
    assert info.value.field == field
    assert field in str(info.value)
    assert isinstance(info.value, ValueError)


def test_range_is_in_the_message():
    with pytest.raises(SamplingParamsError, match=r"frequency_penalty must be in \[-2, 2\], got 3"):
        SamplingParams(frequency_penalty=3)
    with pytest.raises(SamplingParamsError, match=r"top_p must be in \(0, 1\]"):
        SamplingParams(top_p=0)


@pytest.mark.parametrize(
    "values",
    [
        dict(temperature=0),
        dict(temperature=2),
        dict(top_p=1),
        dict(top_k=0),
        dict(top_k=-1),
        dict(top_k=1),
        dict(min_p=0),
        dict(min_p=1),
        dict(frequency_penalty=-2),
        dict(presence_penalty=2),
        dict(repetition_penalty=2),
        dict(max_tokens=1),
        dict(seed=-5),
        dict(stop_token_ids=[0, 2]),
    ],
)
def test_boundaries_are_accepted(values):
    SamplingParams(**values)


def test_greedy_threshold_and_stop_ids_normalised():
    assert SamplingParams(temperature=9e-6).is_greedy
    assert not SamplingParams(temperature=1e-5).is_greedy
    assert SamplingParams(stop_token_ids=[3, 4]).stop_token_ids == (3, 4)


def test_from_dict_rejects_unknown_key_by_name():
    assert SamplingParams.from_dict({"temperature": 0.5}).temperature == 0.5
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams.from_dict({"temprature": 0.5})
    assert info.value.field == "temprature" and "temprature" in str(info.value)
