"""spikelens flows: the only place that knows the order of things.

Importing this package prepares Prefect's environment before Prefect itself is imported anywhere
in the process: its state lives under the project's state directory, analytics and telemetry are
off (they try to reach the internet and log `database is locked` noise), and the ephemeral
server gets a startup timeout that a cold start on 2 cores actually meets (~15 s measured).
"""

from flows.prefect_env import configure_prefect_env

configure_prefect_env()
