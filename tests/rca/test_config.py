"""rca.config: the presets a run, `spikelens incident` and `spikelens report` choose from."""

import pytest

from rca.config import PRESETS, DetectConfig, preset


def test_a_preset_is_found_by_name_and_an_unknown_one_names_the_field_and_the_choices():
    assert preset("default") == (DetectConfig(), PRESETS["default"][1])
    assert preset("thorough")[0].detectors == ("mad", "sustained")
    with pytest.raises(ValueError) as e:
        preset("eager", "--detector")
    assert (
        str(e.value)
        == "--detector: unknown preset 'eager'; valid: default, thorough, sensitive, p99, p50, local"
    )


def test_thorough_finds_smaller_spikes_than_the_default_and_sensitive_smaller_still():
    default, thorough, sensitive = (PRESETS[n][0] for n in ("default", "thorough", "sensitive"))
    assert sensitive.mad_k < thorough.mad_k < default.mad_k
    assert sensitive.min_rel_excess < thorough.min_rel_excess < default.min_rel_excess


def test_the_default_tests_the_p50_beside_the_p99_and_p99_is_the_default_before_it():
    default, p99, p50 = (PRESETS[n][0] for n in ("default", "p99", "p50"))
    assert default.detectors == ("mad", "median") and p50 == default
    assert p99 == DetectConfig(detectors=("mad",))
