"""What more than one side of a run needs: the engine, loadgen, the collectors and the injectors
import it, and it imports nothing else of spikelens (tests/test_layout.py checks the arrows).

Why a package of its own: what two sides share must not live inside either (`engine` would drag
the engine into the Locust process, `loadgen` gevent into the server), and a side importing
another sideways is how the run half tangled. Modules import the standard library and, where
they must, the distribution's dependencies (pyarrow, httpx, prometheus_client); importing one
never starts a thread or touches a file.

- `socket_clock`: kernel receive timestamps of TCP sockets (``SO_TIMESTAMPNS``).
- `config_keys`: the "unknown key" check of every config mapping.
- `fault_catalogue`: every fault kind, its cause, who applies it on which runtime, its params.
- `fault_params`: the params dataclass of every kind (per applier), with defaults and ranges.
- `fault_spec`: a scheduled fault as a scenario writes it, and the fault list's shape check.
- `ground_truth`: the schema and the writer of the injected windows (`faults*.parquet`).
- `metrics_scraper`: Prometheus /metrics scrapes into metrics.parquet (collectors for an engine
  spikelens starts, loadgen for a target).
"""
