"""Prompt files: JSONL and ShareGPT workloads, with errors that name the file, line and field.

What: `load_prompt_file(path, source)` reads every usable entry once into `PromptEntry(text,
output_tokens, line)`; the request factory then draws entries uniformly (seeded).
- JSONL: one object per line: `{"prompt": str}` or `{"messages": [{"role", "content"}, ...]}`
  (the last user message's content is the prompt), optional `"output_tokens": int` (else the
  workload's distribution). Blank lines are skipped; other keys are an error naming the field.
- ShareGPT: a JSON array (or JSONL) of `{"conversations": [{"from": "human", "value": …},
  {"from": "gpt", "value": …}, …]}` (other keys such as "id" are allowed): the first human turn
  is the prompt and the reply after it gives the output length (counted with the tokenizer when
  one is given, else in words), as vLLM's sharegpt sampler does; entries without a human turn
  followed by a reply are skipped, as vLLM does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from loadgen.errors import InputFileError

JSONL_KEYS = {"prompt", "messages", "output_tokens"}


@dataclass(frozen=True)
class PromptEntry:
    text: str
    output_tokens: int | None  # from the file; None: draw from the workload (or count `reply`)
    line: int  # where the entry starts in the file (1-based)
    reply: str | None = None  # ShareGPT: the reference reply, counted in tokens for max_tokens


def load_prompt_file(path: str | Path, source: str) -> list[PromptEntry]:
    """All usable entries of a JSONL or ShareGPT file; raises InputFileError on bad input."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(str(path), None, None, "no such file")
    text = path.read_text(encoding="utf-8")
    if source == "jsonl":
        entries = [_jsonl_entry(path, line, obj) for line, obj in iter_json_objects(path, text)]
    elif source == "sharegpt":
        entries = [
            e
            for e in (
                _sharegpt_entry(path, line, obj) for line, obj in iter_json_objects(path, text)
            )
            if e
        ]
    else:
        raise ValueError(f"source must be jsonl or sharegpt, got {source!r}")
    if not entries:
        raise InputFileError(str(path), None, None, f"no usable {source} entries")
    return entries


def iter_json_objects(path: Path, text: str):
    """(line, object) for a JSON array of objects or for JSON Lines; errors name the line."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from _iter_array(path, text)
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(
                str(path), number, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
            ) from None
        if not isinstance(obj, dict):
            raise InputFileError(
                str(path), number, None, f"expected an object, got {type(obj).__name__}"
            )
        yield number, obj


def _iter_array(path: Path, text: str):
    """Objects of a top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1

    def line_at(p: int) -> int:
        return text.count("\n", 0, p) + 1

    def skip(p: int) -> int:
        while p < len(text) and text[p] in " \t\r\n":
            p += 1
        return p

    pos = skip(pos)
    if pos < len(text) and text[pos] == "]":
        return
    while True:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InputFileError(
                str(path), line_at(exc.pos), None, f"invalid JSON: {exc.msg}"
            ) from None
        if not isinstance(obj, dict):
            raise InputFileError(
                str(path), line_at(pos), None, f"expected an object, got {type(obj).__name__}"
            )
        yield line_at(pos), obj
        pos = skip(end)
        if pos < len(text) and text[pos] == ",":
            pos = skip(pos + 1)
        elif pos < len(text) and text[pos] == "]":
            return
        else:
            raise InputFileError(
                str(path), line_at(pos), None, "expected ',' or ']' after an entry"
            )


def _jsonl_entry(path: Path, line: int, obj: dict) -> PromptEntry:
    for key in obj:
        if key not in JSONL_KEYS:
            raise InputFileError(
                str(path), line, key, f"unknown field (valid: {', '.join(sorted(JSONL_KEYS))})"
            )
    if ("prompt" in obj) == ("messages" in obj):
        raise InputFileError(
            str(path), line, "prompt", "give exactly one of 'prompt' or 'messages'"
        )
    if "prompt" in obj:
        text = obj["prompt"]
        if not isinstance(text, str) or not text.strip():
            raise InputFileError(str(path), line, "prompt", "must be a non-empty string")
    else:
        text = _last_user_message(path, line, obj["messages"])
    return PromptEntry(text, _output_tokens(path, line, obj.get("output_tokens")), line)


def _last_user_message(path: Path, line: int, messages) -> str:
    if not isinstance(messages, list) or not messages:
        raise InputFileError(
            str(path), line, "messages", "must be a non-empty list of {role, content}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise InputFileError(str(path), line, f"messages[{i}].content", "must be a string")
        if message.get("role") not in ("system", "user", "assistant", "developer"):
            raise InputFileError(
                str(path),
                line,
                f"messages[{i}].role",
                f"must be system, user, assistant or developer, got {message.get('role')!r}",
            )
    users = [m["content"] for m in messages if m["role"] == "user"]
    if not users:
        raise InputFileError(str(path), line, "messages", "has no user message")
    return users[-1]


def _output_tokens(path: Path, line: int, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputFileError(
            str(path), line, "output_tokens", f"must be an integer >= 1, got {value!r}"
        )
    return value


def _sharegpt_entry(path: Path, line: int, obj: dict) -> PromptEntry | None:
    turns = obj.get("conversations")
    if not isinstance(turns, list):
        raise InputFileError(str(path), line, "conversations", "must be a list of {from, value}")
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise InputFileError(str(path), line, f"conversations[{i}].value", "must be a string")
        if not isinstance(turn.get("from"), str):
            raise InputFileError(str(path), line, f"conversations[{i}].from", "must be a string")
    for i in range(len(turns) - 1):
        if (
            turns[i]["from"] == "human"
            and turns[i + 1]["from"] == "gpt"
            and turns[i]["value"].strip()
        ):
            return PromptEntry(turns[i]["value"], None, line, reply=turns[i + 1]["value"])
    return None
