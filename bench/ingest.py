"""Benchmark: rows per second of warehouse.ingest.ingest_run on a large synthetic run directory.

Writes a run directory with N token rows (and proportional requests/steps/gc rows), ingests it
twice into a fresh DuckDB file (the second time replaces the first: delete + insert), and prints
JSON: rows, seconds and rows/s for each pass, plus the Parquet read time alone.

    .venv/bin/python bench/ingest.py --tokens 2000000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from warehouse.ingest import ingest_run

T0 = 1_800_000_000_000_000_000


def write_run(run_dir: Path, n_tokens: int, seed: int = 0) -> dict[str, int]:
    """A run directory with n_tokens chunks of 64-token requests; returns rows per file."""
    rng = np.random.default_rng(seed)
    n_req = max(1, n_tokens // 64)
    n_steps = max(1, n_tokens // 16)
    rid = pa.array([f"r{i:08d}" for i in range(n_req)])
    sent = T0 + np.sort(rng.integers(0, 600_000_000_000, n_req))
    requests = pa.table(
        {
            "request_id": rid,
            "user": pa.array(["u1"] * n_req),
            "phase": pa.array(["measure"] * n_req),
            "intended_send_ns": sent,
            "sent_ns": sent,
            "first_token_ns": sent + 20_000_000,
            "done_ns": sent + 900_000_000,
            "prompt_tokens": rng.integers(16, 512, n_req),
            "output_tokens": np.full(n_req, 64),
            "status": pa.array(["ok"] * n_req),
            "error": pa.nulls(n_req, pa.string()),
            "temperature": np.full(n_req, 0.8),
        }
    )
    tok_req = np.repeat(np.arange(n_req), 64)[:n_tokens]
    tokens = pa.table(
        {
            "request_id": rid.take(pa.array(tok_req)),
            "index": np.tile(np.arange(64, dtype=np.int32), n_req)[:n_tokens],
            "arrival_ns": sent[tok_req] + np.tile(np.arange(64), n_req)[:n_tokens] * 14_000_000,
            "n_tokens": np.ones(n_tokens, dtype=np.int32),
        }
    )
    start = T0 + np.arange(n_steps, dtype=np.int64) * 14_000_000
    steps = pa.table(
        {
            "step": np.arange(n_steps),
            "rank": np.zeros(n_steps, dtype=np.int32),
            "start_ns": start,
            "end_ns": start + 13_000_000,
            "batch_size": rng.integers(1, 32, n_steps, dtype=np.int32),
            "prefill_tokens": np.zeros(n_steps, dtype=np.int32),
            "decode_tokens": rng.integers(1, 32, n_steps, dtype=np.int32),
            **{
                c: rng.random(n_steps)
                for c in ("schedule_ms", "forward_ms", "penalty_ms", "sample_ms", "comm_ms")
            },
            "kv_blocks_used": rng.integers(0, 512, n_steps, dtype=np.int32),
            "kv_blocks_total": np.full(n_steps, 512, dtype=np.int32),
            "preempted": np.zeros(n_steps, dtype=np.int32),
            "waiting": np.zeros(n_steps, dtype=np.int32),
        }
    )
    n_gc = max(1, n_steps // 50)
    gc_start = np.sort(rng.choice(start, n_gc))
    gc = pa.table(
        {
            "pid": np.full(n_gc, 1, dtype=np.int32),
            "rank": np.zeros(n_gc, dtype=np.int32),
            "start_ns": gc_start,
            "end_ns": gc_start + 500_000,
            "generation": np.zeros(n_gc, dtype=np.int8),
            "collected": np.full(n_gc, 10),
        }
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(
        json.dumps({"run_id": run_dir.name, "load_started_ns": T0, "duration_s": 600.0})
    )
    rows = {}
    for name, table in (("requests", requests), ("tokens", tokens), ("steps", steps), ("gc", gc)):
        pq.write_table(table, run_dir / f"{name}.parquet")
        rows[name] = table.num_rows
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokens", type=int, default=2_000_000, help="token rows (other files scale with it)"
    )
    args = parser.parse_args()
    if args.tokens < 64:
        parser.error(f"--tokens must be >= 64, got {args.tokens}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = write_run(root / "bench-run", args.tokens)
        total = sum(rows.values())
        t = time.perf_counter()
        for name in rows:
            pq.read_table(root / "bench-run" / f"{name}.parquet")
        read_s = time.perf_counter() - t
        passes = []
        for label in ("first", "replace"):
            t, cpu = time.perf_counter(), time.process_time()
            ingest_run(root / "w.duckdb", root / "bench-run")
            s, cpu_s = time.perf_counter() - t, time.process_time() - cpu
            # CPU seconds (all threads of this process) say what the work costs when the wall clock
            # is inflated by other processes on a shared box.
            passes.append(
                {
                    "pass": label,
                    "seconds": round(s, 3),
                    "rows_per_s": round(total / s),
                    "cpu_seconds": round(cpu_s, 3),
                    "rows_per_cpu_s": round(total / cpu_s),
                }
            )
    # The load average says how much of the machine the figure had (shared 2-core boxes vary 3x).
    print(
        json.dumps(
            {
                "rows": rows,
                "total_rows": total,
                "parquet_read_s": round(read_s, 3),
                "passes": passes,
                "cpus": os.cpu_count(),
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
