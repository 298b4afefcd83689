"""flows.observed: the run.json of a window imported from Prometheus. The whole flow against a
real Prometheus server is in tests/e2e/test_agent_e2e.py (CI) and test_observed_incident.py."""

from collectors.prometheus_range import PulledRange, RangeRequest
from flows.manifest import RunManifest
from flows.observed import observed_manifest


def test_an_observed_window_is_a_run_whose_clock_starts_at_from(tmp_path):
    req = RangeRequest("http://prom:9090", 1000.0, 1900.0, 15.0, '{job="vllm"}')
    pulled = PulledRange(rows=12, series=3, names=["vllm:num_requests_running"], selectors=["s"])
    manifest = observed_manifest("r-1", req, pulled)
    assert manifest.kind == "observed" and manifest.faults == [] and manifest.warmup_s == 0.0
    assert manifest.load_started_ns == 1000 * 10**9 and manifest.duration_s == 900.0
    assert manifest.engine == {
        "kind": "observed",
        "prometheus": "http://prom:9090",
        "selectors": ["s"],
        "step_s": 15.0,
    }
    assert manifest.command == (
        "spikelens incident --prometheus http://prom:9090 --from 1000.000 --to 1900.000"
        " --step 15 --match '{job=\"vllm\"}'"
    )
    manifest.write(tmp_path)
    assert RunManifest.read(tmp_path).extra["prometheus"]["series"] == 3


def test_the_detector_asked_for_is_recorded_as_a_scenarios_would_be():
    req = RangeRequest("http://prom:9090", 1000.0, 1900.0, 15.0, None)
    pulled = PulledRange(rows=1, series=1, names=["x"], selectors=["s"])
    assert observed_manifest("r-1", req, pulled).scenario == {}
    thorough = observed_manifest("r-1", req, pulled, "thorough")
    assert thorough.scenario == {"detector": "thorough"}
    assert thorough.command.endswith(" --step 15 --detector thorough")
