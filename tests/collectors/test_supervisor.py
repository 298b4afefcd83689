"""CollectorSet on a real process tree: py-spy, /proc and /metrics, stopped cleanly with a status."""

import json

import pyarrow.parquet as pq
import pytest

from collectors import CollectorOptions, CollectorSet, collect_dir
from collectors.pyspy import find_py_spy
from tests.support.sse_server import SSEServer


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")
def test_collectors_of_a_tree_whose_child_appears_later(tmp_path, hot_child, waiter):
    proc = hot_child(mode="spawn", burn_s=2.0)  # its spawn child burns from ~0.5 s on
    with SSEServer() as server:
        collectors = CollectorSet(
            tmp_path,
            proc.pid,
            "engine",
            metrics_url=server.url + "/metrics",
            options=CollectorOptions(metrics_interval_s=0.1),
        ).start()
        waiter(lambda: len(collectors.tree.roles) >= 3, timeout_s=15)  # + resource tracker, child
        waiter(lambda: collectors.proc.ticks >= 10 and collectors.metrics.scrapes >= 4)
        status = collectors.stop()
    folder = collect_dir(tmp_path)
    assert json.loads((folder / f"collectors-{proc.pid}.json").read_text()) == json.loads(
        json.dumps(status, default=str)
    )
    assert status["errors"] == [] and status["metrics"]["rows"] > 0 and status["proc"]["rows"] > 0
    spawned = [int(p) for p, role in status["roles"].items() if role == "engine:spawn_child"]
    assert len(spawned) == 1
    stacks = pq.read_table(folder / f"stacks-{proc.pid}.parquet").to_pylist()
    assert proc.pid in {r["pid"] for r in stacks} and spawned[0] in {r["pid"] for r in stacks}
    assert "sampling_penalties" in {r["region"] for r in stacks if r["pid"] == spawned[0]}
    assert {r["role"] for r in stacks if r["pid"] == proc.pid} == {"engine"}
    procs = pq.read_table(folder / f"proc-{proc.pid}.parquet")
    assert {proc.pid, spawned[0]} <= set(procs.column("pid").to_pylist())
    assert pq.read_table(tmp_path / "metrics.parquet").num_rows == status["metrics"]["rows"]


def test_bad_options_and_root_pid_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="collectors.proc_interval_s"):
        CollectorOptions(proc_interval_s=0)
    with pytest.raises(ValueError, match="collectors.pyspy_rate_hz"):
        CollectorOptions(pyspy_rate_hz=5000)
    for nice in (-1, 20, True, 2.5):
        with pytest.raises(ValueError, match=r"collectors.pyspy_nice .*\[0, 19\]"):
            CollectorOptions(pyspy_nice=nice)
    with pytest.raises(ValueError, match="root_pid"):
        CollectorSet(tmp_path, 0, "engine")
