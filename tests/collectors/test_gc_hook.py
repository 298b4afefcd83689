"""The GC hook in real child processes: rows with pid and role, spawn children, chaining, kills."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from collectors.gc_hook import SITE_DIR, hook_env

CHILD = """
import gc, multiprocessing as mp, os, sys, time

def collect(n):
    for _ in range(n):
        gc.collect()

if __name__ == "__main__":
    print("chained=" + os.environ.get("CHAINED", "no"), flush=True)
    if sys.argv[1] == "spawn":
        mp.set_start_method("spawn")
        p = mp.Process(target=collect, args=(3,))
        p.start(); p.join()
        collect(5)
    else:   # "kill": collect for 0.4 s, say so, then wait to be SIGKILLed
        end, n = time.time() + 0.4, 0
        while time.time() < end:
            collect(1); n += 1; time.sleep(0.002)
        print("done", n, flush=True)
        time.sleep(60)
"""


def _run(tmp_path, mode, env):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    return subprocess.Popen(
        [sys.executable, str(script), mode],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )


def _rows(folder):
    out = {}
    for path in folder.glob("gc-*.jsonl"):
        out[int(path.stem.split("-")[1])] = [
            json.loads(line) for line in path.read_text().splitlines()
        ]
    return out


def test_gc_pauses_of_root_and_spawn_child_with_pid_role_and_chained_sitecustomize(tmp_path):
    other = tmp_path / "venv_site"
    other.mkdir()
    (other / "sitecustomize.py").write_text('import os\nos.environ["CHAINED"] = "yes"\n')
    collect = tmp_path / "collect"
    env = hook_env(collect, "engine", {**os.environ, "PYTHONPATH": str(other)})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(SITE_DIR), str(other)]
    proc = _run(tmp_path, "spawn", env)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "chained=yes" in out  # the shadowed sitecustomize still ran
    rows = _rows(collect)
    root = rows[proc.pid]
    assert (
        len(root) >= 5
        and {r["role"] for r in root} == {"engine"}
        and {r["pid"] for r in root} == {proc.pid}
    )
    assert all(r["end_ns"] >= r["start_ns"] > 0 and r["generation"] in (0, 1, 2) for r in root)
    assert any(r["generation"] == 2 for r in root)  # gc.collect() is a full collection
    children = {pid: r for pid, r in rows.items() if pid != proc.pid}
    spawned = [r for r in children.values() if r[0]["role"] == "engine:spawn_child"]
    assert spawned and spawned[0][0]["ppid"] == proc.pid and len(spawned[0]) >= 3


def test_a_sigkilled_process_keeps_its_rows_up_to_its_last_100_ms(tmp_path):
    collect = tmp_path / "collect"
    proc = _run(tmp_path, "kill", hook_env(collect, "engine"))
    assert proc.stdout.readline().strip() == "chained=no"
    done, made = proc.stdout.readline().split()
    assert done == "done"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    rows = [r for r in _rows(collect)[proc.pid] if r["generation"] == 2]
    # 0.4 s of full collections: all but the unflushed tail (the last <= 100 ms) survive
    assert len(rows) >= max(3, int(made) // 2), (len(rows), made)


def test_the_hook_is_inert_without_the_run_dir_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPIKELENS_COLLECT")}
    env["PYTHONPATH"] = str(SITE_DIR)
    code = "import gc, sys; gc.collect(); print(len(gc.callbacks), 'sitecustomize' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert out == ["0", "True"] and not list(tmp_path.rglob("gc-*.jsonl"))


def test_hook_env_rejects_a_bad_role(tmp_path):
    with pytest.raises(ValueError, match="gc hook role"):
        hook_env(tmp_path, "bad role;")


def test_gc_off_disables_automatic_collection_but_keeps_timing_explicit_ones(tmp_path):
    """confirm's memory/GC arm: with gc_off the child starts with automatic GC disabled and its
    start-up heap frozen; an explicit gc.collect() still runs and is still recorded."""
    code = "import gc; gc.collect(); print(gc.isenabled(), gc.get_freeze_count() > 0)"
    env = hook_env(tmp_path / "collect", "engine", dict(os.environ), gc_off=True)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True"]
    assert sum(len(r) for r in _rows(tmp_path / "collect").values()) >= 1
    plain = hook_env(tmp_path / "collect2", "engine", {**os.environ, "SPIKELENS_GC_OFF": "1"})
    assert "SPIKELENS_GC_OFF" not in plain  # never inherited by a run without the intervention
