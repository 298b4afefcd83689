"""Schedules for the nightly regression: serve it from this process, or register it with a pool.

Two ways, because they fail differently:
- `serve_nightly` keeps this process running as the nightly's scheduler client and executor
  (`flow.serve`): nothing else to install, but no runs happen while it is stopped.
- `deploy_to_pool` registers a deployment with a `process` work pool and returns; whichever
  `prefect worker start --pool NAME` polls the pool runs the nightly from this repository
  (`flow.from_source(...).deploy(...)`, the same shape as the repo's `prefect.yaml`).

Both need a real Prefect server (`prefect server start` + `PREFECT_API_URL`): the ephemeral
server a flow starts on demand has no scheduler, and Prefect itself only logs a warning there and
then serves a schedule that never fires. We refuse instead, with the fix in the message.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# The repository root: `from_source` points workers here, and relative config dirs resolve here.
REPO_DIR = Path(__file__).resolve().parent.parent

EPHEMERAL_MESSAGE = (
    "an ephemeral Prefect cannot schedule: start `prefect server start` and set "
    "PREFECT_API_URL (e.g. http://127.0.0.1:4200/api)"
)


class DeployError(RuntimeError):
    """A schedule could not be set up; the message names the option or setting to fix."""


@dataclass(frozen=True)
class FlowEntrypoint:
    """Where a flow lives, spelled both ways Prefect needs it."""

    module: str  # importable module, for `serve` (the package is installed, any cwd works)
    function: str  # the @flow-decorated function in that module

    @property
    def file_path(self) -> str:
        """`path/to/file.py:function` relative to the repo root, for `from_source` and prefect.yaml."""
        return f"{self.module.replace('.', '/')}.py:{self.function}"

    def load(self):
        return getattr(importlib.import_module(self.module), self.function)


NIGHTLY = FlowEntrypoint("flows.nightly", "nightly_regression")


@dataclass(frozen=True)
class CronSchedule:
    """When the nightly runs."""

    # Five-field cron; 02:00 is after the working day and before the morning's reports are read.
    cron: str = "0 2 * * *"
    # IANA zone the cron is read in; UTC by default so a schedule means the same on every host.
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        from prefect._internal.schemas.validators import validate_cron_string

        try:
            validate_cron_string(self.cron)
        except ValueError:
            raise DeployError(
                f"cron: {self.cron!r} is not a valid five-field cron expression "
                "(minute hour day-of-month month day-of-week, e.g. '0 2 * * *')"
            ) from None
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise DeployError(
                f"timezone: {self.timezone!r} is not an IANA time zone "
                "(e.g. UTC, Europe/Berlin, America/New_York)"
            ) from None

    def to_prefect(self):
        from prefect.schedules import Cron

        return Cron(self.cron, timezone=self.timezone)


def require_server() -> str:
    """The configured Prefect API URL, after checking that a server answers there.

    Raises DeployError when Prefect would fall back to an ephemeral server (no PREFECT_API_URL in
    the environment or the active profile) or when nothing answers at the URL.
    """
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise DeployError(EPHEMERAL_MESSAGE)
    with get_client(sync_client=True) as client:
        failure = client.api_healthcheck()
    if failure is not None:
        raise DeployError(
            f"no Prefect server answers at PREFECT_API_URL={url} ({failure}); "
            "start one with `prefect server start`"
        )
    return url


def nightly_parameters(config_dir: str | None, base: Path | None) -> dict[str, Any]:
    """The nightly's parameters: `config_dir` made absolute, or relative to `base` when inside it.

    A relative `config_dir` is looked up in the working directory first, then in the repo.

    None keeps the flow's own default. A missing directory or a broken `config.yaml` is an error
    here rather than a failed run at 02:00.
    """
    if config_dir is None:
        return {}
    path = Path(config_dir)
    if not path.is_absolute():
        path = (Path.cwd() / path) if (Path.cwd() / path).is_dir() else (REPO_DIR / path)
    path = path.resolve()
    if not path.is_dir():
        raise DeployError(f"config_dir: {config_dir!r} is not a directory of scenario files")
    from flows.nightly_config import NightlyConfig, NightlyConfigError

    try:
        NightlyConfig.load(path)  # a broken config fails now, not in a run at 02:00
    except (NightlyConfigError, OSError) as e:
        raise DeployError(f"config_dir: {e}") from None
    if base is not None and path.is_relative_to(base):
        return {"config_dir": str(path.relative_to(base))}
    return {"config_dir": str(path)}


def serve_nightly(
    cron: str = "0 2 * * *",
    timezone: str = "UTC",
    config_dir: str | None = None,
    name: str = "nightly",
    flow: FlowEntrypoint = NIGHTLY,
    parameters: dict[str, Any] | None = None,
) -> None:
    """Serve the nightly regression on a cron schedule until interrupted (blocks).

    This process polls the server and runs each due nightly in a subprocess. At most one runs at
    a time: two load tests on the same host would measure each other. Ctrl-C or SIGTERM stops it
    and it returns normally, with the schedule paused (no runs pile up while nobody serves them;
    serving again resumes it). `parameters` are extra flow parameters (to serve another flow).
    """
    from prefect.flows import EntrypointType

    schedule = CronSchedule(cron, timezone)
    require_server()
    params = {**nightly_parameters(config_dir, base=None), **(parameters or {})}
    served = flow.load()
    try:
        served.serve(
            name=name,
            schedules=[schedule.to_prefect()],
            parameters=params,
            limit=1,
            entrypoint_type=EntrypointType.MODULE_PATH,
        )
    except KeyboardInterrupt:
        # Prefect's serving loop handles Ctrl-C itself; one that lands while `serve` is still
        # registering the deployment (seen in CI: inside `Runner.add_flow`) comes out as this.
        # Stop the same way: return normally, schedule paused below.
        pass
    finally:
        # Prefect's own pause-on-shutdown runs while asyncio cancels its tasks after Ctrl-C and
        # was cancelled itself in 1 of 4 tries here (schedule left active): pause it again, sync.
        _pause_deployment(f"{served.name}/{name}")


def _pause_deployment(full_name: str) -> None:
    """Pause `flow-name/deployment-name`; warn instead of raising (we may be unwinding already)."""
    import sys

    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            client.pause_deployment(client.read_deployment_by_name(full_name).id)
    except Exception as e:
        print(
            f"warning: could not pause deployment {full_name!r} ({e}); its schedule stays "
            "active until you run `prefect deployment pause` or serve it again",
            file=sys.stderr,
        )


def ensure_process_pool(pool: str) -> None:
    """Create `pool` as a `process` work pool if missing; refuse a pool of another type."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        try:
            existing = client.read_work_pool(pool)
        except ObjectNotFound:
            client.create_work_pool(
                WorkPoolCreate(
                    name=pool,
                    type="process",
                    base_job_template=ProcessWorker.get_default_base_job_template(),
                )
            )
            return
    if existing.type != "process":
        raise DeployError(
            f"pool: work pool {pool!r} is of type {existing.type!r}; "
            "`spikelens deploy` targets process pools (docker/kubernetes: see "
            "docs/deploy.md and prefect.yaml)"
        )


def deploy_to_pool(
    pool: str,
    cron: str = "0 2 * * *",
    timezone: str = "UTC",
    config_dir: str | None = None,
    name: str = "nightly",
    flow: FlowEntrypoint = NIGHTLY,
    source: Path = REPO_DIR,
    parameters: dict[str, Any] | None = None,
) -> UUID:
    """Register the nightly with process work pool `pool` (created if missing); returns its id.

    Workers run it from `source` (a pull step sets the working directory there), so the
    machine running the worker needs this checkout at the same path.
    """
    schedule = CronSchedule(cron, timezone)
    if not pool:
        raise DeployError("pool: a work pool name is required")
    require_server()
    ensure_process_pool(pool)
    params = {**nightly_parameters(config_dir, base=source.resolve()), **(parameters or {})}
    from prefect import Flow

    # Prefect's sync/async dispatch types both results as "X | Coroutine"; called sync, they are X
    remote = Flow.from_source(source=str(source.resolve()), entrypoint=flow.file_path)
    if not isinstance(remote, Flow):
        raise DeployError(f"{flow.file_path}: Flow.from_source returned {type(remote).__name__}")
    deployment_id = remote.deploy(
        name=name,
        work_pool_name=pool,
        schedules=[schedule.to_prefect()],
        parameters=params,
        concurrency_limit=1,
        print_next_steps=False,
        ignore_warnings=True,
    )
    if not isinstance(deployment_id, UUID):
        raise DeployError(f"deploy {name!r}: Prefect returned {type(deployment_id).__name__}")
    return deployment_id


def deploy(
    cron: str = "0 2 * * *",
    timezone: str = "UTC",
    pool: str | None = None,
    config_dir: str | None = None,
    name: str = "nightly",
) -> UUID | None:
    """`spikelens deploy`: with a pool, register there and return; without, serve (blocks)."""
    if pool:
        return deploy_to_pool(pool, cron, timezone, config_dir, name)
    serve_nightly(cron, timezone, config_dir, name)
    return None
