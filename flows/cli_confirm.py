"""`spikelens confirm RUN_ID [--spike N] [--repeats K] [--cause CAUSE]` (registered on flows.cli's
app): re-run a spike's stretch with its verdict's cause removed and say how much went away;
`confirm_and_say` is also what `spikelens run --confirm` calls after its run.

Exit codes make it scriptable: 0 confirmed, 1 not confirmed, 3 inconclusive, 2 bad input (an
unknown run, a spike index out of range, an unknown cause: one line naming the field).
"""

from __future__ import annotations

import typer

from flows.cli_run import fail, run_flow, supervise
from flows.paths import StatePaths
from flows.progress import console


def confirm(
    run_id: str = typer.Argument(..., help="A recorded run whose spike to confirm."),
    spike: int | None = typer.Option(
        None, help="The spike's id (1..n, as its report numbers them); default: the most severe."
    ),
    repeats: int = typer.Option(2, min=1, max=10, help="Runs per arm (K), alternating A B A B."),
    cause: str | None = typer.Option(
        None, help="Confirm this cause instead of the stored verdict (e.g. to test a wrong one)."
    ),
) -> None:
    """Re-run a spike's stretch as recorded and with its cause removed; exit 0 confirmed,
    1 not confirmed, 3 inconclusive, 2 bad input."""
    raise typer.Exit(confirm_and_say(run_id, spike, repeats, cause, print_page=True))


def confirm_and_say(
    run_id: str, spike: int | None, repeats: int, cause: str | None, print_page: bool
) -> int:
    """Run the confirm flow, say its verdict in one line and return its exit code; bad input
    (`ConfirmUsageError`) fails with its one line (exit 2) before Prefect starts."""
    from flows.confirm_source import ConfirmUsageError, read_source

    paths = StatePaths.from_env()
    try:  # bad input fails here, before Prefect starts
        source = read_source(paths.warehouse, paths.run_dir(run_id), run_id, spike, cause)
    except ConfirmUsageError as e:
        fail(str(e))
    supervise()  # before the flow's imports (torch, Prefect), which the child does anyway
    from flows.confirm import confirm_spike

    result = run_flow(
        f"confirming {source.cause} for spike {source.spike_id} of {run_id}",
        confirm_spike,
        run_id,
        source.spike_id,
        repeats,
        cause,
        expected=(ConfirmUsageError,),
    )
    share = result.share
    console.print(
        f"spike {result.spike_id} of {run_id}, cause {result.cause}: [bold]{result.verdict}[/bold]"
        + (
            f", {share['point']:.0%} [{share['low']:.0%}, {share['high']:.0%}] removed"
            if share
            else ""
        )
        + f" — {result.reason}"
    )
    if print_page:
        print(result.report)
    return result.exit_code
