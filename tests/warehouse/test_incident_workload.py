"""warehouse.incident_workload: the requests of an incident rebuilt from the engine's counters."""

import pytest

from tests.support.observed_run import Traffic, observed_run
from warehouse.db import connect
from warehouse.incident_workload import NoTrafficError, incident_requests
from warehouse.ingest import ingest_run


def _requests(tmp_path, **kw):
    db = tmp_path / "w.duckdb"
    ingest_run(db, observed_run(tmp_path / "runs", **kw))
    with connect(db, read_only=True) as conn:
        return incident_requests(conn, "obs-1", 1.0)


def test_requests_follow_the_counters_window_by_window(tmp_path):
    """3 requests a second finished, 9 in the spike (windows 20-25); each is sent evenly over its
    window, moved back by the window's mean E2E (0.5 s, 2 s in the spike)."""
    traffic = Traffic(calm=3, burst=9, prompt=64, output=32, e2e_s=(0.5, 2.0))
    requests = _requests(tmp_path, spike=(20, 26), traffic=traffic)
    expected = []
    for w in range(1, 40):  # window 0 has no scrape before it: no increase
        hot = 20 <= w < 26
        n, e2e = (9, 2.0) if hot else (3, 0.5)
        expected += [w - e2e + (i + 0.5) / n for i in range(n)]
    assert [r.t_s for r in requests] == pytest.approx(sorted(expected))
    assert {(r.prompt_tokens, r.output_tokens) for r in requests} == {(64, 32)}
    burst = [r for r in requests if 18 <= r.t_s < 24]
    assert len(burst) >= 54  # the spike's 54 requests (and the calm ones around them)


def test_without_request_counters_nothing_is_invented(tmp_path):
    with pytest.raises(NoTrafficError, match="vllm:request_success_total"):
        _requests(tmp_path)
