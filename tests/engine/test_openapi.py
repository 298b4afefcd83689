"""/openapi.json states the ranges the server enforces (from the same table), every route, and the
media types of its answers; schemathesis fuzzing a real server finds no 5xx and no rejected data."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.sampling_params import SAMPLING_RANGES, SamplingParams, SamplingParamsError
from engine.server.app import create_app
from engine.server.launch import EngineProcess
from engine.server.openapi import ServerLimits, engine_openapi

ENGINE = {"model": "tiny", "max_num_seqs": 8, "kv_blocks": 64, "max_model_len": 64}


class _Stub:
    """What create_app reads before serving: enough to build the schema without a model."""

    class config:
        max_model_len, max_num_seqs, model = 64, 8, "tiny"

    class tokenizer:
        vocab_size, stop_token_ids = 32000, ()

    vocab_size = 32000


@pytest.fixture(scope="module")
def doc():
    return create_app(_Stub()).openapi()


def _branch(prop: dict) -> dict:
    return prop["anyOf"][0] if "anyOf" in prop else prop


@pytest.mark.parametrize("name", sorted(SAMPLING_RANGES))
def test_each_sampling_range_is_in_the_schema_and_enforced(doc, name):
    valid = SAMPLING_RANGES[name]
    for request in ("CompletionRequest", "ChatCompletionRequest"):
        schema = _branch(doc["components"]["schemas"][request]["properties"][name])
        assert schema["type"] == ("integer" if valid.integer else "number")
        assert schema.get("minimum", schema.get("exclusiveMinimum")) == valid.low
        if valid.high is not None:
            assert schema["maximum"] == valid.high
    below = valid.low - (0 if valid.low_open else (1 if valid.integer else 1e-9))
    with pytest.raises(SamplingParamsError) as e:
        SamplingParams(**{name: below})
    assert e.value.field == name and valid.shown().split(" (")[0] in str(e.value)


def test_server_limits_bound_max_tokens_and_prompt_ids(doc):
    comp = doc["components"]["schemas"]["CompletionRequest"]["properties"]
    chat = doc["components"]["schemas"]["ChatCompletionRequest"]["properties"]
    assert (
        _branch(comp["max_tokens"])["maximum"] == 63
        and _branch(chat["max_completion_tokens"])["maximum"] == 63
    )
    ids = next(v for v in comp["prompt"]["anyOf"] if v.get("items", {}).get("type") == "integer")
    assert (
        ids["items"] == {"type": "integer", "minimum": 0, "maximum": 31999}
        and ids["maxItems"] == 63
    )
    assert doc["components"]["schemas"]["ChatCompletionRequest"]["required"] == ["messages"]
    assert doc["components"]["schemas"]["CompletionRequest"]["required"] == ["prompt"]


def test_every_route_is_documented_with_its_media_types(doc):
    app = create_app(_Stub())
    routes = {
        (r.path, m.lower())
        for r in app.routes
        for m in getattr(r, "methods", ())
        if r.path != "/openapi.json" and m != "HEAD"
    }
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert routes == documented
    ok = doc["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert set(ok) == {"application/json", "text/event-stream"}
    event = ok["text/event-stream"]["schema"]["properties"]["data"]["anyOf"]
    assert event[0] == {"const": "[DONE]"} and event[1]["contentMediaType"] == "application/json"
    assert "text/plain" in doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]


def test_schema_generation_is_pure():
    app = create_app(_Stub())
    assert engine_openapi(app, ServerLimits(64, 32000)) == engine_openapi(
        app, ServerLimits(64, 32000)
    )


# Warnings that mean the schema and the server disagree; the run fails on any of them.
ST_WARNINGS = (
    "validation_mismatch",
    "low_valid_rate",
    "missing_test_data",
    "missing_deserializer",
    "unresolvable_reference",
    "rate_limited",
    "method_not_allowed",
)


@pytest.mark.e2e
@pytest.mark.untimed  # answers and schemas, no latency: beside the unit tests in `make test`
@pytest.mark.timeout(240)
def test_schemathesis_finds_no_server_error_and_no_rejected_data(tmp_path):
    """Every check but positive_data_acceptance: the context limit couples two fields (the prompt's
    tokens + max_tokens <= max_model_len), which JSON Schema cannot state, so a few valid-looking
    bodies rightly answer 400. The low_valid_rate warning (opt-in, < 20 % accepted) and the
    "Schema validation mismatch" warning would still catch a schema that hides the server's rules."""
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    if st is None:
        pytest.skip("schemathesis is not installed (the test extra)")
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        f"warnings = {{ display = {json.dumps(list(ST_WARNINGS))}, fail-on = true }}\n"
    )
    run = {"engine": ENGINE, "server": {"max_waiting": None}}
    with EngineProcess(run, tmp_path / "run") as proc:
        result = subprocess.run(
            [
                st,
                "--no-color",
                "--config-file",
                str(config),
                "run",
                proc.url + "/openapi.json",
                "--exclude-checks",
                "positive_data_acceptance",
                "--max-examples",
                "12",
                "--seed",
                "1",
                "--workers",
                "2",
                "--request-timeout",
                "20",
                "--generation-database",
                "none",
                "--report",
                "json,har",
                "--report-dir",
                str(tmp_path / "report"),
            ],
            capture_output=True,
            text=True,
            timeout=200,
            cwd=tmp_path,
            env={**os.environ, "COLUMNS": "200"},
        )
    out = result.stdout + result.stderr
    report = json.loads(next((tmp_path / "report").glob("json-*.json")).read_text())
    har = json.loads(next((tmp_path / "report").glob("har-*.json")).read_text())
    assert result.returncode == 0, out[-6000:]
    assert report["failures"] == [] and report["errors"] == [] and report["complete"]
    assert not any(report["warnings"].values()), report["warnings"]
    assert "Schema validation mismatch" not in out and "rejected generated data" not in out
    assert "No issues found" in out
    rates = report["valid_rates"]
    for op in ("POST /v1/completions", "POST /v1/chat/completions"):
        accepted = sum(phase["accepted"] for phase in rates[op].values())
        assert accepted >= 10, (op, rates[op])  # the generation endpoints really generated
        streams = [
            e
            for e in har["log"]["entries"]
            if e["request"]["url"].endswith(op.split()[1])
            and e["response"]["content"].get("mimeType", "").startswith("text/event-stream")
        ]
        assert streams, f"{op}: no event stream was exercised"  # the schema's examples send one
    assert report["phases"]["examples"]["status"] == "success"
