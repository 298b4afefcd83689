"""Loadgen's faults: validation, windows and the faults.loadgen.parquet rows (the flows route
only loadgen's kinds here: flows.fault_routing)."""

import json
import random

import pyarrow.parquet as pq
import pytest

from loadgen.errors import SpecError
from loadgen.prompts import PromptBuilder
from loadgen.request_plan import RequestFactory
from loadgen.spec import WorkloadSpec
from loadgen.traffic_faults import (
    HeavyTrafficParams,
    LongPromptParams,
    RepetitionParams,
    burst_edges,
    burst_factor,
    from_dicts,
    repetition_at,
    sampling_fault_at,
    traffic_faults,
    write_faults,
)

SCENARIO_FAULTS = [
    {"kind": "load.burst", "start_s": 2, "duration_s": 3, "params": {"factor": 4}},
    {"kind": "penalty.repetition", "start_s": 6, "duration_s": 2},
]


def test_defaults_are_filled_and_faults_survive_the_locust_config():
    faults = traffic_faults(SCENARIO_FAULTS)
    assert [f.kind for f in faults] == ["load.burst", "penalty.repetition"]
    assert faults[1].params == RepetitionParams()
    assert from_dicts([f.to_dict() for f in faults]) == faults


def test_a_kind_loadgen_does_not_apply_is_an_error_naming_it():
    engine_fault = {"kind": "memory.gc_storm", "start_s": 1, "duration_s": 2}
    with pytest.raises(
        SpecError, match=r"faults\[1\]\.kind: loadgen does not apply 'memory.gc_storm'"
    ):
        traffic_faults([SCENARIO_FAULTS[0], engine_fault])


@pytest.mark.parametrize(
    "fault, message",
    [
        (
            {"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {"factr": 2}},
            "faults[0].params: unknown key 'factr'",
        ),
        (
            {"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {"factor": 0}},
            "faults[0].params.factor must be a number in (0, 1000]",
        ),
        ({"kind": "load.burst", "start_s": -1, "duration_s": 1}, "faults[0].start_s"),
        (
            {
                "kind": "penalty.repetition",
                "start_s": 0,
                "duration_s": 1,
                "params": {"temperature": -0.5},
            },
            "faults[0].params.temperature",
        ),
        (
            {
                "kind": "penalty.repetition",
                "start_s": 0,
                "duration_s": 1,
                "params": {"max_tokens": 0},
            },
            "faults[0].params.max_tokens",
        ),
    ],
)
def test_bad_params_name_the_field(fault, message):
    with pytest.raises(SpecError) as err:
        traffic_faults([fault])
    assert message in str(err.value)


def test_windows():
    faults = traffic_faults(SCENARIO_FAULTS)
    assert [burst_factor(faults, t) for t in (1.9, 2, 4.9, 5)] == [1.0, 4.0, 4.0, 1.0]
    assert burst_edges(faults) == [2.0, 5.0]
    assert repetition_at(faults, 5.9) is None and repetition_at(faults, 6) == RepetitionParams()


def test_repetition_overrides_sampling_and_asks_for_the_longest_output_without_shifting_draws():
    workload = WorkloadSpec.from_dict(
        {
            "output_tokens": {"mean": 10, "min": 5, "max": 40},
            "sampling": {"temperature": [0.7, 1.0], "frequency_penalty": 0.5},
        }
    )
    factory = RequestFactory(workload, PromptBuilder(), model_name="m", seed=0, id_prefix="r")
    normal = factory.plan(random.Random(1), "a")
    looped = factory.plan(random.Random(1), "a", RepetitionParams())
    assert looped.max_tokens == 40 and looped.body["max_tokens"] == 40
    assert looped.sampling["temperature"] == 0.0 and looped.sampling["frequency_penalty"] == -2.0
    # EOS honoured for the fault's requests only: a long output then means a loop, not max_tokens.
    assert normal.body["ignore_eos"] is True and "ignore_eos" not in looped.body
    assert looped.body["messages"] == normal.body["messages"]  # same prompt: rng advanced alike
    assert factory.plan(random.Random(1), "a", RepetitionParams(max_tokens=12)).max_tokens == 12


def test_write_faults_clips_to_the_run_and_drops_windows_after_it(tmp_path):
    faults = traffic_faults(SCENARIO_FAULTS)
    path = tmp_path / "faults.loadgen.parquet"
    assert write_faults(faults, load_started_ns=10**9, duration_s=7, path=path) == 2
    rows = pq.read_table(path).to_pylist()
    assert rows[0] == {
        "kind": "load.burst",
        "cause": "load",
        "start_ns": 3 * 10**9,
        "end_ns": 6 * 10**9,
        "params": json.dumps({"factor": 4}),
    }
    assert rows[1]["kind"] == "penalty.repetition" and rows[1]["cause"] == "penalty"
    assert rows[1]["end_ns"] == 8 * 10**9  # clipped at the end of the run
    assert write_faults(faults, 0, duration_s=1.5, path=path) == 0


def test_heavy_traffic_penalises_about_its_share_of_the_window_and_nothing_outside():
    faults = traffic_faults(
        [
            {
                "kind": "penalty.heavy_traffic",
                "start_s": 2,
                "duration_s": 3,
                "params": {"share": 0.25},
            }
        ]
    )
    assert faults[0].cause == "penalty"
    ids = [f"run-u{i}-{j}" for i in range(20) for j in range(50)]
    taken = [i for i in ids if sampling_fault_at(faults, 3.0, i) is not None]
    assert 0.2 < len(taken) / len(ids) < 0.3
    assert taken == [
        i for i in ids if sampling_fault_at(faults, 4.9, i) is not None
    ]  # stable per id
    assert all(sampling_fault_at(faults, t, i) is None for t in (1.9, 5.0) for i in ids[:50])


def test_heavy_traffic_adds_penalties_and_keeps_the_drawn_request():
    workload = WorkloadSpec.from_dict(
        {"output_tokens": {"mean": 10, "min": 5, "max": 40}, "sampling": {"temperature": 0.7}}
    )
    factory = RequestFactory(workload, PromptBuilder(), model_name="m", seed=0, id_prefix="r")
    normal = factory.plan(random.Random(1), "a")
    heavy = factory.plan(random.Random(1), "a", HeavyTrafficParams())
    assert (
        heavy.max_tokens == normal.max_tokens and heavy.body["messages"] == normal.body["messages"]
    )
    assert heavy.sampling["temperature"] == 0.7
    assert (
        heavy.sampling["frequency_penalty"],
        heavy.sampling["presence_penalty"],
        heavy.sampling["repetition_penalty"],
    ) == (1.0, 0.5, 1.2)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"share": 0}, "faults[0].params.share"),
        ({"share": 1.5}, "faults[0].params.share"),
        ({"repetition_penalty": 0}, "faults[0].params.repetition_penalty"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_heavy_traffic_params_are_checked(params, message):
    with pytest.raises(SpecError) as err:
        traffic_faults(
            [{"kind": "penalty.heavy_traffic", "start_s": 0, "duration_s": 1, "params": params}]
        )
    assert message in str(err.value)


def test_kv_pressure_as_loadgen_applies_it_sends_long_prompts_in_its_window():
    faults = [{"kind": "memory.kv_pressure", "start_s": 1, "duration_s": 2, "params": {}}]
    mine = traffic_faults(faults)
    assert [(f.kind, f.cause, f.params) for f in mine] == [
        ("memory.kv_pressure", "memory", LongPromptParams())
    ]
    assert from_dicts([f.to_dict() for f in mine]) == mine
    assert sampling_fault_at(mine, 1.5, "any") == mine[0]
    assert sampling_fault_at(mine, 3.0, "any") is None


def test_kv_pressure_sends_long_prompts_and_keeps_the_drawn_output():
    workload = WorkloadSpec.from_dict(
        {"prompt_tokens": {"mean": 20, "min": 10, "max": 30}, "output_tokens": {"mean": 10}}
    )
    factory = RequestFactory(workload, PromptBuilder(), model_name="m", seed=0, id_prefix="r")
    normal = factory.plan(random.Random(1), "a")
    long = factory.plan(random.Random(1), "a", LongPromptParams(prompt_tokens=300))
    assert long.prompt_tokens_target == 300 and normal.prompt_tokens_target <= 30
    assert long.max_tokens == normal.max_tokens and long.sampling == normal.sampling
    words = len(long.body["messages"][-1]["content"].split())
    assert words > 5 * len(normal.body["messages"][-1]["content"].split())


@pytest.mark.parametrize(
    "params, message",
    [
        ({"prompt_tokens": 0}, "faults[0].params.prompt_tokens"),
        ({"prompt_tokens": 1.5}, "faults[0].params.prompt_tokens"),
        ({"share": 0}, "faults[0].params.share"),
        ({"max_tokens": 0}, "faults[0].params.max_tokens"),
        ({"fraction": 0.1}, "fraction"),
    ],
)
def test_kv_pressure_params_are_checked(params, message):
    with pytest.raises(SpecError) as err:
        traffic_faults(
            [{"kind": "memory.kv_pressure", "start_s": 0, "duration_s": 1, "params": params}]
        )
    assert message in str(err.value)
