"""Every load shape on the real engine: users follow closed-loop shapes, open-loop
shapes send their whole schedule at its rate, replay repeats a recorded run. Slow: marked e2e.

One engine (tiny model) serves all shapes; each run is short (3 s measured, 1 s warm-up).
"""

from collections import Counter
from itertools import pairwise

import pyarrow.parquet as pq
import pytest

from loadgen.arrivals import arrival_times
from loadgen.runner import LocustRunOptions, run_locust
from loadgen.spec import LoadSpec

pytestmark = pytest.mark.e2e

WORKLOAD = {
    "prompt_tokens": {"mean": 16, "min": 16, "max": 16},
    "output_tokens": {"mean": 4, "min": 4, "max": 4},
    "sampling": {"temperature": 0.0},
}
WARMUP_S, DURATION_S = 1.0, 3.0


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from engine.server.launch import EngineProcess

    run_dir = tmp_path_factory.mktemp("engine")
    with EngineProcess(
        {"run_id": "shapes", "engine": {"model": "tiny"}, "faults": []}, run_dir
    ) as proc:
        yield proc


def run(engine, run_dir, load, **kw):
    options = LocustRunOptions(WORKLOAD, load, duration_s=DURATION_S, warmup_s=WARMUP_S, **kw)
    result = run_locust(engine.url, run_dir, options)
    rows = pq.read_table(run_dir / "requests.parquet").to_pylist()
    assert result.requests_sent == len(rows) > 0
    assert {r["status"] for r in rows} <= {"ok", "cancelled"}, Counter(r["error"] for r in rows)
    return result, rows


def users_between(rows, result, start_s, end_s):
    t0 = result.load_started_ns
    return {
        r["user"] for r in rows if t0 + start_s * 1e9 <= r["intended_send_ns"] < t0 + end_s * 1e9
    }


@pytest.mark.parametrize(
    "load, expect",
    [
        ({"shape": "constant", "users": 3}, [(0, 3, 3)]),
        ({"shape": "ramp", "start_users": 1, "users": 3, "ramp_s": 2}, [(0, 0.9, 1), (2.1, 3, 3)]),
        (
            {"shape": "step", "users": 1, "stages": [{"at_s": 1.5, "users": 4}]},
            [(0, 1.4, 1), (1.6, 3, 4)],
        ),
        (
            {
                "shape": "spike",
                "users": 1,
                "spike_users": 4,
                "spike_start_s": 1,
                "spike_duration_s": 1,
            },
            [(0, 0.9, 1), (1.1, 1.9, 4), (2.2, 3, 1)],
        ),
    ],
)
def test_closed_loop_shapes_follow_their_user_counts(engine, tmp_path, load, expect):
    result, rows = run(engine, tmp_path, load)
    for start_s, end_s, users in expect:
        # each user sends several requests a second: every running user shows up in a window
        active = users_between(rows, result, start_s, end_s)
        assert len(active) == users, (start_s, end_s, sorted(active))


@pytest.mark.parametrize("shape", ["open", "poisson"])
def test_open_loop_shapes_hit_their_rate(engine, tmp_path, shape):
    load = {"shape": shape, "rate": 8.0}
    _result, rows = run(engine, tmp_path, load)
    schedule = [
        t for t in arrival_times(LoadSpec(**load), WARMUP_S, DURATION_S, seed=0) if t >= WARMUP_S
    ]
    measured = [r for r in rows if r["phase"] == "measure"]
    # every scheduled arrival was sent: the achieved rate is the schedule's
    assert len(measured) == len(schedule)
    if shape == "open":
        assert abs(len(measured) / DURATION_S - 8.0) <= 0.05 * 8.0
    lags_ms = sorted((r["sent_ns"] - r["intended_send_ns"]) / 1e6 for r in measured)
    assert lags_ms[0] >= 0


def test_replay_repeats_a_recorded_run(engine, tmp_path):
    _first, a = run(engine, tmp_path / "a", {"shape": "poisson", "rate": 6.0})
    _second, b = run(engine, tmp_path / "b", {"shape": "replay", "trace": str(tmp_path / "a")})
    # the replay starts at the recorded run's first arrival and stops at its own end
    offsets_a = [r["intended_send_ns"] - a[0]["intended_send_ns"] for r in a]
    offsets_b = [r["intended_send_ns"] - b[0]["intended_send_ns"] for r in b]
    assert offsets_b == offsets_a[: len(offsets_b)] and len(b) >= len(a) - 1
    assert [r["prompt_tokens_target"] for r in b] == [r["prompt_tokens_target"] for r in a][
        : len(b)
    ]


def test_a_closed_replay_sends_each_recorded_user_as_a_closed_loop(engine, tmp_path):
    """A spike of users replayed with replay_loop closed: as many users, each with one stream
    at a time, the spike's users sending only until they stopped in the recording."""
    spike = {"shape": "spike", "users": 1, "spike_users": 3, "spike_start_s": 1}
    first, a = run(engine, tmp_path / "a", {**spike, "spike_duration_s": 1})
    load = {"shape": "replay", "trace": str(tmp_path / "a"), "replay_loop": "closed"}
    second, b = run(engine, tmp_path / "b", load, workers=2)
    assert {r["worker"] for r in b} == {"0", "1"}
    assert len({r["user"] for r in b}) == len({r["user"] for r in a}) == 3
    by_user: dict[str, list[dict]] = {}
    for r in sorted(b, key=lambda r: r["sent_ns"]):
        by_user.setdefault(r["user"], []).append(r)
    for rows in by_user.values():  # the next request leaves only once the last one ended
        assert all(nxt["sent_ns"] >= prev["done_ns"] for prev, nxt in pairwise(rows))
    # two of the recording's users stopped at ~2 s, when their last request ended (Locust picks
    # which; a slow box stops them later): their replays send nothing after that
    t0 = first.load_started_ns
    last_end = {}
    for r in a:
        last_end[r["user"]] = max(last_end.get(r["user"], 0), r["done_ns"] or r["sent_ns"])
    stops = sorted((end - t0) / 1e9 for end in last_end.values())
    assert len(stops) == 3 and 1.9 < stops[1] < 2.8 < DURATION_S - 0.1 < stops[2], stops
    assert len(users_between(b, second, 0, 0.9)) == 1
    assert len(users_between(b, second, 1.1, 1.9)) == 3
    assert len(users_between(b, second, stops[1] + 0.05, 3)) == 1


def test_distributed_workers_lose_nothing_the_engine_served(engine, tmp_path):
    import httpx

    _result, rows = run(engine, tmp_path, {"shape": "constant", "users": 4}, workers=2)
    assert {r["worker"] for r in rows} == {"0", "1"}
    httpx.post(engine.url + "/spikelens/flush", timeout=30).raise_for_status()
    prefix = f"{tmp_path.name}-"  # run_locust tags request ids with the run directory's name
    served = {
        r["request_id"]
        for r in pq.read_table(engine.run_dir / "engine_requests.parquet").to_pylist()
        if r["request_id"].startswith(prefix)
    }
    ok = {r["request_id"] for r in rows if r["status"] == "ok"}
    # every request the engine finished was recorded, and every recorded success was served
    assert ok <= served <= {r["request_id"] for r in rows}
