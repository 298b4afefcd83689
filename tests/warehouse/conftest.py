"""Fixtures of the warehouse tests: run directories built by runbuilder (a small engine simulation)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runbuilder import SimSpec, write_run


@pytest.fixture
def make_run(tmp_path):
    """make_run(**SimSpec fields) → run directory under tmp_path/runs."""

    def make(**fields):
        return write_run(tmp_path / "runs", SimSpec(**fields))

    return make
