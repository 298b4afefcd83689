"""The operations commands: `deploy` (the nightly on a schedule), `serve` (reports over HTTP),
`export` (runs as Parquet)."""

from __future__ import annotations

from pathlib import Path

import typer

from flows.cli_run import fail
from flows.paths import StatePaths
from flows.progress import console


def deploy(
    cron: str = typer.Option("0 2 * * *", help="Five-field cron of the nightly."),
    timezone: str = typer.Option("UTC", help="IANA time zone the cron is read in."),
    pool: str | None = typer.Option(
        None,
        help="Register with this process work pool and return, instead of "
        "serving from this process.",
    ),
    config_dir: Path | None = typer.Option(
        None, file_okay=False, help="Nightly config folder (default: scenarios/nightly)."
    ),
    name: str = typer.Option("nightly", help="Deployment name."),
) -> None:
    """Schedule the nightly regression on a Prefect server (serves until Ctrl-C unless --pool)."""
    from flows.deploy import DeployError
    from flows.deploy import deploy as deploy_nightly

    try:
        deployment_id = deploy_nightly(
            cron=cron,
            timezone=timezone,
            pool=pool,
            config_dir=str(config_dir) if config_dir else None,
            name=name,
        )
    except DeployError as e:
        fail(str(e))
    except KeyboardInterrupt:
        console.print("stopped serving; Prefect paused the schedule")
        return
    if deployment_id is not None:
        console.print(
            f"deployment [bold]nightly-regression/{name}[/bold] ({deployment_id}) "
            f"in pool {pool}: start a worker with `prefect worker start --pool {pool}`"
        )
    else:  # Prefect catches Ctrl-C inside serve and returns normally
        console.print("stopped serving; the schedule is paused")


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8080, help="Port."),
    root: Path | None = typer.Option(
        None, file_okay=False, help="Reports folder (default: the state's reports/)."
    ),
) -> None:
    """Serve the reports read-only over HTTP (GET/HEAD, nothing outside the reports folder)."""
    from templates.serve import serve as serve_reports

    root = root or StatePaths.from_env().ensure().reports
    console.print(f"serving {root} on http://{host}:{port}/ (Ctrl-C to stop)")
    try:
        serve_reports(root, host=host, port=port)
    except KeyboardInterrupt:
        pass
    except OSError as e:
        fail(f"--port {port}: {e.strerror}")


def export(
    out_dir: Path = typer.Argument(..., file_okay=False, help="Destination folder."),
    run: list[str] | None = typer.Option(None, "--run", help="Run id (repeatable; default all)."),
) -> None:
    """Export runs as hive-partitioned Parquet (table/date=…/run_id=…/data.parquet)."""
    from warehouse.export import export_runs

    paths = StatePaths.from_env()
    if not paths.warehouse.exists():
        fail(f"no warehouse at {paths.warehouse}: run a scenario first")
    try:
        files = export_runs(paths.warehouse, out_dir, run or None)
    except (KeyError, ValueError) as e:
        fail(str(e).strip("'\""))
    console.print(
        f"{len(files)} file(s) written; read back with DuckDB: "
        f"SELECT * FROM read_parquet('{out_dir}/requests/*/*/*.parquet', hive_partitioning=true)"
    )
    print(out_dir)
