"""The state directory follows SPIKELENS_HOME, and Prefect's home follows it."""

from pathlib import Path

from flows.paths import StatePaths


def test_state_paths_follow_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SPIKELENS_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SPIKELENS_DB", raising=False)
    p = StatePaths.from_env().ensure()
    assert p.home == tmp_path / "state"
    assert p.warehouse == tmp_path / "state" / "warehouse.duckdb"
    assert p.run_dir("r1") == tmp_path / "state" / "runs" / "r1"
    assert p.prefect_home.is_dir() and p.reports.is_dir()


def test_db_path_override(monkeypatch, tmp_path):
    monkeypatch.setenv("SPIKELENS_DB", str(tmp_path / "other.duckdb"))
    assert StatePaths.from_env().warehouse == Path(tmp_path / "other.duckdb")
