"""run.json round-trips and run ids sort by time."""

import re
import time

from flows.manifest import RunManifest, new_run_id


def test_run_id_is_sortable_and_unique():
    a = new_run_id("incident", "gc-storm")
    time.sleep(1.01)
    b = new_run_id("incident", "gc-storm")
    assert re.fullmatch(r"\d{8}T\d{6}Z-incident-gc-storm-[0-9a-f]{4}", a)
    assert a < b


def test_manifest_round_trip(tmp_path):
    m = RunManifest(
        run_id="r1",
        kind="incident",
        scenario_name="x",
        scenario_path="x.yaml",
        scenario={"name": "x"},
        engine={"model": "tiny"},
        target=None,
        faults=[],
        warmup_s=1,
        duration_s=2,
        command="spikelens run x.yaml",
    )
    m.write(tmp_path)
    back = RunManifest.read(tmp_path)
    assert back == m and back.status == "running"
