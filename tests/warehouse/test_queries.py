"""warehouse.queries: the .sql queries checked against numpy on the same files."""

import itertools
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.db import connect
from warehouse.ingest import ingest_run
from warehouse.queries import parameters, query

T0 = 1_800_000_000_000_000_000
RUN_ID = "20261201T000000Z-test-0001"


@pytest.fixture
def gc_run(tmp_path, make_run):
    run_dir = make_run(
        incident="gc", duration_s=10.0, incident_start_s=4.0, incident_duration_s=3.0
    )
    db_path = tmp_path / "w.duckdb"
    ingest_run(db_path, run_dir)
    conn = connect(db_path)
    yield conn, run_dir
    conn.close()


def _by_window(ts_ns: np.ndarray, values: np.ndarray, window_s: float, n: int) -> list[np.ndarray]:
    w = np.floor((ts_ns - T0) / (window_s * 1e9)).astype(np.int64)
    return [values[(w == i)] for i in range(n)]


def test_windows_count_an_open_loops_requests_by_their_scheduled_time(tmp_path, make_run):
    """`scheduled`: open-loop requests in the window their schedule gave them, even when the
    engine's lateness sent them in a later one."""
    run_dir = make_run(duration_s=10.0)
    path = run_dir / "requests.parquet"
    req = pq.read_table(path).to_pydict()
    late_ns = 1_500_000_000  # every request sent 1.5 s after its schedule
    req["user"] = ["w0-open"] * len(req["user"])  # loadgen.locustfile's open-loop user
    req["intended_send_ns"] = [s - late_ns for s in req["sent_ns"]]
    pq.write_table(pa.Table.from_pydict(req, schema=pq.read_schema(path)), path)
    ingest_run(tmp_path / "w.duckdb", run_dir)
    with connect(tmp_path / "w.duckdb") as conn:
        rows = query(conn, "windows", run_id=RUN_ID, window_s=1.0)
    intended = np.array(req["intended_send_ns"], dtype=np.int64)
    measured = np.array(req["phase"]) == "measure"
    when = _by_window(intended[measured], intended[measured], 1.0, len(rows))
    assert [r["scheduled"] for r in rows] == [len(x) for x in when]
    assert sum(r["scheduled"] for r in rows) > 0


@pytest.mark.parametrize("window_s", [1.0, 0.5])
def test_windows_match_numpy(gc_run, window_s):
    conn, run_dir = gc_run
    rows = query(conn, "windows", run_id=RUN_ID, window_s=window_s)
    n = int(np.ceil(10.0 / window_s))
    assert [r["window"] for r in rows] == list(range(n))

    req = pq.read_table(run_dir / "requests.parquet").to_pydict()
    measured = {rid for rid, ph in zip(req["request_id"], req["phase"]) if ph == "measure"}
    tok = pq.read_table(run_dir / "tokens.parquet").to_pydict()
    chunks: dict = {}
    for rid, idx, t in zip(tok["request_id"], tok["index"], tok["arrival_ns"]):
        if rid in measured:
            chunks.setdefault(rid, []).append((idx, t))
    gap_t, gap_v = [], []
    for seq in chunks.values():
        seq.sort()
        for (_, a), (_, b) in itertools.pairwise(seq):
            gap_t.append(b)
            gap_v.append((b - a) / 1e6)
    gap_t, gap_v = np.array(gap_t), np.array(gap_v)
    keep = gap_t >= T0
    itl = _by_window(gap_t[keep], gap_v[keep], window_s, n)

    sent = np.array(req["sent_ns"], dtype=np.int64)
    first = np.array(req["first_token_ns"], dtype=np.int64)
    phase = np.array(req["phase"])
    m = (phase == "measure") & (first >= T0)
    ttft = _by_window(first[m], (first[m] - sent[m]) / 1e6, window_s, n)

    prompts = np.array(req["prompt_tokens"], dtype=np.float64)
    p = (phase == "measure") & (sent >= T0)
    sent_prompts = _by_window(sent[p], prompts[p], window_s, n)
    asked = _by_window(sent[p], prompts[p] + np.array(req["max_tokens"])[p], window_s, n)
    assert not any(u.endswith("open") for u in req["user"])  # a closed loop: nothing scheduled

    for i, row in enumerate(rows):
        assert row["arrivals"] == len(sent_prompts[i]) and row["scheduled"] == 0
        if len(sent_prompts[i]):
            assert row["prompt_tokens_mean"] == pytest.approx(sent_prompts[i].mean(), rel=1e-9)
            assert row["asked_tokens_mean"] == pytest.approx(asked[i].mean(), rel=1e-9)
        assert row["itl_n"] == len(itl[i])
        assert row["itl_p99_ms"] == pytest.approx(np.quantile(itl[i], 0.99), rel=1e-9)
        assert row["itl_p50_ms"] == pytest.approx(np.quantile(itl[i], 0.5), rel=1e-9)
        assert row["ttft_n"] == len(ttft[i])
        if len(ttft[i]):
            assert row["ttft_p99_ms"] == pytest.approx(np.quantile(ttft[i], 0.99), rel=1e-9)
        else:
            assert row["ttft_p99_ms"] is None


def test_step_stages_gc_overlap_matches_files(gc_run):
    conn, run_dir = gc_run
    steps = pq.read_table(run_dir / "steps.parquet").to_pydict()
    gcs = pq.read_table(run_dir / "gc.parquet").to_pydict()
    starts, ends = np.array(steps["start_ns"]), np.array(steps["end_ns"])
    overlap = np.zeros(len(starts))
    for gs, ge in zip(gcs["start_ns"], gcs["end_ns"]):
        overlap += np.clip(np.minimum(ends, ge) - np.maximum(starts, gs), 0, None) / 1e6
    w = np.floor((ends - T0) / 1e9).astype(np.int64)
    rows = query(conn, "step_stages", run_id=RUN_ID, window_s=1.0)
    for row in rows:
        sel = w == row["window"]
        assert row["steps"] == int(sel.sum())
        assert row["gc_ms_total"] == pytest.approx(overlap[sel].sum(), abs=1e-6)
        assert row["step_mean_ms"] == pytest.approx(((ends - starts)[sel] / 1e6).mean(), rel=1e-9)
    in_storm = [r for r in rows if 4 <= r["window"] < 7]
    assert all(r["gc_ms_total"] > 100 for r in in_storm)  # pauses of ~150 ms landed in steps


def test_faults_in_seconds_from_load_start(gc_run):
    conn, _ = gc_run
    assert query(conn, "faults", run_id=RUN_ID)[0] | {"params": None} == {
        "kind": "memory.gc_storm",
        "cause": "memory",
        "start_s": 4.0,
        "end_s": 7.0,
        "params": None,
        "source_file": "faults.parquet",
    }


def test_query_parameter_errors_name_the_query(gc_run):
    conn, _ = gc_run
    assert parameters("windows") == {"run_id", "window_s"}
    with pytest.raises(TypeError, match=r"'windows'.*missing \['window_s'\]"):
        query(conn, "windows", run_id=RUN_ID)
    with pytest.raises(TypeError, match=r"unexpected \['bogus'\]"):
        query(conn, "totals", run_id=RUN_ID, bogus=1)
    with pytest.raises(KeyError, match="unknown query 'nope'"):
        query(conn, "nope")


def test_nvml_windows_take_the_latest_sample_before_each_window_end(tmp_path, make_run):
    import pyarrow as pa

    # GPU 0 samples every 0.4 s from t=-1 s; GPU 1 only once, at t=2.5 s.
    ts0 = T0 + np.arange(-1_000_000_000, 6_000_000_000, 400_000_000)
    nvml = pa.table(
        {
            "ts_ns": np.concatenate([ts0, [T0 + 2_500_000_000]]),
            "gpu": np.array([0] * len(ts0) + [1], dtype=np.int32),
            "util_gpu": np.concatenate([np.arange(len(ts0), dtype=float), [99.0]]),
            "mem_used": np.full(len(ts0) + 1, 2),
            "mem_total": np.full(len(ts0) + 1, 8),
        }
    )
    run_dir = make_run(duration_s=5.0)
    pq.write_table(nvml, run_dir / "nvml.parquet")
    db_path = tmp_path / "w.duckdb"
    ingest_run(db_path, run_dir)
    conn = connect(db_path)
    rows = query(conn, "nvml_windows", run_id=RUN_ID, window_s=1.0)
    conn.close()
    assert len(rows) == 10  # 5 windows x 2 GPUs
    for r in rows:
        end = T0 + (r["window"] + 1) * 1_000_000_000
        if r["gpu"] == 0:
            i = int(np.searchsorted(ts0, end, side="right")) - 1
            assert r["util_gpu"] == float(i) and r["sample_age_ms"] == (end - ts0[i]) / 1e6
            assert r["mem_fraction"] == 0.25
        else:
            assert r["util_gpu"] == (99.0 if r["window"] >= 2 else None)


def test_history_windows_match_a_direct_estimate(gc_run):
    conn, run_dir = gc_run
    e = pq.read_table(run_dir / "engine_requests.parquet").to_pydict()
    first, done = (
        np.array(e["first_token_ns"], dtype=np.int64),
        np.array(e["done_ns"], dtype=np.int64),
    )
    prompt, out = (
        np.array(e["prompt_tokens"], dtype=float),
        np.array(e["output_tokens"], dtype=float),
    )
    rows = query(conn, "history_windows", run_id=RUN_ID, window_s=1.0)
    assert [r["window"] for r in rows] == list(range(10))
    for r in rows:
        mid = T0 + r["window"] * 1_000_000_000 + 500_000_000
        live = (first <= mid) & (mid < done)
        expected = (
            prompt[live] + out[live] * (mid - first[live]) / (done[live] - first[live])
        ).sum()
        assert r["running"] == int(live.sum()) and r["history_tokens"] == pytest.approx(expected)


def test_run_t0_is_load_start_else_first_measured_send(gc_run):
    """The one definition of a run's time zero (macros.sql's run_t0)."""
    conn, run_dir = gc_run
    run_id = run_dir.name
    load_started, first_send = conn.execute(
        "SELECT r.load_started_ns, (SELECT min(sent_ns) FROM requests q WHERE q.run_id = r.run_id "
        "AND coalesce(q.phase, 'measure') = 'measure') FROM runs r WHERE run_id = ?",
        [run_id],
    ).fetchone()
    assert load_started is not None and first_send > load_started
    assert conn.execute("SELECT run_t0(?)", [run_id]).fetchone()[0] == load_started
    conn.execute("UPDATE runs SET load_started_ns = NULL WHERE run_id = ?", [run_id])
    assert conn.execute("SELECT run_t0(?)", [run_id]).fetchone()[0] == first_send
    assert conn.execute("SELECT run_t0('no-such-run')").fetchone()[0] is None


def _collector_run(tmp_path, make_run, incident, **extra):
    run_dir = make_run(
        incident=incident,
        duration_s=6.0,
        incident_start_s=2.0,
        incident_duration_s=2.0,
        collectors=True,
        **extra,
    )
    ingest_run(tmp_path / "c.duckdb", run_dir)
    return connect(tmp_path / "c.duckdb")


def test_process_stack_windows_shares_by_region(tmp_path, make_run):
    conn = _collector_run(tmp_path, make_run, "penalty")
    rows = query(conn, "process_stack_windows", run_id=RUN_ID, window_s=1.0)
    conn.close()
    share = {(r["window"], r["region"]): r for r in rows}
    # two threads: the main one idle throughout, the step loop 1 slot in 10 (4 in 10 during it)
    assert share[(0, "sampling_penalties")]["share"] == pytest.approx(0.05)
    assert share[(0, "sampling_penalties")]["busy_share"] == pytest.approx(1 / 8)
    assert share[(2, "sampling_penalties")]["share"] == pytest.approx(0.2)
    assert share[(2, "sampling_penalties")]["busy_share"] == pytest.approx(4 / 9)
    assert (
        share[(0, "idle")]["share"] == pytest.approx(0.6)
        and share[(0, "idle")]["busy_share"] is None
    )
    assert {r["window"] for r in rows} == set(range(6)) and {r["role"] for r in rows} == {"engine"}
    assert sum(r["sampled_ms"] for r in rows if r["window"] == 3) == pytest.approx(2000.0)


def test_gc_pauses_count_as_gc_in_stacks_and_per_process(tmp_path, make_run):
    conn = _collector_run(tmp_path, make_run, "gc", magnitude=100.0)
    stacks = query(conn, "process_stack_windows", run_id=RUN_ID, window_s=1.0)
    pauses = query(conn, "process_gc_windows", run_id=RUN_ID, window_s=1.0)
    conn.close()
    by_w = {r["window"]: r for r in pauses}
    assert by_w[2]["pause_ms"] == pytest.approx(200.0) and by_w[2]["full_collections"] == 2
    assert by_w[2]["max_pause_ms"] == pytest.approx(100.0) and by_w[2]["role"] == "engine"
    assert by_w[0]["pause_ms"] == pytest.approx(2.0) and by_w[0]["collections"] == 10
    gc_share = {r["window"]: r["sampled_ms"] for r in stacks if r["region"] == "gc"}
    # only the step loop's non-idle slots overlapping a pause become gc (the idle main thread does not)
    assert 100 < gc_share[2] <= 200 and gc_share.get(0, 0) < 5


def test_process_cpu_windows_rates(tmp_path, make_run):
    conn = _collector_run(tmp_path, make_run, "host")
    rows = {r["window"]: r for r in query(conn, "process_cpu_windows", run_id=RUN_ID, window_s=1.0)}
    conn.close()
    assert rows[0]["cpu_ms_per_s"] == pytest.approx(600.0) and rows[0][
        "runq_wait_ms_per_s"
    ] == pytest.approx(20.0)
    assert rows[2]["runq_wait_ms_per_s"] == pytest.approx(300.0)
    assert rows[2]["involuntary_switches_per_s"] == pytest.approx(500.0)
    assert rows[0]["involuntary_switches_per_s"] == pytest.approx(20.0) and rows[0]["ticks"] == 10


def _metrics_table():
    """4 scrapes a second of a histogram (buckets 0.01, 0.1, +Inf), a counter and a gauge."""
    rows = []
    for k in range(-4, 24):  # from 1 s before t0 to 6 s after
        ts = T0 + k * 250_000_000
        n = max(k + 4, 0)  # cumulative scrapes so far
        w = k // 4
        # window 2 observations land in the slow bucket, others in the fast one
        slow = sum(10 for j in range(-4, k + 1) if j // 4 == 2)
        fast = 10 * n - slow
        for le, v in (("0.01", fast), ("0.1", fast + slow), ("+Inf", fast + slow)):
            rows.append(
                {
                    "ts_ns": ts,
                    "name": "vllm:request_queue_time_seconds_bucket",
                    "labels": json.dumps({"le": le, "model_name": "m"}, sort_keys=True),
                    "value": float(v),
                }
            )
        rows.append(
            {
                "ts_ns": ts,
                "name": "vllm:num_preemptions_total",
                "labels": "{}",
                "value": float(3 * n),
            }
        )
        rows.append(
            {
                "ts_ns": ts,
                "name": "vllm:kv_cache_usage_perc",
                "labels": "{}",
                "value": 0.9 if w == 2 else 0.2,
            }
        )
    return pa.Table.from_pylist(rows)


def test_metric_histogram_quantiles_and_counter_rates(tmp_path, make_run):
    conn = _collector_run(
        tmp_path, make_run, None, extra_files={"metrics.parquet": _metrics_table()}
    )
    hist = {
        r["window"]: r for r in query(conn, "metric_histogram_windows", run_id=RUN_ID, window_s=1.0)
    }
    rates = query(conn, "metric_rate_windows", run_id=RUN_ID, window_s=1.0)
    conn.close()
    assert hist[0]["observations"] == 40 and hist[0]["labels"] == '{"model_name": "m"}'
    assert hist[0]["p50"] == pytest.approx(0.005) and hist[0]["p99"] == pytest.approx(0.0099)
    assert hist[2]["p50"] == pytest.approx(0.01 + 0.09 * 0.5) and hist[2]["p99"] == pytest.approx(
        0.01 + 0.09 * 0.99
    )
    counter = {r["window"]: r for r in rates if r["name"] == "vllm:num_preemptions_total"}
    gauge = {r["window"]: r for r in rates if r["name"] == "vllm:kv_cache_usage_perc"}
    assert counter[1]["kind"] == "counter" and counter[1]["rate_per_s"] == pytest.approx(12.0)
    assert gauge[2]["kind"] == "gauge" and gauge[2]["mean_value"] == pytest.approx(0.9)
    assert gauge[1]["max_value"] == pytest.approx(0.2) and gauge[1]["rate_per_s"] is None


def test_transit_windows_split_client_from_server_time(tmp_path, make_run):
    """Server stamps 1 ms inside the client's on each side before 5 s, 10 ms after: the gap
    (client − server) is 2 ms, then 20 ms, for TTFT and E2E alike. Times the engine also
    reported in the stream are not used beside its socket stamps."""
    run_dir = make_run(duration_s=10.0)
    req = pq.read_table(run_dir / "requests.parquet").to_pylist()
    rows = []
    for r in req:
        if r.get("first_token_ns") is None or r.get("done_ns") is None or r.get("sent_ns") is None:
            continue
        d = 1_000_000 if r["first_token_ns"] < T0 + 5_000_000_000 else 10_000_000
        rows.append(
            {
                "request_id": r["request_id"],
                "path": "/v1/completions",
                "status": 200,
                "streamed": True,
                "received_ns": r["sent_ns"] + d,
                "app_start_ns": r["sent_ns"] + d,
                "first_content_ns": r["first_token_ns"] - d,
                "done_ns": r["done_ns"] - d,
                "received_clock": "kernel",
            }
        )
    pq.write_table(pa.Table.from_pylist(rows), run_dir / "server_requests.parquet")
    reported = pq.read_table(run_dir / "requests.parquet")
    for name in ("reported_queue_ms", "reported_ttft_ms"):
        reported = reported.append_column(name, pa.array([500.0] * reported.num_rows))
    pq.write_table(reported, run_dir / "requests.parquet")
    db_path = tmp_path / "w.duckdb"
    ingest_run(db_path, run_dir)
    conn = connect(db_path)
    out = query(conn, "transit_windows", run_id=RUN_ID, window_s=1.0)
    conn.close()
    by_w = {r["window"]: r for r in out}
    assert all(r["reported_pairs"] == 0 for r in out)
    assert by_w[1]["ttft_gap_mean_ms"] == pytest.approx(2.0)
    assert by_w[7]["ttft_gap_mean_ms"] == pytest.approx(20.0)
    late = by_w[7]
    assert late["client_ttft_p99_ms"] - late["server_ttft_p99_ms"] == pytest.approx(20.0)
    assert late["ttft_pairs"] > 0
    assert late["merged_first_share"] is None  # the simulation records no arrival clock
    assert late["itl_pairs"] == 0 and late["server_itl_p99_ms"] is None  # no chunk stamps
    assert [r["window"] for r in out] == sorted(by_w)


def test_transit_windows_pair_each_gap_with_the_servers(tmp_path, make_run):
    """The server wrote each request's text at half the client's gaps: every window's client ITL
    p99 is twice the server's. A request whose server saw one chunk fewer is left unpaired."""
    run_dir = make_run(duration_s=10.0)
    chunks: dict[str, list[int]] = {}
    for t in sorted(
        pq.read_table(run_dir / "tokens.parquet").to_pylist(), key=lambda t: t["index"]
    ):
        if (t.get("n_tokens") or 1) > 0:
            chunks.setdefault(t["request_id"], []).append(t["arrival_ns"])
    ok = {r["request_id"]: r for r in pq.read_table(run_dir / "requests.parquet").to_pylist()}
    ids = [
        rid for rid in chunks if rid in ok and ok[rid]["status"] == "ok" and len(chunks[rid]) > 2
    ]
    rows = [
        {
            "request_id": rid,
            "status": 200,
            "streamed": True,
            "received_ns": ok[rid]["sent_ns"],
            "first_content_ns": chunks[rid][0],
            "done_ns": chunks[rid][-1],
            "content_ns": [chunks[rid][0] + (a - chunks[rid][0]) // 2 for a in chunks[rid]]
            if rid != ids[0]
            else chunks[rid][:-1],
        }
        for rid in ids
    ]
    pq.write_table(pa.Table.from_pylist(rows), run_dir / "server_requests.parquet")
    ingest_run(tmp_path / "w.duckdb", run_dir)
    conn = connect(tmp_path / "w.duckdb")
    out = query(conn, "transit_windows", run_id=RUN_ID, window_s=1.0)
    conn.close()
    paired = [r for r in out if r["itl_pairs"]]
    assert paired and all(
        r["client_itl_p99_ms"] == pytest.approx(2 * r["server_itl_p99_ms"], rel=1e-6)
        for r in paired
    )
    measured = [rid for rid in ids[1:] if ok[rid].get("phase", "measure") == "measure"]
    gaps = sum(a >= T0 for rid in measured for a in chunks[rid][1:])  # each later chunk ends one
    assert sum(r["itl_pairs"] for r in out) == gaps


def test_confirm_stretch_matches_the_requests_file(gc_run):
    """The trace's zero (first intended send), its length, and a stretch's median output of ok
    requests and arrivals per second, against the requests file."""
    conn, run_dir = gc_run
    req = pq.read_table(run_dir / "requests.parquet").to_pylist()
    row = query(conn, "confirm_stretch", run_id=RUN_ID, from_s=1.0, to_s=4.0)[0]
    sends = [r["intended_send_ns"] for r in req]
    assert row["load_started_ns"] == T0 and row["first_send_ns"] == min(sends)
    assert row["trace_end_s"] == pytest.approx((max(sends) - min(sends)) / 1e9)
    inside = [r for r in req if T0 + 1e9 <= r["intended_send_ns"] < T0 + 4e9]
    ok = [r["output_tokens"] for r in inside if r["status"] == "ok"]
    assert row["median_output_tokens"] == pytest.approx(float(np.median(ok)))
    assert row["arrivals_per_s"] == pytest.approx(len(inside) / 3.0)


def test_confirm_inflight_is_how_long_before_a_moment_its_oldest_open_request_was_meant_to_go(
    gc_run,
):
    conn, run_dir = gc_run
    req = pq.read_table(run_dir / "requests.parquet").to_pylist()
    for spike_s in (0.0, 2.5, 4.0):
        at = T0 + spike_s * 1e9
        open_ = [r["intended_send_ns"] for r in req if r["intended_send_ns"] < at < r["done_ns"]]
        expected = (at - min(open_)) / 1e9 if open_ else 0.0
        row = query(conn, "confirm_inflight", run_id=RUN_ID, spike_s=spike_s)[0]
        assert row["lead_s"] == pytest.approx(expected, abs=1e-6)
    assert query(conn, "confirm_inflight", run_id=RUN_ID, spike_s=2.5)[0]["lead_s"] > 0


def test_transit_windows_set_the_clients_times_against_those_the_engine_reported(tmp_path):
    """vLLM reported each request's queue time (2 ms), TTFT (8 ms) and mean ITL (3 ms), and no
    socket stamps exist: the engine's TTFT is 10 ms and its end of stream 10 + 3 × (outputs − 1);
    every TTFT pair is a reported one, and there are no ITL pairs (one mean gap per request)."""
    import pyarrow as pa

    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    run_dir = write_run(tmp_path / "runs", SimSpec(run_id="sim-reported", incident=None))
    requests = pq.read_table(run_dir / "requests.parquet")
    n = requests.num_rows
    for name, value in (
        ("reported_queue_ms", 2.0),
        ("reported_ttft_ms", 8.0),
        ("reported_mean_itl_ms", 3.0),
    ):
        requests = requests.append_column(name, pa.array([value] * n, pa.float64()))
    pq.write_table(requests, run_dir / "requests.parquet")
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    with connect(db, read_only=True) as conn:
        rows = query(conn, "transit_windows", run_id="sim-reported", window_s=1.0)
    ok = [r for r in requests.to_pylist() if r["status"] == "ok" and r.get("phase") == "measure"]
    longest = max(r["output_tokens"] for r in ok)
    assert rows and all(r["reported_pairs"] == r["ttft_pairs"] for r in rows)
    assert all(r["server_ttft_p99_ms"] == pytest.approx(10.0) for r in rows if r["ttft_pairs"])
    assert all(r["server_e2e_p99_ms"] <= 10.0 + 3.0 * (longest - 1) + 1e-9 for r in rows)
    assert sum(r["e2e_pairs"] for r in rows) <= len(ok)
    assert all(r["itl_pairs"] == 0 and r["server_itl_p99_ms"] is None for r in rows)
    assert all(r["client_ttft_p99_ms"] > r["server_ttft_p99_ms"] for r in rows if r["ttft_pairs"])


def test_cpu_steal_windows_share_of_wanted_time(tmp_path, make_run):
    conn = _collector_run(tmp_path, make_run, "steal", magnitude=0.4)
    rows = {r["window"]: r for r in query(conn, "cpu_steal_windows", run_id=RUN_ID, window_s=1.0)}
    conn.close()
    # busy half the time; of the time the two CPUs wanted to run, 0.5 % stolen, 40 % in 2 s .. 4 s
    assert set(rows) == set(range(6)) and all(r["cpus"] == 2 for r in rows.values())
    assert rows[0]["steal_share"] == pytest.approx(0.005, abs=1e-9)
    assert rows[2]["steal_share"] == pytest.approx(0.4) and rows[3]["steal_share"] == pytest.approx(
        0.4
    )
    assert rows[2]["busy_share"] == pytest.approx(0.5 * 0.6)
