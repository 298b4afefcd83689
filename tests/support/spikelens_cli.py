"""Running the `spikelens` CLI from end-to-end tests as a user does: a subprocess with its own
state home, sharing the suite's Prefect database (a cold ephemeral server costs ~15 s more)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cli_env(home: Path) -> dict[str, str]:
    """The environment of a CLI run whose state (runs, warehouse, reports) lives in `home`."""
    return {
        **os.environ,
        "SPIKELENS_HOME": str(home),
        "PREFECT_HOME": str(Path(os.environ["SPIKELENS_HOME"]) / "prefect"),
    }


def run_cli(args: list[str], home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`spikelens ARGS` to its end, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        env=cli_env(home),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
