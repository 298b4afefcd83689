"""Test-wide setup: state (warehouse, Prefect home, runs) goes under .spikelens/test, never the
user's own state directory. Set before `flows` is imported, since importing it configures Prefect."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("SPIKELENS_HOME", str(REPO / ".spikelens" / "test"))


# --- simulated run directories (tests/warehouse/runbuilder.py), ingested: rca and reports tests ---
import sys  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "warehouse"))


@pytest.fixture(scope="module")
def warehouse_with(tmp_path_factory):
    """warehouse_with(**SimSpec fields) → (db_path, run_id) of that run, ingested; cached per module."""
    from runbuilder import SimSpec, write_run

    from warehouse.ingest import ingest_run

    root = tmp_path_factory.mktemp("rca")
    db = root / "w.duckdb"
    made = {}

    def build(**fields):
        key = tuple(sorted(fields.items()))
        if key not in made:
            spec = SimSpec(run_id=f"sim-{len(made)}", **fields)
            ingest_run(db, write_run(root / "runs", spec))
            made[key] = spec.run_id
        return db, made[key]
    return build
