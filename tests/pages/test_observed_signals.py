"""pages.observed_signals, and the incident page of a run imported from Prometheus."""

from pages.incident import build_incident_context
from pages.observed_signals import signal_coverage
from rca.analyze import analyze_run
from templates.render import render_incident
from tests.support.observed_run import observed_run
from warehouse.ingest import ingest_run


def test_each_family_of_signals_says_what_it_can_or_cannot_tell():
    lines = signal_coverage(
        [
            "vllm:inter_token_latency_seconds_bucket",
            "vllm:e2e_request_latency_seconds_bucket",
            "vllm:num_requests_running",
            "python_gc_collections_total",
        ]
    )
    assert lines[0].startswith("latency: ITL from vllm:inter_token_latency_seconds; E2E from")
    assert "TTFT" not in lines[0]
    assert lines[1].startswith("can tell load")
    assert lines[2].startswith("cannot tell memory (KV cache)")
    assert lines[3].startswith("can tell memory (GC)")
    assert lines[4].startswith("cannot tell host")
    assert lines[-1].startswith("cannot tell client or network")


def test_no_latency_histogram_means_no_spike_can_be_found():
    assert (
        signal_coverage([])[0] == "latency: no engine latency histogram, so no spike can be found"
    )


def test_an_observed_runs_page_charts_its_histograms_and_offers_no_confirm(tmp_path):
    db = tmp_path / "w.duckdb"
    ingest_run(db, observed_run(tmp_path / "runs"))
    analyze_run(db, "obs-1")
    ctx = build_incident_context(db, "obs-1")
    assert ctx.observed and ctx.signal_coverage == signal_coverage(
        [
            "vllm:inter_token_latency_seconds_bucket",
            "vllm:num_requests_running",
            "vllm:generation_tokens_total",
        ]
    )
    assert sum(w.itl_p99_ms is not None for w in ctx.windows) >= 30
    html = render_incident(ctx, tmp_path / "page").read_text()
    assert 'id="signal-coverage"' in html and "cannot tell host" in html
    assert "spikelens confirm obs-1" not in html and "holds no recorded requests" in html
