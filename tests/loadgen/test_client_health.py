"""Client health rows, the saturation verdict, and the merge of per-process parts."""

import pyarrow.parquet as pq

from loadgen.client_health import (
    WARMUP_SKIP_S,
    HealthMonitor,
    merge_health,
    percentile,
    verdict,
    warmup_verdict,
)


def test_rows_per_second_and_measured_summary(tmp_path):
    h = HealthMonitor("p1")
    for lag in (0.1, 0.2, 0.3):
        h.add_lag(lag, measured=False)  # warm-up: not in the summary
    h.close_second(1_000, "warmup", cpu_percent=12.0, in_flight=2)
    for lag in [0.5] * 95 + [60.0] * 5:
        h.add_lag(lag, measured=True)
    h.slot_waits = 3
    h.close_second(2_000, "measure", cpu_percent=50.0, in_flight=4)
    assert h.rows["lag_samples"] == [3, 100] and h.rows["slot_waits"] == [0, 3]
    assert h.rows["lag_max_ms"] == [0.3, 60.0]
    s = h.summary(measured_cpu_percent=48.0)
    assert s["lag_samples"] == 100 and s["lag_p50_ms"] == 0.5
    assert s["lag_p99_ms"] == 60.0

    h.write(tmp_path, 48.0)
    HealthMonitor("p2").write(tmp_path, None)
    result = merge_health(tmp_path, tmp_path)
    assert pq.read_table(tmp_path / "client_health.parquet").num_rows == 2
    assert [w["worker"] for w in result["workers"]] == ["p1", "p2"]
    assert result["valid"] is False and "scheduling lag p99" in result["reasons"][0]  # p99 = 60 ms
    assert (tmp_path / "client_health.json").exists()


def test_verdict_thresholds():
    assert verdict([{"worker": "a", "cpu_percent": 90.0, "lag_p99_ms": 50.0}])["valid"]
    # a lag a shared CI box gives (11.6, 15.4 ms seen) moves sends, not token times: still valid
    assert verdict([{"worker": "a", "cpu_percent": 20.0, "lag_p99_ms": 15.4}])["valid"]
    late = verdict([{"worker": "a", "cpu_percent": 20.0, "lag_p99_ms": 70.0}])
    assert late["reasons"] == ["client a scheduling lag p99 70.0 ms > 50 ms"]
    bad = verdict([{"worker": "a", "cpu_percent": 95.0, "lag_p99_ms": 1.0}])
    assert not bad["valid"] and bad["reasons"] == ["client a CPU 95% > 90% of a core"]
    assert verdict([])["valid"]


def test_percentile_interpolates():
    assert percentile([], 99) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_read_delay_is_shown_per_second_and_in_the_summary_but_does_not_invalidate(tmp_path):
    h = HealthMonitor("p1")
    h.add_read_delay(50.0, measured=False)  # warm-up: in its second's row, not in the summary
    h.close_second(1_000, "warmup", cpu_percent=10.0, in_flight=1)
    for delay in [0.2] * 99 + [30.0]:
        h.add_read_delay(delay, measured=True)
    h.close_second(2_000, "measure", cpu_percent=10.0, in_flight=1)
    h.close_second(3_000, "measure", cpu_percent=10.0, in_flight=1)  # a second without reads
    assert h.rows["read_delay_p99_ms"][0] == 50.0
    assert h.rows["read_delay_p99_ms"][1] == percentile(sorted([0.2] * 99 + [30.0]), 99)
    assert h.rows["read_delay_p99_ms"][2] is None
    s = h.summary(measured_cpu_percent=10.0)
    assert s["read_delay_p50_ms"] == 0.2 and s["read_delay_p99_ms"] > 0.2
    # the arrivals are the kernel's times: a late read is shown, never a reason to distrust the run
    assert verdict([s])["valid"] is True
    h.write(tmp_path, 10.0)
    merge_health(tmp_path, tmp_path)
    assert (
        pq.read_table(tmp_path / "client_health.parquet").column("read_delay_p99_ms").to_pylist()[0]
        == 50.0
    )


def test_first_tokens_timed_only_loosely_invalidate_past_one_percent():
    h = HealthMonitor("p1")
    h.add_first_token(True, measured=False)  # warm-up: not counted
    for i in range(200):
        h.add_first_token(i < 2, measured=True)  # 1 %: at the limit, still valid
    s = h.summary(measured_cpu_percent=10.0)
    assert s["first_tokens"] == 200 and s["first_token_merged_share"] == 0.01
    assert verdict([s])["valid"] is True
    h.add_first_token(True, measured=True)
    bad = verdict([h.summary(measured_cpu_percent=10.0)])
    assert not bad["valid"] and bad["reasons"] == [
        "client p1 read 1.5% of first tokens late, merged with a later packet (> 1%): their TTFTs are "
        "known only to > 1 ms"
    ]
    assert (
        HealthMonitor("p2").summary(None)["first_token_merged_share"] is None
    )  # no streams: no verdict


def test_the_warmup_is_judged_as_measured_load_starts_past_its_spawning_second():
    h = HealthMonitor("p1")
    assert h.warmup_summary() is None
    for second, lag in enumerate([500.0, 2.0, 80.0], start=1):  # spawn, calm, starved
        for _ in range(50):
            h.add_lag(lag, measured=False)
        h.close_second(second * 10**9, "warmup", cpu_percent=30.0 + second, in_flight=4)
    assert WARMUP_SKIP_S == 1
    s = h.warmup_summary()
    assert s is not None and s["seconds"] == 2 and s["lag_samples"] == 100  # not the spawn
    assert s["cpu_percent"] == 32.5 and s["lag_max_ms"] == 80.0
    result = warmup_verdict([s])
    assert result["valid"] is False
    assert result["message"].startswith("the load generator is starved during warm-up (client p1")
    assert "engine.cpus" in result["message"]
    calm = HealthMonitor("p2")
    for second in (1, 2):
        calm.add_lag(1.0, measured=False)
        calm.close_second(second * 10**9, "warmup", cpu_percent=20.0, in_flight=1)
    assert warmup_verdict([calm.warmup_summary()]) == {
        "valid": True,
        "reasons": [],
        "workers": [calm.warmup_summary()],
        "message": None,
    }
    h.add_lag(1.0, measured=True)
    h.close_second(4 * 10**9, "measure", cpu_percent=50.0, in_flight=4)
    assert h.warmup_summary() == s  # measured seconds do not count
