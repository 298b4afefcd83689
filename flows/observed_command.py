"""`spikelens incident --prometheus`: a production window explained from Prometheus alone
(flows/observed.py does the work; this parses, checks and prints)."""

from __future__ import annotations

import typer

from flows.cli_options import DETECTOR_HELP, detector_option
from flows.cli_run import fail, run_flow, supervise
from flows.progress import console


def incident(
    prometheus: str = typer.Option(
        ..., help="Prometheus server that scraped the engine, e.g. http://127.0.0.1:9090."
    ),
    from_: str = typer.Option(
        ..., "--from", help="Start of the window: RFC 3339 (2026-12-03T06:00:00Z) or Unix seconds."
    ),
    to: str = typer.Option(..., help="End of the window, as --from."),
    match: str | None = typer.Option(
        None,
        help="Series selector, e.g. '{job=\"vllm\"}' (default: every serving-engine series,"
        " its jobs' process and GC series, node_exporter's CPU and pressure).",
    ),
    step: float = typer.Option(
        15.0, help="Query step in seconds: the analysis window (your scrape interval or more)."
    ),
    detector: str = typer.Option("default", help=DETECTOR_HELP + "."),
) -> None:
    """Explain a production window from Prometheus alone: its spikes and their causes."""
    from collectors.prometheus_range import PrometheusError, RangeRequest, check_range, parse_time

    detector_option(detector)
    try:
        req = RangeRequest(
            prometheus, parse_time(from_, "--from"), parse_time(to, "--to"), step, match
        )
        checked = check_range(req)  # the window, the server, data in it: before Prefect starts
    except PrometheusError as e:
        fail(str(e))
    supervise()  # before the flow's imports (torch, Prefect), which the child does anyway
    from flows.observed import observed_incident

    result = run_flow(
        f"incident from {prometheus}",
        observed_incident,
        req,
        checked=checked,
        detector=detector,
        expected=(PrometheusError,),
    )
    console.print(
        f"{result.run_id}: {result.series} series, {result.rows} samples; "
        f"{result.spikes} spike(s) reported"
    )
    print(result.report)
