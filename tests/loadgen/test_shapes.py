"""Closed-loop shapes as functions of time since load start."""

import pytest

from loadgen.shapes import change_times, spawn_rate, target_users
from loadgen.spec import LoadSpec


def test_constant():
    load = LoadSpec.from_dict({"shape": "constant", "users": 5})
    assert [target_users(load, t, 10) for t in (-3, 0, 9.9)] == [5, 5, 5]
    assert change_times(load, 10) == []
    assert spawn_rate(load) == 5.0


def test_ramp_reaches_users_at_ramp_s():
    load = LoadSpec.from_dict({"shape": "ramp", "users": 9, "start_users": 1, "ramp_s": 8})
    assert [target_users(load, t, 20) for t in (-1, 0, 4, 8, 15)] == [1, 1, 5, 9, 9]
    assert change_times(load, 20) == [1.0 * i for i in range(1, 9)]


def test_step_and_spike():
    step = LoadSpec.from_dict(
        {"shape": "step", "users": 2, "stages": [{"at_s": 3, "users": 6}, {"at_s": 6, "users": 1}]}
    )
    assert [target_users(step, t, 10) for t in (0, 2.9, 3, 5, 6, 9)] == [2, 2, 6, 6, 1, 1]
    assert change_times(step, 10) == [3, 6]
    assert spawn_rate(step) == 6.0
    spike = LoadSpec.from_dict(
        {
            "shape": "spike",
            "users": 2,
            "spike_users": 8,
            "spike_start_s": 4,
            "spike_duration_s": 2,
            "spawn_rate": 50,
        }
    )
    assert [target_users(spike, t, 10) for t in (0, 3.9, 4, 5.9, 6)] == [2, 2, 8, 8, 2]
    assert change_times(spike, 10) == [4, 6]
    assert spawn_rate(spike) == 50


def test_open_loop_shapes_are_not_closed_loop():
    with pytest.raises(ValueError, match="not a closed-loop shape"):
        target_users(LoadSpec.from_dict({"shape": "open", "rate": 2}), 0, 10)
