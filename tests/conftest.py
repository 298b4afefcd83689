"""Test-wide setup: state (warehouse, Prefect home, runs) goes under .spikelens/test, never the
user's own state directory. Set before `flows` is imported, since importing it configures Prefect."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Under pytest-xdist each worker gets its own state (its own Prefect database above all: two
# ephemeral servers on one SQLite file lock each other out).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
os.environ.setdefault(
    "SPIKELENS_HOME", str(REPO / ".spikelens" / ("test" if not _WORKER else f"test-{_WORKER}"))
)
# Prefect creates its home with a plain mkdir: in a fresh checkout its parent must exist first.
(Path(os.environ["SPIKELENS_HOME"]) / "prefect").mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="session")
def hf_llama_256(tmp_path_factory) -> Path:
    """A Hugging Face Llama checkpoint folder with max_position_embeddings=256 (built once)."""
    pytest.importorskip("transformers")
    from tests.support.hf_llama import save_tiny_llama

    return save_tiny_llama(
        tmp_path_factory.mktemp("llama-256"),
        {"bos_token": "<|bos|>", "eos_token": {"content": "<|eos|>"}},
        hidden_size=64,
        intermediate_size=128,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )


# --- simulated run directories (tests/support/runbuilder.py), ingested: rca and reports tests ---


@pytest.fixture(scope="module")
def warehouse_with(tmp_path_factory):
    """warehouse_with(**SimSpec fields) → (db_path, run_id) of that run, ingested; cached per module."""
    from tests.support.runbuilder import SimSpec, write_run
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
