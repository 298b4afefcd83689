"""Replay traces: a recorded run's arrivals and request mix, a JSONL trace of timestamps and
request bodies, or a production trace (Azure LLM inference CSV, Mooncake JSONL).

What: `load_trace(path, options)` returns `ReplayEntry`s sorted by send time (seconds from the
trace's first request, sliced to [from_s, to_s), then divided by `speed`; token lengths times
`length_scale`):
- a run directory (or its requests.parquet): every recorded request's intended send time,
  prompt length (prompt_tokens_target), max_tokens and sampling parameters; prompts are cut
  again from the corpus at the recorded lengths (the recorder keeps lengths, not texts). A
  closed-loop user's requests also carry the user and when it stopped (its last request's end).
- a JSONL trace: one object per line with `t_s` (seconds, non-decreasing) and one of
  `body` (an OpenAI request body, sent as given but always streamed with usage), `prompt`
  (text) or `prompt_tokens` (a length); optional `max_tokens`, `sampling` ({name: value}),
  and for a closed-loop replay `user` (who sent it) and `until_s` (when that user stopped).
- a production trace (loadgen.trace_formats): a `.csv` file is read as the Azure LLM inference
  trace, a JSONL file whose rows have `timestamp` and `input_length` as Mooncake's; prompts are
  cut from the corpus at the given lengths and max_tokens is the recorded output length.
Errors name the file, line and field. The runner validates and normalises the trace into the
run's loadgen/replay.jsonl, which the Locust processes read (`read_normalised`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from loadgen.errors import InputFileError, SpecError
from loadgen.recorder import SAMPLING_COLUMNS
from loadgen.sources import iter_json_objects
from loadgen.spec import LoadSpec, check_sampling
from loadgen.trace_formats import TraceRow, is_mooncake, read_azure_csv, read_mooncake_jsonl

TRACE_KEYS = {
    "t_s",
    "body",
    "prompt",
    "prompt_tokens",
    "max_tokens",
    "sampling",
    "user",
    "until_s",
}


@dataclass(frozen=True)
class ReplayEntry:
    t_s: float  # send time, seconds after the start of the replay (speed applied)
    prompt_tokens: int | None = None  # cut a corpus prompt of this length
    prompt: str | None = None  # or send this text
    body: dict | None = None  # or send this body
    max_tokens: int | None = None  # None: drawn from the workload
    sampling: dict = field(default_factory=dict)
    user: str | None = None  # who sent it: a closed-loop replay's chain (loadgen.chains)
    until_s: float | None = None  # when that user stopped (the replay's time); None: it did not


@dataclass(frozen=True)
class TraceOptions:
    """How a trace is replayed (LoadSpec's replay keys)."""

    speed: float = 1.0  # time compression (2 = twice as fast); > 0
    length_scale: float = 1.0  # token lengths times this (at least 1 token); > 0
    from_s: float = 0.0  # the slice replayed: seconds after the trace's first request
    to_s: float | None = None  # end of the slice (exclusive); None: the end of the trace


def load_trace(path: str | Path, options: TraceOptions = TraceOptions()) -> list[ReplayEntry]:
    """Entries of a recorded run or a trace file, sorted by t_s; raises InputFileError."""
    path = Path(path)
    if path.is_dir():
        path = path / "requests.parquet"
    if not path.exists():
        raise InputFileError(str(path), None, None, "no such file or run directory")
    entries = sorted(_read(path), key=lambda e: e.t_s)
    if not entries:
        raise InputFileError(str(path), None, None, "the trace has no requests")
    to_s = math.inf if options.to_s is None else options.to_s
    kept = [e for e in entries if options.from_s <= e.t_s < to_s]
    if not kept:
        raise InputFileError(
            str(path),
            None,
            "trace_from_s",
            f"no request in [{options.from_s}, {to_s}) s of a trace {entries[-1].t_s:.1f} s long",
        )
    return [
        ReplayEntry(
            (e.t_s - options.from_s) / options.speed,
            _scaled(e.prompt_tokens, options.length_scale),
            e.prompt,
            e.body,
            _scaled(e.max_tokens, options.length_scale),
            e.sampling,
            e.user,
            None if e.until_s is None else (e.until_s - options.from_s) / options.speed,
        )
        for e in kept
    ]


def trace_options(load: LoadSpec) -> TraceOptions:
    """A replay load spec's trace options."""
    return TraceOptions(load.speed, load.length_scale, load.trace_from_s, load.trace_to_s)


def _read(path: Path) -> list[ReplayEntry]:
    """The entries of one file, in file order, by its format."""
    if path.suffix == ".parquet":
        return _from_run(path)
    if path.suffix == ".csv":
        return _from_rows(read_azure_csv(path))
    objects = list(iter_json_objects(path, path.read_text(encoding="utf-8")))
    if objects and is_mooncake(objects[0][1]):
        return _from_rows(read_mooncake_jsonl(path, objects))
    return _from_jsonl(path, objects)


def _from_rows(rows: list[TraceRow]) -> list[ReplayEntry]:
    return [
        ReplayEntry(r.t_s, prompt_tokens=r.prompt_tokens, max_tokens=r.output_tokens) for r in rows
    ]


def _scaled(tokens: int | None, scale: float) -> int | None:
    if tokens is None or scale == 1.0:
        return tokens
    return max(1, round(tokens * scale))


def _from_run(path: Path) -> list[ReplayEntry]:
    rows = pq.read_table(path).to_pylist()
    if not rows:
        return []
    first = min(r["intended_send_ns"] for r in rows)
    stopped = _users_stopped(rows)
    return [
        ReplayEntry(
            t_s=(r["intended_send_ns"] - first) / 1e9,
            prompt_tokens=r["prompt_tokens_target"],
            max_tokens=r["max_tokens"],
            sampling={k: r[k] for k in SAMPLING_COLUMNS if r.get(k) is not None},
            user=r["user"] if r["user"] in stopped else None,
            until_s=(stopped[r["user"]] - first) / 1e9 if r["user"] in stopped else None,
        )
        for r in rows
    ]


def _users_stopped(rows: list[dict]) -> dict[str, int]:
    """Each closed-loop user's stop (ns): the end of its last request. A closed-loop user sends
    its next request as its last one ends (plus the think time), so a user with no later request
    was stopped then, or mid-stream (its last request 'cancelled' at the stop). Open-loop
    senders ('…-open') are not users."""
    stopped: dict[str, int] = {}
    for r in rows:
        user, end = r.get("user"), r.get("done_ns") or r.get("sent_ns")
        if not user or user == "open" or user.endswith("-open") or end is None:
            continue
        stopped[user] = max(end, stopped.get(user, end))
    return stopped


def _from_jsonl(path: Path, objects: list[tuple[int, dict]]) -> list[ReplayEntry]:
    entries = []
    previous = 0.0
    for line, obj in objects:
        for key in obj:
            if key not in TRACE_KEYS:
                raise InputFileError(
                    str(path), line, key, f"unknown field (valid: {', '.join(sorted(TRACE_KEYS))})"
                )
        t_s = obj.get("t_s")
        if isinstance(t_s, bool) or not isinstance(t_s, (int, float)) or t_s < 0:
            raise InputFileError(
                str(path), line, "t_s", f"must be a number of seconds >= 0, got {t_s!r}"
            )
        if t_s < previous:
            raise InputFileError(str(path), line, "t_s", f"goes back in time ({t_s} < {previous})")
        previous = t_s
        given = [k for k in ("body", "prompt", "prompt_tokens") if k in obj]
        if len(given) != 1:
            raise InputFileError(
                str(path), line, "body", "give exactly one of body, prompt or prompt_tokens"
            )
        body = obj.get("body")
        if body is not None and (
            not isinstance(body, dict) or not ("messages" in body or "prompt" in body)
        ):
            raise InputFileError(
                str(path), line, "body", "must be an object with 'messages' or 'prompt'"
            )
        prompt = obj.get("prompt")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise InputFileError(str(path), line, "prompt", "must be a non-empty string")
        for key in ("prompt_tokens", "max_tokens"):
            value = obj.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InputFileError(
                    str(path), line, key, f"must be an integer >= 1, got {value!r}"
                )
        sampling = obj.get("sampling") or {}
        try:
            check_sampling(sampling, "sampling")
        except SpecError as exc:
            raise InputFileError(str(path), line, "sampling", str(exc)) from None
        max_tokens = (
            obj.get("max_tokens")
            or (body or {}).get("max_tokens")
            or (body or {}).get("max_completion_tokens")
        )
        user, until_s = _user_keys(path, line, obj)
        entries.append(
            ReplayEntry(
                float(t_s),
                obj.get("prompt_tokens"),
                prompt,
                body,
                max_tokens,
                sampling,
                user,
                until_s,
            )
        )
    return entries


def _user_keys(path: Path, line: int, obj: dict) -> tuple[str | None, float | None]:
    """A row's `user` (a non-empty string) and `until_s` (seconds >= 0), each optional."""
    user, until_s = obj.get("user"), obj.get("until_s")
    if user is not None and (not isinstance(user, str) or not user.strip()):
        raise InputFileError(str(path), line, "user", f"must be a non-empty string, got {user!r}")
    if until_s is not None and (
        isinstance(until_s, bool) or not isinstance(until_s, (int, float)) or until_s < 0
    ):
        raise InputFileError(
            str(path), line, "until_s", f"must be a number of seconds >= 0, got {until_s!r}"
        )
    return user, None if until_s is None else float(until_s)


def write_normalised(entries: list[ReplayEntry], path: str | Path) -> Path:
    path = Path(path)
    with open(path, "w") as f:
        for e in entries:
            f.write(json.dumps(asdict(e)) + "\n")
    return path


def read_normalised(path: str | Path):
    """Yield the entries written by write_normalised, one at a time (long traces stay small)."""
    with open(path) as f:
        for line in f:
            yield ReplayEntry(**json.loads(line))
