"""The JSON file the runner hands to the Locust subprocess (path in $SPIKELENS_LOADGEN_CONFIG).

Why a file and not Locust's CLI options: the workload and shape are nested structures that
Locust's flat options cannot carry, and one file keeps master and workers on the same settings.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from loadgen.errors import SpecError
from loadgen.spec import LoadSpec, WorkloadSpec
from spikelens_common.config_keys import strict_keys

CONFIG_ENV = "SPIKELENS_LOADGEN_CONFIG"
# The API key travels in the environment, never in the config file kept in the run directory.
API_KEY_ENV = "SPIKELENS_LOADGEN_API_KEY"
# The line the Locust process prints when its clock starts; the runner derives load start from it.
START_MARKER = "SPIKELENS_LOADGEN_START_NS"


@dataclass
class LocustConfig:
    """Everything the Locust processes of one run read at start (master and workers alike),
    written by the runner from `LocustRunOptions` and read by loadgen/locustfile.py."""

    parts_dir: str  # where each Locust process writes its requests/tokens parts
    run_tag: str  # prefix of every X-Request-Id, so ids are unique across runs
    warmup_s: float  # first seconds of load recorded with phase 'warmup'
    duration_s: float  # measured load after warm-up; the test stops at warmup_s + duration_s
    seed: int  # run seed (the workload's own seed overrides it for the draws)
    workload: dict = field(default_factory=dict)  # WorkloadSpec.to_dict()
    load: dict = field(default_factory=dict)  # LoadSpec.to_dict()
    model_name: str = "spikelens"  # `model` field of every request body
    tokenizer_path: str | None = None  # tokenizers JSON: exact prompt token counts
    endpoint: str = "chat"  # chat | completions
    request_timeout_s: float = 600.0  # geventhttpclient network timeout (between bytes)
    # 'line': read the body a line at a time off the socket buffer (cheap, exact arrival times);
    # 'byte': Locust's iter_content(chunk_size=1) (the documented way; one recv per byte)
    read_mode: str = "line"
    ignore_eos: bool = True  # send vLLM's ignore_eos (exact output lengths); False for strict APIs
    faults: list = field(default_factory=list)  # loadgen-owned faults, TrafficFault.to_dict()
    workers: int = 0  # Locust worker processes (0: one process, no master)
    replay_path: str | None = None  # replay shape: the normalised trace (replay.write_normalised)
    # ErrorGuardConfig fields: stop the load early when it is mostly errors (None: never stop)
    error_guard: dict | None = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.read_mode not in ("line", "byte"):
            raise SpecError(f"read_mode must be 'line' or 'byte', got {self.read_mode!r}")
        if self.endpoint not in ("chat", "completions"):
            raise SpecError(f"endpoint must be 'chat' or 'completions', got {self.endpoint!r}")

    def workload_spec(self) -> WorkloadSpec:
        return WorkloadSpec.from_dict(self.workload)

    def load_spec(self) -> LoadSpec:
        return LoadSpec.from_dict(self.load)

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2))
        return path

    @classmethod
    def read(cls, path: str | Path) -> LocustConfig:
        data = json.loads(Path(path).read_text())
        strict_keys(
            data,
            (f.name for f in dataclasses.fields(cls)),
            str(path),
            error=SpecError,
            message="{where}: unknown key '{key}'",
            sort_unknown=True,
        )
        return cls(**data)
