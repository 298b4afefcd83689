"""Production trace formats people publish: arrivals and lengths without prompt texts.

What: `read_production_trace(path)` returns `(t_s, prompt_tokens, output_tokens, line)` rows, in
file order, from either
- the Azure LLM inference trace CSV (AzurePublicDataset, 2023 and 2024 releases): a header
  `TIMESTAMP,ContextTokens,GeneratedTokens` and one request per row; TIMESTAMP is a wall-clock
  time such as `2023-11-16 18:15:46.6805900` (seven fractional digits, as .NET writes them) or
  with a UTC offset (`2024-05-10 00:00:00.009930+00:00`), read to the microsecond;
- Mooncake's JSONL (the FAST'25 traces, the format AIPerf and Dynamo replay): one object per line
  with `timestamp` (milliseconds since the trace's first request), `input_length` and
  `output_length`; `hash_ids` (the prefix blocks shared between requests) is accepted and not
  replayed: prompts are cut from the corpus, so prefix-cache hits are not reproduced.
Times are seconds from the first row; loadgen.replay sorts, slices and scales them.

Why a separate module: these are the two formats in which real services publish their traffic,
so an incident can be replayed with production arrivals; errors name the file, line and field.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from loadgen.errors import InputFileError

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_KEYS = {"timestamp", "input_length", "output_length", "hash_ids"}


@dataclass(frozen=True)
class TraceRow:
    t_s: float  # seconds after the trace's first row
    prompt_tokens: int  # prompt length in tokens (>= 1)
    output_tokens: int  # output length in tokens (>= 1)
    line: int  # where the row is in the file (1-based)


def is_mooncake(first_object: dict) -> bool:
    """Whether a JSON object is a Mooncake row (it has the arrival key and the input length)."""
    return "timestamp" in first_object and "input_length" in first_object


def read_azure_csv(path: Path) -> list[TraceRow]:
    """The rows of an Azure LLM inference trace CSV; raises InputFileError naming line and field."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != AZURE_COLUMNS:
            raise InputFileError(
                str(path), 1, None, f"expected the header {','.join(AZURE_COLUMNS)}, got {header}"
            )
        rows, first = [], None
        for line, values in enumerate(reader, start=2):
            if not values or all(not v.strip() for v in values):
                continue
            if len(values) != 3:
                raise InputFileError(str(path), line, None, f"expected 3 columns, got {values}")
            at = _azure_time(path, line, values[0])
            first = at if first is None else first
            rows.append(
                TraceRow(
                    at - first,
                    _length(path, line, "ContextTokens", values[1]),
                    _length(path, line, "GeneratedTokens", values[2]),
                    line,
                )
            )
    return rows


def read_mooncake_jsonl(path: Path, objects: list[tuple[int, dict]]) -> list[TraceRow]:
    """Rows of a Mooncake trace from its parsed (line, object) pairs."""
    rows = []
    for line, obj in objects:
        for key in obj:
            if key not in MOONCAKE_KEYS:
                raise InputFileError(
                    str(path),
                    line,
                    key,
                    f"unknown field (valid: {', '.join(sorted(MOONCAKE_KEYS))})",
                )
        stamp = obj.get("timestamp")
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or stamp < 0:
            raise InputFileError(
                str(path), line, "timestamp", f"must be milliseconds >= 0, got {stamp!r}"
            )
        rows.append(
            TraceRow(
                stamp / 1000.0,
                _length(path, line, "input_length", obj.get("input_length")),
                _length(path, line, "output_length", obj.get("output_length")),
                line,
            )
        )
    return rows


def write_mooncake_jsonl(path: Path, rows: list[tuple[float, int, int]]) -> Path:
    """Write (t_s, prompt tokens, output tokens) rows as a Mooncake trace (timestamp in ms), the
    format `read_mooncake_jsonl` reads back: how spikelens hands a built workload (an incident
    imported from Prometheus) to the replay load shape."""
    lines = [
        json.dumps({"timestamp": round(t_s * 1000.0, 3), "input_length": p, "output_length": o})
        for t_s, p, o in rows
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _azure_time(path: Path, line: int, text: str) -> float:
    """Seconds since the epoch of an Azure TIMESTAMP, fractions beyond microseconds dropped."""
    value = text.strip()
    offset = ""
    for sign in ("+", "-"):
        cut = value.rfind(sign)
        if cut > 10:  # past the date's own dashes: a UTC offset such as +00:00
            value, offset = value[:cut], value[cut:]
            break
    whole, _, fraction = value.partition(".")
    digits = (fraction + "000000")[:6]
    try:
        at = datetime.fromisoformat(f"{whole}.{digits}{offset or '+00:00'}")
    except ValueError:
        raise InputFileError(
            str(path), line, "TIMESTAMP", f"not a time like 2023-11-16 18:15:46.6805900: {text!r}"
        ) from None
    return at.timestamp()


def _length(path: Path, line: int, field: str, value: object) -> int:
    """A token count >= 1 (a CSV cell or a JSON number); raises InputFileError naming the field."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputFileError(str(path), line, field, f"must be an integer >= 1, got {value!r}")
    return value
