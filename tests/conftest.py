"""Test-wide setup: state (warehouse, Prefect home, runs) goes under .spikelens/test, never the
user's own state directory. Set before `flows` is imported, since importing it configures Prefect."""

import json
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("SPIKELENS_HOME", str(REPO / ".spikelens" / "test"))


def _write_hf_llama(folder: Path, max_position: int) -> Path:
    """A tiny random Llama (transformers) with the project tokenizer and a chat template."""
    transformers = pytest.importorskip("transformers")
    import torch

    from engine.tokenizer import DEFAULT_TOKENIZER_PATH

    cfg = transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_position,
        bos_token_id=0,
        eos_token_id=1,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
    shutil.copy(DEFAULT_TOKENIZER_PATH, folder / "tokenizer.json")
    template = (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    )
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {"bos_token": "<|bos|>", "eos_token": {"content": "<|eos|>"}, "chat_template": template}
        )
    )
    return folder


@pytest.fixture(scope="session")
def hf_llama_256(tmp_path_factory) -> Path:
    """A Hugging Face Llama checkpoint folder with max_position_embeddings=256 (built once)."""
    return _write_hf_llama(tmp_path_factory.mktemp("llama-256"), 256)


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
