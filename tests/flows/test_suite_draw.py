"""flows.suite_draw: generated held-out suites are valid scenarios, drawn from the seed alone,
mixing kinds, magnitudes, overlaps, confounded pairs and controls, on either engine."""

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from flows.evaluate import suite_scenarios
from flows.scenario import load_scenario
from spikelens_common.fault_catalogue import FAULT_CAUSES, Runtime, kinds_on

SMALL_LM = "models/small-lm"  # the Makefile's small-model target writes it


def _generated(tmp_path, n=60, seed=7):
    from flows.suite_draw import generate_suite

    return generate_suite(tmp_path / f"gen-{seed}", n, seed)


def test_a_generated_suite_is_valid_scenarios_drawn_from_the_seed(tmp_path):
    paths = _generated(tmp_path)
    assert len(paths) == 60 and suite_scenarios(paths[0].parent) == sorted(paths)
    for path in paths:
        raw = yaml.safe_load(path.read_text())
        model = raw["engine"]["model"]
        trained = model == SMALL_LM and not Path(SMALL_LM, "config.json").exists()
        load_scenario(path, {"engine": {"model": "small"}} if trained else None)
        for f in raw.get("faults") or []:
            assert f["kind"] in FAULT_CAUSES
            assert abs(f["start_s"] - round(f["start_s"])) >= 0.05  # off the 1-s window grid
            assert f["start_s"] + f["duration_s"] < raw["duration_s"]
            if f["kind"].startswith("comm."):
                assert raw["engine"]["tp"] == 2
    again = _generated(tmp_path / "again")
    assert [p.read_text() for p in again] == [p.read_text() for p in paths]
    other = _generated(tmp_path, seed=8)
    assert [p.read_text() for p in other] != [p.read_text() for p in paths]


def test_a_generated_suite_mixes_kinds_magnitudes_overlaps_and_controls(tmp_path):
    from flows.suite_draw import CATALOGUE

    kinds, per_case, magnitudes = Counter(), [], {}
    for path in _generated(tmp_path, n=120):
        faults = yaml.safe_load(path.read_text()).get("faults") or []
        per_case.append(len(faults))
        for f in faults:
            kinds[f["kind"]] += 1
            mag = CATALOGUE[f["kind"]]
            magnitudes.setdefault(f["kind"], []).append(f["params"][mag.param])
    assert set(kinds) == set(CATALOGUE)  # every kind of the catalogue is drawn
    assert Counter(per_case)[0] >= 10 and Counter(per_case)[2] >= 10  # controls and pairs
    for kind, values in magnitudes.items():
        mag = CATALOGUE[kind]
        lo, hi = sorted((mag.weak, mag.strong))
        assert all(lo - 1 <= v <= hi + 1 for v in values), kind
        if len(values) >= 5:
            assert len(set(values)) > 1, kind  # magnitudes vary


def test_a_generated_suite_refuses_a_folder_that_holds_other_scenarios(tmp_path):
    """The same draw is found as it is (the CLI's supervised child draws again); another draw
    (other N or seed) or a changed file is refused."""
    import pytest

    from flows.suite_draw import generate_suite

    first = _generated(tmp_path, n=2)
    assert generate_suite(tmp_path / "gen-7", 2, 7) == first
    for n, seed in ((3, 7), (2, 8)):
        with pytest.raises(FileExistsError):
            generate_suite(tmp_path / "gen-7", n, seed)
    first[0].write_text(first[0].read_text() + "# edited\n")
    with pytest.raises(FileExistsError):
        generate_suite(tmp_path / "gen-7", 2, 7)
    with pytest.raises(ValueError):
        generate_suite(tmp_path / "empty", 0, 7)


@pytest.fixture
def checkpoint(tmp_path):
    """A folder vLLM's config check takes for a checkpoint (config.json): the generated vLLM
    cases name the `make checkpoint` one, which unit tests do not build."""
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    return folder


def test_vllm_cases_are_valid_scenarios_of_kinds_vllm_can_get(tmp_path, checkpoint):
    from flows.suite_draw import VLLM_CATALOGUE, VLLM_MODEL, generate_suite

    paths = generate_suite(tmp_path / "v", 80, 11, "vllm")
    kinds: Counter = Counter()
    for path in paths:
        raw = yaml.safe_load(path.read_text())
        assert raw["engine"]["kind"] == "vllm" and raw["engine"]["model"] == VLLM_MODEL
        load_scenario(path, {"engine": {"model": str(checkpoint)}})
        for f in raw.get("faults") or []:
            kinds[f["kind"]] += 1
            assert f["start_s"] >= 10.0 - 1e-9  # after vLLM's slow first seconds and warmup
            assert f["start_s"] + f["duration_s"] < raw["duration_s"]
    assert set(kinds) == set(VLLM_CATALOGUE) and set(kinds) <= set(kinds_on(Runtime.VLLM))


def test_vllm_caches_are_tight_only_where_a_fault_needs_it_and_the_baseline_fits():
    from flows.suite_draw import draw_cases

    tight = 0
    for case in draw_cases(200, 5, "vllm"):
        s = case.scenario
        kinds = [f["kind"] for f in s.get("faults") or []]
        blocks = s["engine"].get("num_gpu_blocks_override")
        if blocks is None:
            assert "memory.kv_pressure" not in kinds
            continue
        tight += 1
        assert "memory.kv_pressure" in kinds or kinds == ["load.burst"]
        assert s["load"] == {"shape": "constant", "users": s["load"]["users"]}
        # one block per baseline request, one vLLM keeps back, and some spare; and never fewer
        # than vLLM accepts for a 512-token max_model_len (it refused 4 blocks: "384 tokens")
        assert blocks - 1 > s["load"]["users"] and blocks >= 5
        longest = s["workload"]["prompt_tokens"]["max"] + s["workload"]["output_tokens"]["max"]
        assert longest <= 128  # one vLLM-CPU block
    assert tight >= 10


def test_vllm_shares_every_cpu_only_on_a_machine_with_a_cpu_to_spare(monkeypatch):
    import flows.suite_draw as draw

    def cases(cpus):
        monkeypatch.setattr(draw, "usable_cpus", lambda: cpus)
        return draw.draw_cases(120, 5, "vllm")

    small, big = cases((0, 1)), cases(tuple(range(8)))
    # on 2 CPUs no case pins vLLM beside the load generator; on 8 some get every CPU
    assert all("cpus" not in c.scenario["engine"] for c in small)
    shared = [c for c in big if "cpus" in c.scenario["engine"]]
    assert 5 <= len(shared) <= 40
    assert all(c.scenario["engine"]["cpus"] == list(range(8)) for c in shared)
    # the same random numbers either way: only the CPUs differ between the two draws
    for a, b in zip(small, big):
        b.scenario["engine"].pop("cpus", None)
        assert a == b


def test_both_engines_mix_and_leave_our_engines_draw_as_it_was():
    from flows.suite_draw import draw_cases

    def unnamed(case):
        return {k: v for k, v in case.scenario.items() if k != "name"}

    ours = draw_cases(60, 3, "ours")
    both = draw_cases(60, 3, "both")
    on_vllm = [c for c in both if c.scenario["engine"].get("kind") == "vllm"]
    assert 10 <= len(on_vllm) <= 30 and all("-vllm-" in c.name for c in on_vllm)
    # spikelens' engine's cases take the main stream in order: the k-th of them is the `ours`
    # draw's k-th case (at another index)
    theirs = [c for c in both if c not in on_vllm]
    assert [unnamed(c) for c in theirs] == [unnamed(c) for c in ours[: len(theirs)]]
    with pytest.raises(ValueError, match="--engines"):
        draw_cases(2, 3, "sglang")


def test_long_controls_follow_the_drawn_cases_on_alternating_engines(tmp_path):
    from flows.suite_draw import LONG_CONTROL_S, Extras, draw_cases, generate_suite

    plain = draw_cases(4, 11, "both")
    with_controls = draw_cases(4, 11, "both", Extras(control_minutes=25))
    # the drawn cases are the same draw; 25 minutes take three 10-minute runs, ours first
    assert [c.scenario for c in with_controls[:4]] == [c.scenario for c in plain]
    long = with_controls[4:]
    assert [c.name for c in long] == [
        "gen-11-004-long-control",
        "gen-11-005-vllm-long-control",
        "gen-11-006-long-control",
    ]
    for case in long:
        assert case.truth == () and "faults" not in case.scenario
        assert case.scenario["duration_s"] == LONG_CONTROL_S
    assert long[1].scenario["engine"]["kind"] == "vllm" and "kind" not in long[0].scenario["engine"]
    assert all(
        "kind" not in c.scenario["engine"] for c in draw_cases(1, 11, "ours", Extras(0, 10))[1:]
    )
    paths = generate_suite(tmp_path / "lc", 1, 11, "ours", Extras(control_minutes=10))
    assert len(paths) == 2
    assert "--control-minutes 10` (case 1)" in paths[1].read_text().splitlines()[0]
    load_scenario(paths[1])
    for bad in (-1.0, 601.0):
        with pytest.raises(ValueError, match="--control-minutes"):
            Extras(control_minutes=bad)


def test_unexplained_cases_follow_the_drawn_ones_with_their_own_truth(tmp_path):
    from flows.suite_draw import UNEXPLAINED_KIND, UNEXPLAINED_MAGNITUDE, Extras, draw_cases

    plain = draw_cases(3, 12, "ours")
    cases = draw_cases(3, 12, "ours", Extras(unexplained=4, control_minutes=10))
    assert [c.scenario for c in cases[:3]] == [c.scenario for c in plain]
    extra, control = cases[3:7], cases[7]
    assert control.name == "gen-12-007-long-control" and control.truth == ()
    factors = []
    for case in extra:
        assert case.truth == ("unexplained",) and case.name.endswith("-slow-forward")
        (fault,) = case.scenario["faults"]
        assert fault["kind"] == UNEXPLAINED_KIND and "kind" not in case.scenario["engine"]
        factors.append(fault["params"]["factor"])
    assert all(UNEXPLAINED_MAGNITUDE.weak <= f <= UNEXPLAINED_MAGNITUDE.strong for f in factors)
    assert len(set(factors)) > 1
    paths = generate_suite_for(tmp_path, Extras(unexplained=1))
    assert "--unexplained 1` (case 1)" in paths[1].read_text().splitlines()[0]
    load_scenario(paths[1])
    with pytest.raises(ValueError, match="--unexplained"):
        Extras(unexplained=-1)


def generate_suite_for(tmp_path, extras):
    from flows.suite_draw import generate_suite

    return generate_suite(tmp_path / "u", 1, 12, "ours", extras)


def test_every_pair_gets_two_solo_twins_after_the_draw_it_leaves_as_it_was(tmp_path):
    from flows.suite_draw import Extras, draw_cases, generate_suite, twin_of

    plain = draw_cases(12, 13, "both", Extras(control_minutes=10))
    cases = draw_cases(12, 13, "both", Extras(control_minutes=10, twins=True))
    assert [c.scenario for c in cases[: len(plain)]] == [c.scenario for c in plain]
    pairs = [c for c in plain if len(c.scenario.get("faults") or []) == 2]
    twins = cases[len(plain) :]
    assert pairs and len(twins) == 2 * len(pairs)
    by_name = {c.name: c for c in plain}
    for twin in twins:
        pair_name, k = twin_of(twin.name)
        pair = by_name[pair_name]
        # the same case, its k-th fault alone, at the same time and magnitude
        assert twin.scenario["faults"] == [pair.scenario["faults"][k]]
        rest = {key: v for key, v in twin.scenario.items() if key not in ("name", "faults")}
        assert rest == {key: v for key, v in pair.scenario.items() if key not in ("name", "faults")}
        assert twin.truth == (pair.truth[k],) and twin.scenario["name"] == twin.name
    paths = generate_suite(tmp_path / "t", 12, 13, "both", Extras(twins=True))
    first_twin = next(p for p in paths if twin_of(p.stem))
    head = first_twin.read_text().splitlines()[0]
    assert "--engines both --twins` " in head and "the solo twin of" in head
    load_scenario(first_twin)


def test_twin_names_are_read_back_and_no_drawn_case_reads_as_one():
    from flows.suite_draw import draw_cases, twin_of

    assert twin_of("gen-5-003-gc-storm-stall-solo1") == ("gen-5-003-gc-storm-stall", 1)
    assert twin_of("gen-5-003-gc-storm-stall") is None and twin_of("-solo1") is None
    assert twin_of("gen-5-003-x-soloX") is None
    assert all(twin_of(c.name) is None for c in draw_cases(60, 7, "both"))


def test_controls_hold_their_workload_still_and_fault_runs_may_step_it(tmp_path):
    """A control is where false alarms are counted: a step of users there would be the suite's
    own load incident with no truth recorded, so a drawn step keeps its first users."""
    shapes: dict[bool, Counter] = {True: Counter(), False: Counter()}
    for path in _generated(tmp_path, n=120, seed=11):
        scenario = yaml.safe_load(path.read_text())
        if "vllm" in path.name:
            continue
        shapes[not scenario.get("faults")][scenario["load"]["shape"]] += 1
    assert shapes[True]["constant"] > 0 and shapes[True]["step"] == 0  # controls: steady
    assert shapes[False]["step"] > 0  # fault runs still draw a step as a confounder
