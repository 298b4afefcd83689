"""Fixtures of the warehouse tests: run directories built by runbuilder (a small engine simulation)."""

import pytest

from tests.support.runbuilder import SimSpec, write_run


@pytest.fixture
def make_run(tmp_path):
    """make_run(**SimSpec fields) → run directory under tmp_path/runs."""

    def make(**fields):
        return write_run(tmp_path / "runs", SimSpec(**fields))

    return make
