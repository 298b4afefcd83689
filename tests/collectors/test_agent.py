"""collectors/agent.py: a real agent beside a real child interpreter that runs the GC hook,
scraped over HTTP as Prometheus would; its options, its refusals and its clean stop."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.agent import Agent, AgentError, AgentOptions, find_roots
from collectors.gc_hook import hook_env
from collectors.pyspy import find_py_spy
from engine.server.launch import free_port

P = "spikelens_agent_"
COLLECTIONS = 6
# Cyclic garbage collected COLLECTIONS times; the last collection comes > 100 ms after the
# first, so the hook flushes its buffered rows then (it flushes at a collection, or at exit).
GC_CHILD = f"""
import gc, sys, time
class Node:
    pass
for i in range({COLLECTIONS}):
    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    if i == {COLLECTIONS} - 1:
        time.sleep(0.15)
    gc.collect()
end = time.process_time() + 0.1
while time.process_time() < end:
    pass
print("ready", flush=True)
time.sleep(60)
"""
# A parent and a child whose command lines both carry the marker: only the parent is a root.
NESTED_CHILD = """
import subprocess, sys, time
if sys.argv[2] == "outer":
    subprocess.Popen([sys.executable, sys.argv[0], sys.argv[1], "inner"])
print("ready", flush=True)
time.sleep(60)
"""
BURN_CHILD = """
import time
print("ready", flush=True)
end = time.time() + 20
while time.time() < end:
    sum(i * i for i in range(1000))
"""


def start_child(tmp_path: Path, code: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(code)
    proc = subprocess.Popen(
        [sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def children():
    """children(tmp_path, code, *args, env=None) → a started child, killed with its tree."""
    started: list[subprocess.Popen] = []

    def make(*args, **kwargs) -> subprocess.Popen:
        proc = start_child(*args, **kwargs)
        started.append(proc)
        return proc

    yield make
    for proc in started:
        for p in psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []:
            p.kill()
        proc.kill()
        proc.wait(10)


def scrape(agent: Agent) -> dict[tuple, float]:
    """(sample name, sorted labels) → value of one GET /metrics."""
    response = httpx.get(agent.url, timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(got: dict, name: str, **labels: str) -> float | None:
    """The one sample of `name` whose labels include `labels` (None when there is none)."""
    hits = [v for (n, ls), v in got.items() if n == P + name and set(labels.items()) <= set(ls)]
    assert len(hits) <= 1, hits
    return hits[0] if hits else None


def wait_for(predicate, timeout_s: float = 5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def agent_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("agent-")]


def test_agent_serves_proc_and_gc_of_a_hooked_child_and_outlives_it(tmp_path, children):
    gc_dir = tmp_path / "gc"
    child = children(tmp_path, GC_CHILD, env=hook_env(gc_dir, "engine"))
    lines: list[str] = []
    options = AgentOptions(
        pid=child.pid, port=free_port(), gc_dir=gc_dir, interval_s=0.1, stacks_hz=0
    )
    with Agent(options, log=lines.append) as agent:
        pid = str(child.pid)
        got = wait_for(
            lambda: (
                (g := scrape(agent))
                and (value(g, "gc_pause_seconds_count", pid=pid, generation="2") or 0)
                >= COLLECTIONS
                and g
            )
        )
        assert value(got, "process_cpu_seconds_total", pid=pid, role="engine") > 0
        assert value(got, "process_threads", pid=pid) >= 1
        assert value(got, "collector_up", collector="proc") == 1
        assert value(got, "collector_up", collector="gc") == 1
        assert value(got, "collector_up", collector="stacks") == 0
        assert value(got, "errors_total", collector="gc") == 0
        assert httpx.get(agent.url.replace("/metrics", "/other"), timeout=5).status_code == 404
        assert "proc up; gc up; stacks down (off)" in agent.describe()
        print(httpx.get(agent.url, timeout=5).text)  # the excerpt the README shows

        child.kill()
        child.wait(10)
        wait_for(lambda: any("exited" in line for line in lines))
        after = scrape(agent)  # the last values stay served
        cpu = value(after, "process_cpu_seconds_total", pid=pid)
        assert cpu >= value(got, "process_cpu_seconds_total", pid=pid)
        assert value(after, "collector_up", collector="proc") == 0
    assert lines == [f"agent: root pid {child.pid} exited; its last values stay served"]
    assert agent_threads() == []
    with pytest.raises(httpx.TransportError):
        httpx.get(agent.url, timeout=1)


def test_gc_files_are_tailed_by_complete_lines_and_bad_lines_are_counted(tmp_path):
    """A file named for a live pid (this test's), a malformed line, a line still being written."""
    import os

    gc_dir = tmp_path / "gc"
    gc_dir.mkdir()
    row = {"pid": os.getpid(), "ppid": 1, "role": "engine", "tid": 1, "generation": 0}
    row |= {"start_ns": 0, "end_ns": 2_000_000, "collected": 0, "uncollectable": 0}
    path = gc_dir / f"gc-{os.getpid()}.jsonl"
    whole = json.dumps(row) + "\n"
    path.write_text(whole + "not json\n" + whole[:20])
    (gc_dir / "gc-999999999.jsonl").write_text(whole)  # a gone process: history, skipped
    options = AgentOptions(
        pid=os.getpid(), port=free_port(), gc_dir=gc_dir, interval_s=0.05, stacks_hz=0
    )
    with Agent(options, log=lambda line: None) as agent:
        got = scrape(agent)
        assert value(got, "gc_pause_seconds_count", generation="0") == 1
        assert value(got, "errors_total", collector="gc") == 1
        with open(path, "a") as f:
            f.write(whole[20:])
        got = wait_for(
            lambda: (g := scrape(agent)) and value(g, "gc_pause_seconds_count") == 2 and g
        )
        assert value(got, "gc_pause_seconds_sum") == pytest.approx(0.004)
        assert value(got, "gc_pause_seconds_bucket", le="0.0025") == 2
        assert value(got, "errors_total", collector="gc") == 1


def test_a_missing_gc_folder_is_a_down_collector_until_it_appears(tmp_path):
    import os

    gc_dir = tmp_path / "later"
    lines: list[str] = []
    options = AgentOptions(
        pid=os.getpid(), port=free_port(), gc_dir=gc_dir, interval_s=0.05, stacks_hz=0
    )
    with Agent(options, log=lines.append) as agent:
        assert value(scrape(agent), "collector_up", collector="gc") == 0
        assert "gc down (no folder" in agent.describe()
        gc_dir.mkdir()
        wait_for(lambda: value(scrape(agent), "collector_up", collector="gc") == 1)
    assert lines[0].startswith(f"agent: gc: no folder {gc_dir}")


def test_match_finds_the_outermost_matching_process(tmp_path, children):
    marker = f"spikelens-agent-test-{time.monotonic_ns()}"
    outer = children(tmp_path, NESTED_CHILD, marker, "outer")
    # the child shows up at fork, before its exec gives it the command line: wait for that
    inner = wait_for(
        lambda: [c for c in psutil.Process(outer.pid).children() if marker in " ".join(c.cmdline())]
    )[0]
    assert find_roots(marker, set()) == [outer.pid]
    options = AgentOptions(match=marker, port=free_port(), stacks_hz=0)
    with Agent(options, log=lambda line: None) as agent:
        assert agent.roots() == [outer.pid]
        got = scrape(agent)
        assert value(got, "process_threads", pid=str(inner.pid), ppid=str(outer.pid)) >= 1


def test_no_root_process_refuses_to_start_in_one_line():
    with pytest.raises(AgentError, match="^no process with pid 999999999$"):
        Agent(AgentOptions(pid=999999999, stacks_hz=0)).start()
    with pytest.raises(AgentError, match="^no running process's command line matches"):
        Agent(AgentOptions(match="no-such-process-[0-9]{40}", stacks_hz=0)).start()
    assert agent_threads() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "pid/match must be given, exactly one"),
        ({"pid": 1, "match": "x"}, "pid/match must be given, exactly one"),
        ({"pid": 0}, "pid must be a positive process id"),
        ({"match": "("}, "match must be a valid regular expression"),
        ({"pid": 1, "port": 0}, r"port must be in \[1, 65535\], got 0"),
        ({"pid": 1, "port": 70000}, r"port must be in \[1, 65535\]"),
        ({"pid": 1, "interval_s": 0.01}, r"interval_s must be in \[0.05, 60.0\] s, got 0.01"),
        ({"pid": 1, "stacks_hz": 1001}, r"stacks_hz must be in \[0, 1000\] Hz"),
        ({"pid": 1, "stacks_hz": 1.5}, r"stacks_hz must be in \[0, 1000\] Hz"),
        ({"pid": 1, "stacks_segment_s": 0.2}, r"stacks_segment_s must be in \[1.0, 600.0\] s"),
    ],
)
def test_bad_options_name_the_field_and_its_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AgentOptions(**kwargs)


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")
def test_stacks_add_sampled_seconds_per_region_and_leave_no_py_spy(tmp_path, children):
    """Up once py-spy has attached, then a 2-s segment's thread-seconds per region and the next
    segment under way; stop interrupts it."""
    child = children(tmp_path, BURN_CHILD)
    options = AgentOptions(
        pid=child.pid, port=free_port(), interval_s=0.1, stacks_hz=20, stacks_segment_s=2
    )
    pid = str(child.pid)

    def stacks() -> tuple[float | None, float | None]:
        """(collector_up{stacks}, the child's stack seconds in region `other`)."""
        got = scrape(agent)
        if agent.notes.get("stacks"):
            pytest.skip(f"py-spy cannot record here: {agent.notes['stacks']}")
        return (
            value(got, "collector_up", collector="stacks"),
            value(got, "stack_seconds_total", pid=pid, role="engine", region="other"),
        )

    def others() -> list[str]:
        return [p.name() for p in psutil.Process().children() if p.pid != child.pid]

    with Agent(options, log=lambda line: None) as agent:
        assert "stacks starting (20 Hz, first figures after 2 s)" in agent.describe()
        # up once attached; on a loaded box (the unit suite on every core) the first scrape
        # may already see the first segment's figures, so only "up" is certain here
        assert wait_for(lambda: (s := stacks())[0] and s, timeout_s=15)[0] == 1
        seconds = wait_for(lambda: stacks()[1], timeout_s=15)
        assert seconds > 1.0  # ~2 s of the burning main thread
        assert wait_for(lambda: others() == ["py-spy"], timeout_s=10)  # the next segment
    assert [p for p in psutil.Process().children() if p.pid != child.pid] == []
    assert agent_threads() == []
