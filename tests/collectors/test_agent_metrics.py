"""collectors/agent_metrics.py: the agent's families, rendered as Prometheus text 0.0.4 and read
back by prometheus_client's own parser (the format Prometheus scrapes)."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.agent_metrics import (
    GC_BUCKETS,
    AgentMetrics,
    GcObservation,
    escape_label_value,
    format_value,
    gc_observation,
)

P = "spikelens_agent_"
ROW = {
    "ppid": 1,
    "cpu_ns": 1_500_000_000,
    "run_ns": 2_000_000_000,
    "wait_ns": 250_000_000,
    "timeslices": 9,
    "voluntary_switches": 40,
    "involuntary_switches": 3,
    "threads": 5,
    "rss_bytes": 1 << 20,
}


def samples(text: str) -> dict[tuple, float]:
    """(sample name, sorted label pairs) → value, parsed as Prometheus would."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def families(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def test_every_family_is_declared_with_its_type_even_before_any_sample():
    text = AgentMetrics().render()
    # the parser drops counters' _total from the family name
    assert families(text) == {
        P + "collector_up": "gauge",
        P + "process_cpu_seconds": "counter",
        P + "process_run_seconds": "counter",
        P + "process_runqueue_wait_seconds": "counter",
        P + "process_voluntary_switches": "counter",
        P + "process_involuntary_switches": "counter",
        P + "process_threads": "gauge",
        P + "gc_pause_seconds": "histogram",
        P + "stack_seconds": "counter",
        P + "errors": "counter",
    }


def test_type_lines_name_each_family_exactly_and_in_sorted_order():
    text = AgentMetrics().render()
    types = [line.split()[2:] for line in text.splitlines() if line.startswith("# TYPE")]
    assert types == [
        [P + "collector_up", "gauge"],
        [P + "errors_total", "counter"],
        [P + "gc_pause_seconds", "histogram"],
        [P + "process_cpu_seconds_total", "counter"],
        [P + "process_involuntary_switches_total", "counter"],
        [P + "process_run_seconds_total", "counter"],
        [P + "process_runqueue_wait_seconds_total", "counter"],
        [P + "process_threads", "gauge"],
        [P + "process_voluntary_switches_total", "counter"],
        [P + "stack_seconds_total", "counter"],
    ]
    # each collector's up and errors series exist from the start, at 0
    got = samples(text)
    for collector in ("proc", "gc", "stacks"):
        assert got[(P + "collector_up", (("collector", collector),))] == 0
        assert got[(P + "errors_total", (("collector", collector),))] == 0


def test_proc_counters_are_set_from_cumulative_values_in_seconds_not_added():
    m = AgentMetrics()
    m.set_process(42, 1, "engine", ROW)
    m.set_process(42, 1, "engine", {**ROW, "cpu_ns": 2_000_000_000, "threads": 7})
    got = samples(m.render())
    labels = (("pid", "42"), ("ppid", "1"), ("role", "engine"))
    assert got[(P + "process_cpu_seconds_total", labels)] == 2.0  # set, not 3.5
    assert got[(P + "process_run_seconds_total", labels)] == 2.0
    assert got[(P + "process_runqueue_wait_seconds_total", labels)] == 0.25
    assert got[(P + "process_voluntary_switches_total", labels)] == 40
    assert got[(P + "process_involuntary_switches_total", labels)] == 3
    assert got[(P + "process_threads", labels)] == 7


def test_a_retitled_process_moves_to_its_new_role_instead_of_doubling():
    m = AgentMetrics()
    m.set_process(7, 1, "engine:child", ROW)
    m.set_process(7, 1, "EngineCore", ROW)
    cpu = [line for line in m.render().splitlines() if line.startswith(P + "process_cpu")]
    assert cpu == [P + 'process_cpu_seconds_total{pid="7",ppid="1",role="EngineCore"} 1.5']


def test_gc_histogram_buckets_are_cumulative_with_sum_and_count():
    m = AgentMetrics()
    for seconds in (0.0001, 0.0005, 0.003, 3.0):  # 0.0005 sits on a bound: `le` includes it
        m.observe_gc(GcObservation("42", "engine", "0", seconds))
    m.observe_gc(GcObservation("42", "engine", "2", 0.2))
    text = m.render()
    got = samples(text)
    base = (("generation", "0"), ("pid", "42"), ("role", "engine"))

    def bucket(le: str) -> float:
        return got[(P + "gc_pause_seconds_bucket", tuple(sorted((*base, ("le", le)))))]

    assert [bucket(le) for le in ("0.0005", "0.001", "0.0025", "0.005", "2.5", "+Inf")] == [
        2,
        2,
        2,
        3,
        3,
        4,
    ]
    assert got[(P + "gc_pause_seconds_count", base)] == 4
    assert got[(P + "gc_pause_seconds_sum", base)] == pytest.approx(3.0036)
    lines = [line for line in text.splitlines() if line.startswith(P + "gc_pause_seconds_bucket")]
    assert len(lines) == 2 * (len(GC_BUCKETS) + 1)
    assert lines[0] == (
        P + 'gc_pause_seconds_bucket{pid="42",role="engine",generation="0",le="0.0005"} 2'
    )
    assert lines[len(GC_BUCKETS)].endswith('generation="0",le="+Inf"} 4')


def test_label_values_are_escaped_per_the_text_format():
    role = 'a"b\\c\nd'
    assert escape_label_value(role) == 'a\\"b\\\\c\\nd'
    m = AgentMetrics()
    m.add_stack_seconds(3, role, "idle", 1.25)
    m.add_stack_seconds(3, role, "idle", 0.5)  # stack seconds add up
    text = m.render()
    assert P + 'stack_seconds_total{pid="3",role="a\\"b\\\\c\\nd",region="idle"} 1.75' in text
    got = samples(text)  # and the parser reads the original value back
    assert (
        got[(P + "stack_seconds_total", (("pid", "3"), ("region", "idle"), ("role", role)))] == 1.75
    )


def test_series_are_ordered_by_pid_numerically_and_values_formatted_for_prometheus():
    m = AgentMetrics()
    for pid in (10, 9, 100):
        m.set_process(pid, 1, "engine", ROW)
    threads = [line for line in m.render().splitlines() if line.startswith(P + "process_threads")]
    assert [line.split('"')[1] for line in threads] == ["9", "10", "100"]
    assert [format_value(v) for v in (3, 0.25, 1e-05, float("inf"), float("nan"))] == [
        "3",
        "0.25",
        "1e-05",
        "+Inf",
        "NaN",
    ]


def test_collector_state_and_errors():
    m = AgentMetrics()
    m.set_up("gc", True)
    m.add_error("gc", 2)
    got = samples(m.render())
    assert got[(P + "collector_up", (("collector", "gc"),))] == 1
    assert got[(P + "errors_total", (("collector", "gc"),))] == 2
    with pytest.raises(ValueError, match="collector must be one of proc, gc, stacks"):
        m.set_up("nvml", True)


def test_a_gc_hook_row_becomes_one_observation_and_a_bad_row_says_why():
    row = {"pid": 5, "ppid": 1, "role": "engine", "start_ns": 1000, "end_ns": 2_501_000}
    assert gc_observation({**row, "generation": 1}) == GcObservation("5", "engine", "1", 0.0025)
    for bad, why in (
        ([1, 2], "JSON object"),
        (row, "lacks key 'generation'"),
        ({**row, "generation": 3}, "generation must be 0, 1 or 2"),
        ({**row, "generation": True}, "generation must be 0, 1 or 2"),
        ({**row, "generation": 0, "pid": "5"}, "pid must be an integer"),
        ({**row, "generation": 0, "end_ns": 10}, "ends before it starts"),
    ):
        with pytest.raises(ValueError, match=why):
            gc_observation(bad)
