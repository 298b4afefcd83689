"""Schedules for the nightly, against a real `prefect server start` on loopback.

One server (its own PREFECT_HOME in tmp) serves the module. Every deploy happens in a child
process with PREFECT_API_URL set, so this test process's Prefect settings are never touched.
Then the server's HTTP API is asked what it holds: the deployment, its cron schedule, and the
next flow run the scheduler created, in state Scheduled at the next 02:00 of the zone.
Server and children are started in their own process groups and killed as groups in `finally`.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

import flows.deploy
from flows.deploy import (
    EPHEMERAL_MESSAGE,
    NIGHTLY,
    REPO_DIR,
    CronSchedule,
    DeployError,
    nightly_parameters,
    serve_nightly,
)
from tests.support.terminal import terminal_like

SERVER_STARTUP_S = 90  # ~16 s measured on 2 shared cores; generous for a loaded machine
SCHEDULE_WAIT_S = (
    45  # serve: import + register (~4 s) + the scheduler's 5 s recent-deployments loop
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without any PREFECT_* of this process (the suite's own Prefect home)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_UI_ENABLED="false",
        **extra,
    )
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the child's whole process group, SIGKILL it if it lingers (no orphans)."""
    if proc.poll() is None or _group_alive(proc.pid):
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(proc.pid):
                break
            time.sleep(0.5)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """A real Prefect server on a free loopback port; yields its API URL."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = _free_port()
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=_clean_env(PREFECT_HOME=str(home)),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        t0 = time.monotonic()
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"prefect server exited {proc.returncode}: "
                    f"{(home / 'server.log').read_text()[-3000:]}"
                )
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > SERVER_STARTUP_S:
                pytest.fail(f"prefect server not healthy after {SERVER_STARTUP_S} s")
            time.sleep(0.5)
        print(f"prefect server healthy after {time.monotonic() - t0:.1f} s")
        yield url
    finally:
        _kill_group(proc)
        log.close()


def _child_env(api_url: str, tmp_path: Path) -> dict[str, str]:
    state = tmp_path / "state"
    (state / "prefect").mkdir(parents=True, exist_ok=True)  # Prefect makes only the last level
    return _clean_env(
        PREFECT_API_URL=api_url, SPIKELENS_HOME=str(state), PREFECT_HOME=str(state / "prefect")
    )


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _deployment(api_url: str, name: str) -> dict | None:
    found = httpx.post(
        f"{api_url}/deployments/filter",
        json={"deployments": {"name": {"any_": [name]}}},
        timeout=10,
    ).json()
    return found[0] if found else None


def _scheduled_runs(api_url: str, deployment_id: str) -> list[dict]:
    return httpx.post(
        f"{api_url}/flow_runs/filter",
        timeout=10,
        json={
            "deployments": {"id": {"any_": [deployment_id]}},
            "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
            "sort": "EXPECTED_START_TIME_ASC",
            "limit": 3,
        },
    ).json()


def _next_local(hour: int, zone: str, after: dt.datetime) -> dt.datetime:
    """The first `hour`:00 wall-clock time in `zone` strictly after `after`, in UTC."""
    tz = ZoneInfo(zone)
    day = after.astimezone(tz).date()
    while True:
        candidate = dt.datetime(day.year, day.month, day.day, hour, tzinfo=tz)
        if candidate > after:
            return candidate.astimezone(dt.UTC)
        day += dt.timedelta(days=1)


def _utc(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(dt.UTC)


def _only_schedule(deployment: dict) -> dict:
    schedules = deployment["schedules"]
    assert len(schedules) == 1, schedules
    assert schedules[0]["active"] is True
    return schedules[0]["schedule"]


@pytest.mark.e2e
def test_serve_schedules_the_nightly_at_0200_utc(prefect_server, tmp_path):
    name = "nightly-served"
    before = dt.datetime.now(dt.UTC)
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(
        _python(f"from flows.deploy import serve_nightly; serve_nightly(name={name!r})"),
        cwd=REPO_DIR,
        env=_child_env(prefect_server, tmp_path),
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=terminal_like,  # Ctrl-C must reach it even from a background CI job
    )
    try:
        deadline = time.monotonic() + SCHEDULE_WAIT_S
        deployment, runs = None, []
        while time.monotonic() < deadline and not runs:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            deployment = deployment or _deployment(prefect_server, name)
            if deployment:
                runs = _scheduled_runs(prefect_server, deployment["id"])
            if not runs:
                time.sleep(1)
        assert deployment, f"no deployment {name!r}: {(tmp_path / 'serve.log').read_text()}"
        assert runs, "the scheduler created no run within the wait"
        # serve, not a work pool: the serving process itself picks the runs up.
        assert deployment["entrypoint"] == f"{NIGHTLY.module}.{NIGHTLY.function}"
        assert deployment["work_pool_name"] is None
        schedule = _only_schedule(deployment)
        assert (schedule["cron"], schedule["timezone"]) == ("0 2 * * *", "UTC")
        first = runs[0]
        assert first["state"]["type"] == "SCHEDULED" and first["state"]["name"] == "Scheduled"
        assert _utc(first["expected_start_time"]) == _next_local(2, "UTC", before)
        # The process is still serving (it is the worker for this deployment)...
        assert proc.poll() is None
        # ...and Ctrl-C stops it cleanly and pauses the schedule, so no runs pile up unserved.
        proc.send_signal(signal.SIGINT)
        # (30 s was seen to be too short while the 2-core box ran other e2e work)
        assert proc.wait(90) == 0, (tmp_path / "serve.log").read_text()[-3000:]
        assert (
            httpx.get(f"{prefect_server}/deployments/{deployment['id']}", timeout=10).json()[
                "paused"
            ]
            is True
        )
    finally:
        _kill_group(proc)
        log.close()


@pytest.mark.e2e
def test_deploy_to_pool_registers_a_process_deployment(prefect_server, tmp_path):
    name, pool, zone = "nightly-pool", "spikelens-test-pool", "Europe/Berlin"
    before = dt.datetime.now(dt.UTC)
    code = (
        "from flows.deploy import deploy_to_pool; "
        f"print(deploy_to_pool({pool!r}, cron='0 2 * * *', timezone={zone!r}, name={name!r}))"
    )
    proc = subprocess.run(
        _python(code),
        cwd=REPO_DIR,
        env=_child_env(prefect_server, tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    deployment_id = proc.stdout.strip().splitlines()[-1]

    work_pool = httpx.get(f"{prefect_server}/work_pools/{pool}", timeout=10).json()
    assert work_pool["type"] == "process"
    deployment = httpx.get(f"{prefect_server}/deployments/{deployment_id}", timeout=10).json()
    assert deployment["name"] == name and deployment["work_pool_name"] == pool
    assert deployment["entrypoint"] == NIGHTLY.file_path == "flows/nightly.py:nightly_regression"
    assert deployment["pull_steps"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(REPO_DIR)}}
    ]
    schedule = _only_schedule(deployment)
    assert (schedule["cron"], schedule["timezone"]) == ("0 2 * * *", zone)

    deadline, runs = time.monotonic() + SCHEDULE_WAIT_S, []
    while time.monotonic() < deadline and not runs:
        runs = _scheduled_runs(prefect_server, deployment_id)
        if not runs:
            time.sleep(1)
    assert runs, "the scheduler created no run within the wait"
    assert runs[0]["state"]["name"] == "Scheduled"
    # 02:00 in Berlin is 01:00 or 00:00 UTC depending on the season: the zone is honoured.
    assert _utc(runs[0]["expected_start_time"]) == _next_local(2, zone, before)


@pytest.mark.e2e
def test_prefect_yaml_deploys_with_prefect_deploy_all(prefect_server, tmp_path):
    """The repo's prefect.yaml is valid for `prefect deploy --all` against a process pool."""
    pool = "spikelens-process"
    created = httpx.post(
        f"{prefect_server}/work_pools/", timeout=10, json={"name": pool, "type": "process"}
    )
    assert created.status_code in (201, 409), created.text  # 409: exists already
    prefect_cli = str(Path(sys.executable).parent / "prefect")
    proc = subprocess.run(
        [prefect_cli, "--no-prompt", "deploy", "--all"],
        cwd=REPO_DIR,
        env=_child_env(prefect_server, tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    deployment = _deployment(prefect_server, "nightly")
    assert deployment is not None and deployment["work_pool_name"] == pool
    assert deployment["entrypoint"] == "flows/nightly.py:nightly_regression"
    # Resolved on the worker when a run starts, so each worker uses its own checkout.
    assert deployment["pull_steps"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $SPIKELENS_REPO }}"}}
    ]
    schedule = _only_schedule(deployment)
    assert (schedule["cron"], schedule["timezone"]) == ("0 2 * * *", "UTC")


@pytest.mark.e2e
def test_ephemeral_prefect_refuses_to_schedule(tmp_path):
    """`spikelens deploy` without PREFECT_API_URL says what to do, instead of serving a schedule
    that never fires (Prefect itself only warns and serves)."""
    state = tmp_path / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "deploy"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(SPIKELENS_HOME=str(state), PREFECT_HOME=str(state / "prefect")),
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    said = " ".join(proc.stderr.split())  # rich wraps long lines
    assert f"error: {' '.join(EPHEMERAL_MESSAGE.split())}" in said
    assert "Cannot schedule flows on an ephemeral server" not in proc.stdout + proc.stderr


def test_schedule_rejects_a_bad_cron_naming_the_field():
    with pytest.raises(DeployError, match=r"^cron: '0 25 \* \* \*' is not a valid"):
        CronSchedule("0 25 * * *")


def test_schedule_rejects_an_unknown_timezone_naming_the_field():
    with pytest.raises(DeployError, match=r"^timezone: 'Mars/Olympus' is not an IANA"):
        CronSchedule("0 2 * * *", "Mars/Olympus")


def test_config_dir_is_checked_at_deploy_time(tmp_path):
    (tmp_path / "config.yaml").write_text("scenarios: [missing.yaml]\n")
    with pytest.raises(DeployError, match=r"^config_dir: .*missing\.yaml does not exist"):
        nightly_parameters(str(tmp_path), base=None)
    with pytest.raises(DeployError, match=r"^config_dir: .* is not a directory"):
        nightly_parameters(str(tmp_path / "nope"), base=None)


def test_config_dir_inside_the_checkout_is_passed_relative_to_it():
    """Workers chdir into their own checkout, so a path inside the repo must stay relative."""
    inside = REPO_DIR / "scenarios" / "nightly"
    assert nightly_parameters(str(inside), base=REPO_DIR) == {"config_dir": "scenarios/nightly"}
    assert nightly_parameters(str(inside), base=None) == {"config_dir": str(inside)}
    assert nightly_parameters(None, base=REPO_DIR) == {}


class _InterruptedWhileRegistering:
    """A flow entrypoint whose `serve` is stopped by Ctrl-C before Prefect's serving loop runs."""

    name = "nightly-regression"

    def load(self):
        return self

    def serve(self, **kwargs):
        raise KeyboardInterrupt


def test_ctrl_c_while_serve_registers_returns_normally_and_pauses(monkeypatch):
    """CI once sent SIGINT while `serve` was still inside `Runner.add_flow`: the process died with a
    traceback and exit -2 instead of stopping as documented (returns, schedule paused)."""
    paused = []
    monkeypatch.setattr(flows.deploy, "require_server", lambda: "http://127.0.0.1:1/api")
    monkeypatch.setattr(flows.deploy, "_pause_deployment", paused.append)
    try:
        serve_nightly(name="nightly-served", flow=_InterruptedWhileRegistering())
    except KeyboardInterrupt:  # escaping, it would also stop pytest itself
        pytest.fail("Ctrl-C while serve registers escaped serve_nightly")
    assert paused == ["nightly-regression/nightly-served"]
