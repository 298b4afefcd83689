"""run.json: the one-row description of a run (docs/design.md "Files in a run directory").

Written at the start of a run (status `running`) and rewritten at the end, so a run that was
killed still says what it was and that it never finished.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def new_run_id(kind: str, slug: str) -> str:
    """Sortable unique id, e.g. `20261130T020000Z-incident-gc-storm-3f2a`."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{kind}-{slug}-{secrets.token_hex(2)}"


def git_commit(cwd: Path | None = None) -> str | None:
    """The checkout's commit (None outside a git checkout): ties a run to the code that ran."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd or Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@dataclass
class RunManifest:
    run_id: str
    kind: str  # incident | nightly | sweep | evaluation | replay
    scenario_name: str
    scenario_path: str
    scenario: dict[str, Any]  # as given (after overrides)
    engine: dict[str, Any] | None
    target: str | None
    faults: list[dict[str, Any]]
    warmup_s: float
    duration_s: float
    command: str  # the command that reproduces the run
    started_ns: int = field(default_factory=time.time_ns)
    ended_ns: int | None = None
    load_started_ns: int | None = None
    status: str = "running"  # running | ok | invalid (client saturated) | failed
    client_valid: bool = True  # False: the load generator saturated; latencies are its own
    errors: list[str] = field(default_factory=list)
    host: str = field(default_factory=platform.node)
    git_commit: str | None = field(default_factory=git_commit)
    python: str = field(default_factory=platform.python_version)
    pid: int = field(default_factory=os.getpid)
    extra: dict[str, Any] = field(default_factory=dict)

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "run.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, default=str))
        tmp.replace(path)  # atomic: a reader never sees half a manifest
        return path

    @classmethod
    def read(cls, run_dir: Path) -> RunManifest:
        return cls(**json.loads((run_dir / "run.json").read_text()))
