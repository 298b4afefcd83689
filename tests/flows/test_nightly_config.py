"""Nightly config: defaults, thresholds per metric, and errors that name the key."""

import re
from pathlib import Path

import pytest

from flows.nightly_config import NightlyConfig, NightlyConfigError


def make(tmp_path: Path, text: str) -> Path:
    (tmp_path / "a.yaml").write_text("name: a\n")
    (tmp_path / "config.yaml").write_text(text)
    return tmp_path


def test_builtin_nightly_config_loads():
    from flows.nightly_config import default_config_dir

    cfg = NightlyConfig.load(default_config_dir())
    assert cfg.baseline == "rolling" and cfg.last_n == 5 and cfg.noise_guard
    assert cfg.confirm_repeats == 1  # a regression's worst spike is confirmed
    assert all(p.is_file() for p in cfg.scenarios)


def test_thresholds_per_metric(tmp_path):
    cfg = NightlyConfig.load(
        make(tmp_path, "scenarios: [a.yaml]\nthresholds: {latency_rel: 0.2}\n")
    )
    assert cfg.thresholds.for_metric("itl_p50") == (0.2, False, 5.0)
    assert cfg.thresholds.for_metric("itl_p99") == (0.25, False, 5.0)
    assert cfg.thresholds.for_metric("error_rate") == (0.01, True, 0.0)
    assert cfg.thresholds.for_metric("throughput") == (0.10, False, 0.0)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("scenarios: [a.yaml]\nbaseline: weekly\n", "baseline"),
        ("scenarios: [a.yaml]\nlast_nn: 3\n", "last_nn: unknown key"),
        ("scenarios: [a.yaml]\nmetrics: [itl_p95]\n", "unknown metric 'itl_p95'"),
        ("scenarios: [missing.yaml]\n", "does not exist"),
        ("scenarios: [a.yaml]\nbaseline: pinned\n", "pinned_run_id"),
        ("scenarios: [a.yaml]\nthresholds: {latency: 0.1}\n", "thresholds.latency"),
        ("scenarios: [a.yaml]\nnoise_guard: maybe\n", "noise_guard: must be true or false"),
        ("scenarios: [a.yaml]\nconfirm_repeats: 11\n", r"confirm_repeats: .* \[0, 10\]"),
        ("scenarios: [a.yaml]\nconfirm_repeats: yes\n", r"confirm_repeats: .* got True"),
    ],
)
def test_bad_config_names_the_key(tmp_path, text, needle):
    with pytest.raises(NightlyConfigError, match=needle):
        NightlyConfig.load(make(tmp_path, text))


def test_capacity_check_is_off_by_default_and_parsed_when_given(tmp_path):
    from flows.nightly_config import default_config_dir

    assert NightlyConfig.load(default_config_dir()).capacity is None
    cfg = NightlyConfig.load(
        make(
            tmp_path,
            "scenarios: [a.yaml]\ncapacity: {scenario: a.yaml, users: [8, 2, 4], "
            "slo: {ttft_ms: 300}, drop_rel: 0.3}\n",
        )
    )
    cap = cfg.capacity
    assert cap.kind == "users" and cap.loads == (2.0, 4.0, 8.0) and cap.slo == {"ttft_ms": 300}
    assert cap.drop_rel == 0.3 and cap.attainment == 0.9 and cap.last_n == 3
    rates = NightlyConfig.load(
        make(tmp_path, "scenarios: [a.yaml]\ncapacity: {scenario: a.yaml, rates: [0.5, 2]}\n")
    )
    assert rates.capacity.kind == "rate" and rates.capacity.loads == (0.5, 2.0)


@pytest.mark.parametrize(
    "block,needle",
    [
        ("{scenario: a.yaml}", "exactly one of users"),
        ("{scenario: nope.yaml, users: [2]}", "capacity.scenario"),
        (
            "{scenario: a.yaml, users: [2.5]}",
            "capacity.users: --users: each step must be an integer",
        ),
        ("{scenario: a.yaml, users: [2], slo: {ttft: 3}}", "capacity.slo: unknown key 'ttft'"),
        (
            "{scenario: a.yaml, users: [2], drop_rel: 2}",
            "capacity.drop_rel: must be a number in (0, 1]",
        ),
        ("{scenario: a.yaml, users: [2], every: 1}", "capacity.every: unknown key"),
    ],
)
def test_bad_capacity_block_names_the_key(tmp_path, block, needle):
    with pytest.raises(NightlyConfigError, match=re.escape(needle)):
        NightlyConfig.load(make(tmp_path, f"scenarios: [a.yaml]\ncapacity: {block}\n"))
