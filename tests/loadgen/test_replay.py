"""Replay traces: recorded runs and JSONL traces, normalisation, and errors naming the line."""

import json
import random

import pytest

from loadgen.errors import InputFileError
from loadgen.prompts import PromptBuilder
from loadgen.recorder import Recorder, merge_parts
from loadgen.replay import (
    ReplayEntry,
    TraceOptions,
    load_trace,
    read_normalised,
    write_normalised,
)
from loadgen.request_plan import COMPLETIONS_PATH, RequestFactory
from loadgen.spec import WorkloadSpec


def test_a_recorded_run_replays_its_arrivals_lengths_and_sampling(tmp_path):
    rec = Recorder(tmp_path / "parts", "p1")
    for i, (t_ms, temp) in enumerate([(1000, 0.5), (1250, None), (3000, 0.9)]):
        row = {
            "request_id": f"r{i}",
            "user": "u",
            "worker": "0",
            "phase": "measure",
            "intended_send_ns": t_ms * 1_000_000,
            "prompt_tokens_target": 10 + i,
            "max_tokens": 4 + i,
        }
        if temp is not None:
            row["temperature"] = temp
        rec.start(row)
        rec.finish(f"r{i}", status="ok")
    rec.flush()
    merge_parts(tmp_path / "parts", tmp_path)
    entries = load_trace(tmp_path, TraceOptions(speed=2.0))
    assert [(e.t_s, e.prompt_tokens, e.max_tokens, e.sampling) for e in entries] == [
        (0.0, 10, 4, {"temperature": 0.5}),
        (0.125, 11, 5, {}),
        (1.0, 12, 6, {"temperature": 0.9}),
    ]


def test_a_recorded_closed_loop_user_carries_its_name_and_when_it_stopped(tmp_path):
    """A closed-loop user stopped where its last request ended; open-loop senders are nobody."""
    rec = Recorder(tmp_path / "parts", "p1")
    rows = [  # (id, user, sent ms, done ms)
        ("a0", "w0-u0", 1000, 1400),
        ("b0", "w0-u1", 1100, 1300),
        ("a1", "w0-u0", 1400, 2100),
        ("o0", "w0-open", 1200, 1500),
        ("b1", "w0-u1", 1300, 5000),
    ]
    for rid, user, sent_ms, done_ms in rows:
        rec.start(
            {
                "request_id": rid,
                "user": user,
                "worker": "0",
                "phase": "measure",
                "intended_send_ns": sent_ms * 1_000_000,
                "prompt_tokens_target": 8,
                "max_tokens": 4,
            }
        )
        rec.finish(rid, status="ok", done_ns=done_ms * 1_000_000)
    rec.flush()
    merge_parts(tmp_path / "parts", tmp_path)
    entries = load_trace(tmp_path, TraceOptions(from_s=0.1, speed=2.0))
    assert [e.user for e in entries] == ["w0-u1", None, "w0-u1", "w0-u0"]
    assert [e.t_s for e in entries] == pytest.approx([0.0, 0.05, 0.1, 0.15])
    assert [e.until_s or 0.0 for e in entries] == pytest.approx([1.95, 0.0, 1.95, 0.5])


def test_jsonl_trace_entries_and_normalised_round_trip(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(o)
            for o in [
                {"t_s": 0, "prompt_tokens": 8, "max_tokens": 3},
                {"t_s": 0.5, "prompt": "hello there", "sampling": {"temperature": 0.2}},
                {"t_s": 0.5, "body": {"prompt": "raw completion", "max_tokens": 5, "top_k": 3}},
            ]
        )
    )
    entries = load_trace(path)
    assert [e.t_s for e in entries] == [0, 0.5, 0.5]
    assert list(read_normalised(write_normalised(entries, tmp_path / "n.jsonl"))) == entries

    workload = WorkloadSpec.from_dict({"output_tokens": {"mean": 7, "min": 7, "max": 7}})
    factory = RequestFactory(workload, PromptBuilder(), model_name="m", seed=0, id_prefix="r")
    rng = random.Random(0)
    cut, text, body = (factory.from_replay(e, rng, f"id{i}") for i, e in enumerate(entries))
    assert cut.prompt_tokens_target == 8 and cut.max_tokens == 3
    assert text.body["messages"][0]["content"] == "hello there" and text.max_tokens == 7  # drawn
    assert text.sampling == {"temperature": 0.2}
    assert body.path == COMPLETIONS_PATH and body.max_tokens == 5 and body.sampling == {"top_k": 3}
    assert body.body["stream"] is True and body.body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    "lines, where",
    [
        (
            [{"t_s": 0, "prompt": "a"}, {"t_s": -1, "prompt": "b"}],
            "2: field 't_s': must be a number",
        ),
        (
            [{"t_s": 1, "prompt": "a"}, {"t_s": 0.5, "prompt": "b"}],
            "2: field 't_s': goes back in time",
        ),
        ([{"t_s": 0, "prompt": "a", "prompt_tokens": 3}], "1: field 'body': give exactly one of"),
        ([{"t_s": 0, "body": {"model": "x"}}], "1: field 'body': must be an object with"),
        ([{"t_s": 0, "prompt_tokens": 0}], "1: field 'prompt_tokens': must be an integer >= 1"),
        (
            [{"t_s": 0, "prompt": "a", "sampling": {"top_p": 2}}],
            "1: field 'sampling': sampling.top_p",
        ),
        ([{"t_s": 0, "prompt": "a", "when": 3}], "1: field 'when': unknown field"),
        ([{"t_s": 0, "prompt": "a", "user": ""}], "1: field 'user': must be a non-empty string"),
        (
            [{"t_s": 0, "prompt": "a", "user": "u", "until_s": -2}],
            "1: field 'until_s': must be a number of seconds >= 0",
        ),
    ],
)
def test_bad_traces_name_file_line_and_field(tmp_path, lines, where):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in lines))
    with pytest.raises(InputFileError) as err:
        load_trace(path)
    assert str(err.value).startswith(f"{path}:{where}"), str(err.value)


def test_missing_and_empty_traces(tmp_path):
    with pytest.raises(InputFileError, match="no such file or run directory"):
        load_trace(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputFileError, match="the trace has no requests"):
        load_trace(tmp_path / "empty.jsonl")
    assert ReplayEntry(t_s=0).sampling == {}
