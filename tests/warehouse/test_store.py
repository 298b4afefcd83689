"""warehouse.store.replace_run_rows: the one write path of derived per-run rows."""

import pyarrow as pa
import pytest

from warehouse.db import connect
from warehouse.store import replace_run_rows


def _verdicts(run_id, metrics):
    return pa.table(
        {
            "run_id": [run_id] * len(metrics),
            "scenario_name": ["s"] * len(metrics),
            "metric": metrics,
            "verdict": ["unchanged"] * len(metrics),
        }
    )


def _stored(conn):
    return conn.execute("SELECT run_id, metric FROM nightly_verdicts ORDER BY ALL").fetchall()


def test_replaces_only_that_runs_rows(tmp_path):
    with connect(tmp_path / "w.duckdb") as conn:
        replace_run_rows(conn, "a", {"nightly_verdicts": _verdicts("a", ["ttft_p50", "itl_p99"])})
        replace_run_rows(conn, "b", {"nightly_verdicts": _verdicts("b", ["ttft_p50"])})
        replace_run_rows(conn, "a", {"nightly_verdicts": _verdicts("a", ["e2e_p99"])})
        assert _stored(conn) == [("a", "e2e_p99"), ("b", "ttft_p50")]


def test_an_empty_table_only_deletes(tmp_path):
    with connect(tmp_path / "w.duckdb") as conn:
        replace_run_rows(conn, "a", {"nightly_verdicts": _verdicts("a", ["ttft_p50"])})
        replace_run_rows(conn, "a", {"nightly_verdicts": pa.Table.from_pylist([])})
        assert _stored(conn) == []


def test_rows_of_another_run_are_refused_and_nothing_changes(tmp_path):
    with connect(tmp_path / "w.duckdb") as conn:
        replace_run_rows(conn, "a", {"nightly_verdicts": _verdicts("a", ["ttft_p50"])})
        with pytest.raises(ValueError, match=r"carry run_id \['b'\], expected 'a'"):
            replace_run_rows(conn, "a", {"nightly_verdicts": _verdicts("b", ["itl_p99"])})
        assert _stored(conn) == [("a", "ttft_p50")]


def test_a_failed_insert_rolls_back_the_delete(tmp_path):
    with connect(tmp_path / "w.duckdb") as conn:
        replace_run_rows(conn, "a", {"nightly_verdicts": _verdicts("a", ["ttft_p50"])})
        bad = pa.table({"run_id": ["a"], "metric": ["x"], "no_such_column": [1]})
        with pytest.raises(Exception):
            replace_run_rows(conn, "a", {"nightly_verdicts": bad})
        assert _stored(conn) == [("a", "ttft_p50")]


def test_rows_keyed_by_another_column(tmp_path):
    from warehouse.store import replace_rows

    def steps(sweep, loads):
        return pa.table({"sweep_id": [sweep] * len(loads), "load": loads})

    with connect(tmp_path / "w.duckdb") as conn:
        conn.execute("CREATE TABLE sweep_steps (sweep_id VARCHAR NOT NULL, load DOUBLE)")
        replace_rows(conn, "sweep_id", "a", {"sweep_steps": steps("a", [1.0, 2.0])})
        replace_rows(conn, "sweep_id", "b", {"sweep_steps": steps("b", [4.0])})
        replace_rows(conn, "sweep_id", "a", {"sweep_steps": steps("a", [8.0])})
        rows = conn.execute("SELECT sweep_id, load FROM sweep_steps ORDER BY ALL").fetchall()
        assert rows == [("a", 8.0), ("b", 4.0)]
        with pytest.raises(ValueError, match="carry sweep_id"):
            replace_rows(conn, "sweep_id", "a", {"sweep_steps": steps("b", [1.0])})


def test_rows_keyed_by_several_columns(tmp_path):
    """A composite key (a confirmation: run, spike, cause) replaces only its own rows."""
    from warehouse.store import replace_rows

    key = ("run_id", "spike_id", "cause")
    with connect(tmp_path / "w.duckdb") as conn:

        def put(run, spike, cause, verdict):
            row = {"run_id": run, "spike_id": spike, "cause": cause, "verdict": verdict}
            replace_rows(conn, key, (run, spike, cause), {"confirmations": [row]})

        put("a", 1, "memory", "inconclusive")
        put("a", 1, "penalty", "not confirmed")
        put("a", 2, "memory", "confirmed")
        put("a", 1, "memory", "confirmed")
        rows = conn.execute(
            "SELECT run_id, spike_id, cause, verdict FROM confirmations ORDER BY ALL"
        ).fetchall()
        assert rows == [
            ("a", 1, "memory", "confirmed"),
            ("a", 1, "penalty", "not confirmed"),
            ("a", 2, "memory", "confirmed"),
        ]
        with pytest.raises(ValueError, match="carry spike_id \\[3\\], expected 1"):
            replace_rows(
                conn, key, ("a", 1, "memory"), {"confirmations": [{"run_id": "a", "spike_id": 3}]}
            )
        with pytest.raises(ValueError, match="needs 3 values"):
            replace_rows(conn, key, ("a", 1), {"confirmations": []})


def test_rows_as_dicts_take_the_tables_own_types(tmp_path):
    """A writer passes plain rows; their types come from the table (no restated schema)."""
    with connect(tmp_path / "w.duckdb") as conn:
        rows = [
            {
                "run_id": "a",
                "spike_id": 1,
                "metric": "itl_p99",
                "metrics": ["itl_p99", "e2e_p99"],
                "detector": "mad",
                "start_s": 1,
                "end_s": 2,
                "suppressed": None,
            },
            {
                "run_id": "a",
                "spike_id": 2,
                "metric": "ttft_p99",
                "detector": "mad",
                "start_s": 3.5,
                "end_s": 4.0,
            },
        ]
        replace_run_rows(conn, "a", {"spikes": rows, "analyses": [{"run_id": "a", "window_s": 1}]})
        assert conn.execute(
            "SELECT spike_id, metrics, start_s, suppressed FROM spikes ORDER BY spike_id"
        ).fetchall() == [(1, ["itl_p99", "e2e_p99"], 1.0, None), (2, None, 3.5, None)]
        # a column some row carries is NULL where another leaves it out; one no row carries gets
        # the table's default (analysed_at)
        assert conn.execute("SELECT analysed_at IS NOT NULL FROM analyses").fetchone() == (True,)
        replace_run_rows(conn, "a", {"spikes": []})
        assert conn.execute("SELECT count(*) FROM spikes").fetchone() == (0,)


def test_a_row_with_an_unknown_column_names_it(tmp_path):
    with (
        connect(tmp_path / "w.duckdb") as conn,
        pytest.raises(KeyError, match="table 'spikes' has no column bogus"),
    ):
        replace_run_rows(conn, "a", {"spikes": [{"run_id": "a", "bogus": 1}]})
