"""spikelens_common.fault_catalogue: one table of every kind, matching the docs and the appliers."""

import dataclasses
import re
from pathlib import Path

import pytest

from engine.faults import ENGINE_KINDS
from injectors import process_faults
from loadgen import traffic_faults
from spikelens_common.fault_catalogue import (
    CATALOGUE,
    FAULT_CAUSES,
    Applier,
    Runtime,
    kinds_applied_by,
    kinds_on,
)

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def test_the_catalogue_holds_the_kinds_and_causes_of_the_design():
    table = DESIGN.read_text().split("Fault kinds and the cause each stands for:")[1]
    rows = re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \| ([a-z]+) \|", table, re.M)
    assert dict(rows) == FAULT_CAUSES


def test_each_applier_knows_exactly_the_catalogues_kinds_with_its_params():
    assert sorted(ENGINE_KINDS) == kinds_applied_by(Applier.ENGINE)
    for name, kind in ENGINE_KINDS.items():
        assert kind.params_cls is CATALOGUE[name].params_cls(Applier.ENGINE)
    assert list(traffic_faults.KINDS) == kinds_applied_by(Applier.LOADGEN)
    assert list(process_faults.KINDS) == kinds_applied_by(Applier.GC_HOOK)
    assert kinds_applied_by(Applier.PROXY) == ["network.delay"]
    assert kinds_applied_by(Applier.HOGS) == ["host.cpu_contention"]


def test_every_params_class_has_defaults_for_every_field():
    for kind in CATALOGUE.values():
        for application in kind.appliers.values():
            params = application.params_cls()  # all defaults
            assert dataclasses.is_dataclass(params), kind.name


def test_who_applies_what_where():
    gc_storm, kv = CATALOGUE["memory.gc_storm"], CATALOGUE["memory.kv_pressure"]
    assert gc_storm.application(Runtime.OURS).applier == Applier.ENGINE
    assert gc_storm.application(Runtime.VLLM).applier == Applier.GC_HOOK
    assert gc_storm.application(Runtime.TARGET) is None
    assert kv.application(Runtime.VLLM).applier == Applier.LOADGEN
    assert CATALOGUE["host.cpu_contention"].application(Runtime.TARGET) is None
    assert kinds_on(Runtime.TARGET) == [
        "client.stall",
        "load.burst",
        "network.delay",
        "penalty.heavy_traffic",
        "penalty.repetition",
    ]
    with pytest.raises(KeyError, match="comm.straggler is not applied by loadgen"):
        CATALOGUE["comm.straggler"].params_cls(Applier.LOADGEN)
