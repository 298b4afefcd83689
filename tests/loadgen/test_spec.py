"""WorkloadSpec / LoadSpec validation: unknown keys and out-of-range values name the field."""

import random

import pytest

from loadgen.errors import SpecError
from loadgen.spec import LengthDist, LoadSpec, WorkloadSpec, load_from, workload_from


def test_workload_from_scenario_block():
    spec = WorkloadSpec.from_dict(
        {
            "prompt_tokens": {"mean": 128, "std": 32, "min": 16, "max": 512},
            "output_tokens": {"mean": 64, "std": 16, "min": 8, "max": 256},
            "sampling": {"temperature": [0.7, 1.0], "frequency_penalty": [0.0, 0.5], "top_k": 40},
            "seed": 7,
        }
    )
    assert spec.prompt_tokens == LengthDist(mean=128, std=32, min=16, max=512)
    assert spec.seed == 7


@pytest.mark.parametrize(
    "block, message",
    [
        ({"prompt_tokenz": {"mean": 1}}, "unknown key 'prompt_tokenz'"),
        ({"prompt_tokens": {"mean": 10, "sd": 2}}, "workload.prompt_tokens: unknown key 'sd'"),
        (
            {"prompt_tokens": {"mean": 10, "min": 0}},
            "workload.prompt_tokens.min must be an integer in [1, ",
        ),
        (
            {"prompt_tokens": {"mean": 600, "min": 16, "max": 512}},
            "workload.prompt_tokens.mean must be a number in [16, 512]",
        ),
        (
            {"output_tokens": {"mean": 8, "min": 8, "max": 4}},
            "workload.output_tokens.max must be an integer in [8, ",
        ),
        ({"output_tokens": {"mean": 8, "std": -1}}, "workload.output_tokens.std"),
        ({"output_tokens": {"std": 1}}, "workload.output_tokens.mean is required"),
        ({"sampling": {"temprature": 1.0}}, "workload.sampling: unknown key 'temprature'"),
        (
            {"sampling": {"temperature": -1}},
            "workload.sampling.temperature must be a number in [0.0, inf)",
        ),
        (
            {"sampling": {"frequency_penalty": [0.0, 3]}},
            "workload.sampling.frequency_penalty[1] must be a number in [-2.0, 2.0]",
        ),
        ({"sampling": {"top_p": 0}}, "workload.sampling.top_p must be a number in (0.0, 1.0]"),
        ({"sampling": {"top_k": 1.5}}, "workload.sampling.top_k must be an integer"),
        (
            {"sampling": {"temperature": []}},
            "workload.sampling.temperature: the list of choices is empty",
        ),
        ({"sampling": {"temperature": True}}, "workload.sampling.temperature must be a number"),
        ({"source": "csv"}, "workload.source must be one of"),
        ({"source": "jsonl"}, "workload.path is required"),
    ],
)
def test_workload_errors_name_the_field(block, message):
    with pytest.raises(SpecError) as err:
        WorkloadSpec.from_dict(block)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "block, message",
    [
        ({"shape": "constant", "userz": 3}, "load: unknown key 'userz'"),
        ({"shape": "sawtooth"}, "load.shape must be one of"),
        ({"users": 0}, "load.users must be an integer in [1, 100000]"),
        ({"spawn_rate": 0}, "load.spawn_rate must be a number in (0, 100000]"),
        ({"shape": "open"}, "load.rate (requests/s) is required"),
        ({"shape": "poisson", "rate": -2}, "load.rate must be a number in (0, 100000]"),
        ({"shape": "step"}, "load.stages: a step shape needs at least one stage"),
        (
            {"shape": "step", "stages": [{"at_s": 5, "users": 2}, {"at_s": 5, "users": 4}]},
            "load.stages[1].at_s must be later",
        ),
        (
            {"shape": "step", "stages": [{"at_s": 5, "user": 2}]},
            "load.stages[0]: unknown key 'user'",
        ),
        ({"shape": "spike", "users": 2}, "load.spike_users is required"),
        (
            {"shape": "ramp", "users": 4, "start_users": 9},
            "load.start_users must be an integer in [0, 4]",
        ),
        ({"shape": "replay"}, "load.trace"),
        (
            {"shape": "replay", "trace": "t.jsonl", "replay_loop": "both"},
            "load.replay_loop must be one of open, closed, got 'both'",
        ),
    ],
)
def test_load_errors_name_the_field(block, message):
    with pytest.raises(SpecError) as err:
        LoadSpec.from_dict(block)
    assert message in str(err.value)


def test_a_replay_is_open_loop_unless_it_replays_its_users():
    replay = {"shape": "replay", "trace": "t.jsonl"}
    assert LoadSpec.from_dict(replay).open_loop
    assert not LoadSpec.from_dict({**replay, "replay_loop": "closed"}).open_loop
    assert LoadSpec.from_dict({"shape": "poisson", "rate": 2}).open_loop
    assert not LoadSpec.from_dict({"shape": "constant"}).open_loop


def test_length_draws_stay_in_bounds_and_follow_the_seed():
    dist = LengthDist(mean=20, std=50, min=5, max=30)
    draws = [dist.draw(random.Random(i)) for i in range(200)]
    assert min(draws) == 5 and max(draws) == 30  # std is wide: both clamps are hit
    assert [dist.draw(random.Random(3)) for _ in range(3)] == [dist.draw(random.Random(3))] * 3
    assert LengthDist(mean=12).draw(random.Random(0)) == 12


def test_a_bare_number_is_a_fixed_length():
    assert LengthDist.from_dict(32, "workload.prompt_tokens") == LengthDist(
        mean=32, std=0, min=32, max=32
    )


def test_sampling_lists_are_drawn_uniformly_and_fixed_values_kept():
    spec = WorkloadSpec.from_dict({"sampling": {"temperature": [0.2, 0.9], "top_k": 40}})
    rng = random.Random(0)
    draws = [spec.draw_sampling(rng) for _ in range(400)]
    assert {d["top_k"] for d in draws} == {40}
    share = sum(d["temperature"] == 0.2 for d in draws) / len(draws)
    assert 0.4 < share < 0.6


def test_presets_and_passthrough():
    assert workload_from("smoke").prompt_tokens.mean == 16
    assert load_from("smoke").users == 2
    assert load_from({"users": 3}).users == 3
    with pytest.raises(SpecError, match="unknown preset 'nope'"):
        load_from("nope")
