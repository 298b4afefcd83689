"""Fixtures of the rca tests: simulated run directories (tests/warehouse/runbuilder.py), ingested."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "warehouse"))

from runbuilder import SimSpec, write_run  # noqa: E402

from warehouse.ingest import ingest_run  # noqa: E402


@pytest.fixture(scope="module")
def warehouse_with(tmp_path_factory):
    """warehouse_with(**SimSpec fields) → (db_path, run_id) of that run, ingested; cached per module."""
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
