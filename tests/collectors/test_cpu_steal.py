"""collectors.cpu_steal: /proc/stat's per-CPU steal read, summed over the engine's CPUs, and
summarised over a run's load with its worst second; no summary without two readings."""

import pytest

from collectors.cpu_steal import (
    CpuTicks,
    StealMeter,
    cpu_tick_rows,
    parse_proc_stat,
    read_proc_stat,
    steal_summary,
)

STAT = """cpu  300 0 100 600 0 0 0 50 0 0
cpu0 200 0 50 200 0 0 0 40 7 0
cpu1 100 0 50 400 0 0 0 10 0 0
intr 12345 0 0
ctxt 999
"""


def test_each_cpu_line_gives_its_total_and_its_steal():
    # total: user nice system idle iowait irq softirq steal (guest is inside user already)
    # idle: idle + iowait, the time the CPU had nothing to run
    assert parse_proc_stat(STAT) == {0: CpuTicks(490, 40, 200), 1: CpuTicks(560, 10, 400)}


def test_tick_rows_keep_the_engines_cpus_in_nanoseconds():
    rows = cpu_tick_rows(123, parse_proc_stat(STAT), [1, 5])  # cpu 5 is not on this box
    tick_ns = rows[0]["total_ns"] // 560
    assert tick_ns * 100 == 1_000_000_000  # USER_HZ 100 on Linux
    assert rows == [
        {
            "ts_ns": 123,
            "cpu": 1,
            "total_ns": 560 * tick_ns,
            "idle_ns": 400 * tick_ns,
            "steal_ns": 10 * tick_ns,
        }
    ]


def test_a_kernel_without_a_steal_column_is_refused_by_name():
    with pytest.raises(ValueError, match="cpu0: 4 fields, no steal column"):
        parse_proc_stat("cpu  1 2 3 4\ncpu0 1 2 3 4\n")
    with pytest.raises(ValueError, match="no per-CPU lines"):
        parse_proc_stat("intr 1\n")


def test_this_machines_counters_parse():
    reading = read_proc_stat()
    assert reading and all(t.total > 0 and 0 <= t.steal <= t.total for t in reading.values())


def _reading(steal0: int, total0: int, steal1: int = 0, total1: int = 0) -> dict[int, CpuTicks]:
    return {0: CpuTicks(total0, steal0), 1: CpuTicks(total1, steal1)}


def test_the_share_is_over_the_load_and_the_worst_second_is_found():
    readings = [
        (10.0, _reading(0, 0, 0, 0)),
        (11.0, _reading(0, 100, 50, 100)),  # cpu 1 lost half its second: not an engine CPU
        (12.0, _reading(40, 200, 50, 200)),  # cpu 0 lost 40 % of this second
        (13.0, _reading(40, 300, 50, 300)),
    ]
    summary = steal_summary(readings, [0])
    assert summary["available"] and summary["cpus"] == [0] and summary["seconds"] == 3.0
    assert summary["share"] == pytest.approx(40 / 300)
    assert summary["worst_second_share"] == pytest.approx(0.4)
    assert summary["worst_second_at_s"] == 1.0
    both = steal_summary(readings, [0, 1])
    assert both["share"] == pytest.approx(90 / 600) and both["worst_second_share"] == 0.25


def test_a_short_last_interval_is_not_the_worst_second():
    readings = [
        (0.0, _reading(0, 0)),
        (1.0, _reading(10, 100)),  # 10 % of a second
        (1.05, _reading(12, 105)),  # two stolen ticks of five, at the stop
    ]
    summary = steal_summary(readings, [0])
    assert summary["worst_second_share"] == pytest.approx(0.1) and summary["worst_second_at_s"] == 0
    assert summary["share"] == pytest.approx(12 / 105)


def test_one_reading_is_no_summary():
    summary = steal_summary([(0.0, _reading(0, 100))], [0])
    assert summary == {"available": False, "reason": "fewer than two readings of /proc/stat"}


def test_the_meter_reads_from_start_to_stop():
    ticks = iter(range(0, 10_000, 100))

    def reader():
        t = next(ticks)
        return {0: CpuTicks(t, t // 10)}

    meter = StealMeter([0], reader=reader, interval_s=0.01)
    meter.start()
    summary = meter.stop()
    assert summary["available"] and summary["share"] == pytest.approx(0.1)


def test_a_meter_that_cannot_read_says_why():
    def reader():
        raise OSError("no /proc here")

    meter = StealMeter([0], reader=reader, interval_s=0.01)
    meter.start()
    assert meter.stop() == {"available": False, "reason": "OSError: no /proc here"}
