"""Production traces: the Azure LLM inference CSV and Mooncake JSONL, read, sliced and scaled
by loadgen.replay.load_trace, with errors that name the line and field."""

import json

import pytest

from loadgen.errors import InputFileError, SpecError
from loadgen.replay import TraceOptions, load_trace
from loadgen.spec import LoadSpec
from loadgen.trace_formats import read_azure_csv

# The first rows of AzureLLMInferenceTrace_conv.csv (2023 release) as published: seven
# fractional digits, no UTC offset.
AZURE_2023 = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2556220,879,47
"""

# The 2024 release writes an offset.
AZURE_2024 = """TIMESTAMP,ContextTokens,GeneratedTokens
2024-05-10 00:00:00.009930+00:00,2162,5
2024-05-10 00:00:00.015000+00:00,1033,20
"""

MOONCAKE = [
    {"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]},
    {"timestamp": 10535, "input_length": 672, "output_length": 26, "hash_ids": [46, 47]},
    {"timestamp": 27482, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]},
]


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_azure_csv_arrivals_are_seconds_from_the_first_row_and_lengths_are_kept(tmp_path):
    entries = load_trace(_write(tmp_path, "azure.csv", AZURE_2023))
    assert [round(e.t_s, 6) for e in entries] == [0.0, 4.314579, 4.575032]
    assert [(e.prompt_tokens, e.max_tokens) for e in entries] == [(374, 44), (396, 109), (879, 47)]


def test_azure_2024_offsets_parse(tmp_path):
    rows = read_azure_csv(_write(tmp_path, "azure24.csv", AZURE_2024))
    assert [round(r.t_s, 6) for r in rows] == [0.0, 0.00507]


def test_mooncake_timestamps_are_milliseconds(tmp_path):
    path = _write(tmp_path, "mooncake.jsonl", "\n".join(json.dumps(o) for o in MOONCAKE))
    entries = load_trace(path)
    assert [e.t_s for e in entries] == [0.0, 10.535, 27.482]
    assert [(e.prompt_tokens, e.max_tokens) for e in entries] == [(655, 52), (672, 26), (655, 52)]


def test_slice_speed_and_length_scale(tmp_path):
    path = _write(tmp_path, "mooncake.jsonl", "\n".join(json.dumps(o) for o in MOONCAKE))
    options = TraceOptions(speed=2.0, length_scale=0.1, from_s=10.0, to_s=30.0)
    entries = load_trace(path, options)
    assert [round(e.t_s, 6) for e in entries] == [0.2675, 8.741]
    assert [(e.prompt_tokens, e.max_tokens) for e in entries] == [(67, 3), (66, 5)]
    tiny = load_trace(path, TraceOptions(length_scale=0.001))
    assert {(e.prompt_tokens, e.max_tokens) for e in tiny} == {(1, 1)}  # never below one token


def test_a_slice_without_requests_says_how_long_the_trace_is(tmp_path):
    path = _write(tmp_path, "azure.csv", AZURE_2023)
    with pytest.raises(InputFileError, match=r"trace_from_s.*4\.6 s long"):
        load_trace(path, TraceOptions(from_s=100.0))


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("bad.csv", "time,in,out\n1,2,3\n", r"bad\.csv:1: expected the header"),
        ("bad.csv", AZURE_2023.replace(",396,", ",-3,"), r":3: field 'ContextTokens'"),
        ("bad.csv", AZURE_2023.replace("18:15:50", "late"), r":3: field 'TIMESTAMP'"),
        ("bad.csv", AZURE_2023 + "2023-11-16 18:16:00.0,5\n", r":5: expected 3 columns"),
        ("bad.jsonl", '{"timestamp": -1, "input_length": 3, "output_length": 2}', "timestamp"),
        ("bad.jsonl", '{"timestamp": 0, "input_length": 3}', r":1: field 'output_length'"),
        ("bad.jsonl", '{"timestamp": 0, "input_length": 3, "output_length": 2, "x": 1}', "'x'"),
    ],
)
def test_broken_trace_files_name_the_line_and_field(tmp_path, name, text, match):
    with pytest.raises(InputFileError, match=match):
        load_trace(_write(tmp_path, name, text))


def test_load_spec_checks_the_replay_keys():
    ok = LoadSpec.from_dict({"shape": "replay", "trace": "t.csv", "length_scale": 0.1})
    assert ok.length_scale == 0.1 and ok.trace_to_s is None
    with pytest.raises(SpecError, match="load.length_scale"):
        LoadSpec.from_dict({"shape": "replay", "trace": "t.csv", "length_scale": 0})
    with pytest.raises(SpecError, match="load.trace_to_s"):
        LoadSpec.from_dict({"shape": "replay", "trace": "t", "trace_from_s": 5, "trace_to_s": 5})


def test_a_written_mooncake_trace_reads_back_on_the_same_time_axis(tmp_path):
    """write_mooncake_jsonl (how `replay --from-incident` hands over its requests): times stay
    seconds from the incident window's start, not from the first request."""
    from loadgen.trace_formats import write_mooncake_jsonl

    path = write_mooncake_jsonl(tmp_path / "t.jsonl", [(1.25, 48, 24), (3.0005, 10, 5)])
    entries = load_trace(path, TraceOptions())
    assert [(e.t_s, e.prompt_tokens, e.max_tokens) for e in entries] == [
        (1.25, 48, 24),
        (3.0005, 10, 5),
    ]
