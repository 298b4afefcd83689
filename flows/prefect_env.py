"""Environment for an embedded (ephemeral) Prefect, set before `import prefect`.

Values already set by the user win (`setdefault`), so pointing spikelens at a real Prefect server
is just `PREFECT_API_URL=http://host:4200/api`.
"""

from __future__ import annotations

import os

from flows.paths import StatePaths

# Each setting with the reason it is here.
_DEFAULTS = {
    # Analytics and the telemetry heartbeat try to reach the internet and log lock errors.
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # A cold ephemeral server (new SQLite DB + migrations) takes ~15 s on 2 cores; default is 20 s.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    # Prefect's own INFO chatter drowns the CLI's progress display; flows log through our logger.
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # No UI is served by the ephemeral server; skip building it.
    "PREFECT_UI_ENABLED": "false",
    "PREFECT_SERVER_UI_ENABLED": "false",
}


def configure_prefect_env() -> None:
    """Put Prefect's state under the spikelens state directory and quiet it (idempotent)."""
    paths = StatePaths.from_env()
    if "PREFECT_HOME" not in os.environ:
        paths.prefect_home.mkdir(parents=True, exist_ok=True)
        os.environ["PREFECT_HOME"] = str(paths.prefect_home)
    for key, value in _DEFAULTS.items():
        os.environ.setdefault(key, value)
