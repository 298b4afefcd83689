"""flows.fault_routing: the fault list routed once, by the catalogue and the scenario's runtime."""

import pytest

from engine.config import EngineConfig
from flows.fault_routing import FaultRouteError, check_params, route_faults, runtime_key
from flows.runtime import OurEngine, Target, VllmEngine
from flows.vllm_config import VllmConfig
from spikelens_common.fault_catalogue import Applier, Runtime
from spikelens_common.fault_spec import parse_fault_specs

FAULTS = parse_fault_specs(
    [
        {"kind": "memory.gc_storm", "start_s": 1, "duration_s": 2},
        {"kind": "load.burst", "start_s": 2, "duration_s": 1, "params": {"factor": 2}},
        {"kind": "memory.kv_pressure", "start_s": 3, "duration_s": 1},
        {"kind": "network.delay", "start_s": 4, "duration_s": 1},
        {"kind": "host.cpu_contention", "start_s": 5, "duration_s": 1},
    ]
)
OURS = OurEngine(EngineConfig.from_dict({"model": "tiny"}))


def _vllm(tmp_path) -> VllmEngine:
    (tmp_path / "config.json").write_text("{}")
    return VllmEngine(VllmConfig.from_dict({"model": str(tmp_path)}))


def _kinds(routes, applier):
    return [f["kind"] for f in routes.of(applier)]


def test_on_our_engine_the_engine_applies_its_kinds():
    routes = route_faults(FAULTS, OURS)
    assert _kinds(routes, Applier.ENGINE) == ["memory.gc_storm", "memory.kv_pressure"]
    assert _kinds(routes, Applier.LOADGEN) == ["load.burst"]
    assert _kinds(routes, Applier.PROXY) == ["network.delay"]
    assert _kinds(routes, Applier.HOGS) == ["host.cpu_contention"]
    assert routes.of(Applier.GC_HOOK) == []
    assert routes.of(Applier.LOADGEN)[0] == {
        "kind": "load.burst",
        "start_s": 2.0,
        "duration_s": 1.0,
        "params": {"factor": 2},
    }


def test_on_vllm_the_gc_hook_and_loadgen_take_the_memory_kinds(tmp_path):
    routes = route_faults(FAULTS, _vllm(tmp_path))
    assert routes.of(Applier.ENGINE) == []
    assert _kinds(routes, Applier.GC_HOOK) == ["memory.gc_storm"]
    assert _kinds(routes, Applier.LOADGEN) == ["load.burst", "memory.kv_pressure"]


def test_a_kind_the_runtime_cannot_get_names_its_index():
    target = Target("http://127.0.0.1:1")
    assert runtime_key(target) == Runtime.TARGET
    with pytest.raises(FaultRouteError) as err:
        route_faults(FAULTS[1:], target)
    assert err.value.index == 1 and err.value.field == "faults[1].kind"
    assert "'memory.kv_pressure' cannot be applied to a `target:`" in str(err.value)
    assert "load.burst, network.delay" in str(err.value)


def test_each_applier_checks_its_own_params():
    bad = parse_fault_specs(
        [
            {"kind": "load.burst", "start_s": 0, "duration_s": 1},
            {"kind": "load.burst", "start_s": 0, "duration_s": 1, "params": {"factor": 0}},
        ]
    )
    with pytest.raises(ValueError, match=r"faults\[1\]\.params\.factor"):
        check_params(route_faults(bad, OURS))
    storm = parse_fault_specs(
        [{"kind": "memory.gc_storm", "start_s": 0, "duration_s": 1, "params": {"role": "x"}}]
    )
    with pytest.raises(
        ValueError, match="unknown key"
    ):  # `role` is the GC hook's, not the engine's
        check_params(route_faults(storm, OURS))
