"""What `run_scenario` hands loadgen (flows/run_scenario.py `_load_options`): one options object
built from the scenario and what was started, for each runtime; and what it records of the CPU
steal over the load (`_steal_cpus`, `_steal_record`)."""

import logging
import os
from pathlib import Path

from flows.fault_routing import route_faults
from flows.run_scenario import _load_options, _Serving, _steal_cpus, _steal_record
from flows.runtime import OurEngine, Target
from flows.scenario import parse_scenario

BASE = {"duration_s": 10, "warmup_s": 2, "seed": 7}
BURST = {"kind": "load.burst", "start_s": 1, "duration_s": 2, "params": {"factor": 2}}


def _serving(raw: dict, url: str, tmp_path: Path) -> _Serving:
    scenario = parse_scenario(raw)
    return _Serving(scenario, tmp_path, route_faults(scenario.faults, scenario.runtime), url=url)


def test_our_engine_is_driven_by_chat_with_its_own_model_id_and_no_scraping(tmp_path):
    serving = _serving({**BASE, "engine": {"model": "tiny"}}, "http://127.0.0.1:9", tmp_path)
    options = _load_options(serving.scenario, serving)
    assert (options.duration_s, options.warmup_s, options.seed) == (10, 2, 7)
    assert (options.model_name, options.endpoint, options.metrics_url) == (
        "spikelens",
        "chat",
        None,
    )
    assert options.tokenizer_path and Path(options.tokenizer_path).is_file()
    assert options.workload == serving.scenario.workload and options.api_key is None


def test_a_target_names_its_model_and_loadgen_scrapes_its_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIKELENS_API_KEY", "k")
    raw = {**BASE, "target": {"url": "http://h:1/", "model": "m"}, "faults": [BURST]}
    serving = _serving(raw, "http://h:1/", tmp_path)
    options = _load_options(serving.scenario, serving)
    assert (options.model_name, options.endpoint, options.api_key) == ("m", "completions", "k")
    assert options.metrics_url == "http://h:1/metrics" and options.tokenizer_path is None
    assert [f["kind"] for f in options.faults] == ["load.burst"]


def _steal(share: float, worst: float) -> dict:
    return {
        "available": True,
        "source": "/proc/stat",
        "cpus": [0],
        "seconds": 40.0,
        "share": share,
        "worst_second_share": worst,
        "worst_second_at_s": 12.0,
    }


def test_steal_is_measured_on_the_engines_pinned_cpus_else_on_ours():
    assert _steal_cpus({}) == sorted(os.sched_getaffinity(0))
    pinned = {"cpus": {"engine": [1, 0], "spikelens": [2], "source": "scenario"}}
    assert _steal_cpus(pinned) == [0, 1]


def test_steal_over_the_flag_is_said_as_the_run_ends(caplog):
    engine = parse_scenario({**BASE, "engine": {"model": "tiny"}}).runtime
    assert isinstance(engine, OurEngine)
    with caplog.at_level(logging.WARNING, logger="spikelens.progress"):
        quiet = _steal_record(_steal(0.01, 0.1), engine)
        assert not caplog.records
        loud = _steal_record(_steal(0.01, 0.3), engine)  # one bad second is enough
    assert (quiet["flagged"], loud["flagged"], loud["scope"]) == (False, True, "engine")
    assert "took 1 % of CPUs 0 during the measured load" in caplog.text
    assert "30 % in its worst second, at 12 s" in caplog.text
    target = parse_scenario({**BASE, "target": {"url": "http://h:1/", "model": "m"}}).runtime
    assert isinstance(target, Target)
    assert _steal_record(_steal(0.2, 0.2), target)["scope"] == "load generator"
    unmeasured = {"available": False, "reason": "OSError: no /proc"}
    assert _steal_record(unmeasured, engine) == {**unmeasured, "scope": "engine"}
