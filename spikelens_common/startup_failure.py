"""Why a server spikelens started did not come up, in one line: the root cause from its log.

What: `StartupFailure.from_log(...)` reads the log of a server that exited (or never answered
/health) and builds an exception whose message is one line: the server, the root cause line of
its log, the log's path and, where the launcher knows one, the fix (`Hint`s, matched against that
line). `root_cause(text)` is the log reading alone.

Why: a server that fails to start prints a stack of tracebacks, often from several processes
(vLLM: the worker's, then EngineCore's, then the API server's "Engine core initialization failed.
See root cause above"). The line that says what is wrong is the first exception line of the
innermost cause — the first traceback printed — not the last line a launcher would quote. Both
engines' launchers (engine/server/launch.py, flows/vllm_process.py) raise this, and the CLI
(flows/cli_run.failure_line) shows its message instead of any traceback.
Standard library only (spikelens_common's rule).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

# What a line may carry before its text: vLLM's process tag "(EngineCore_DP0 pid=123) ", then a
# logging prefix "ERROR 12-03 05:30:01 [core.py:708] " or "2026-12-03 05:30:01,123 ERROR name: ".
_PROCESS_TAG = re.compile(r"^\((?:[\w:.-]+ )?pid=\d+\)\s?")
_LOG_PREFIX = re.compile(
    r"^(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] ?"
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \S*:? ?)"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The last line of a traceback: `ValueError: ...`, `torch.OutOfMemoryError: ...`,
# `Exception: ...`, `SystemExit: 2`; a bare `KeyboardInterrupt` has no colon and is no cause.
_EXCEPTION_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Failure|Warning))"
    r"(?::\s*(?P<message>.*))?$"
)
# argparse's refusal, `api_server.py: error: argument --dtype: invalid choice: ...`, or a
# server's own one-line refusal, `error: engine.kv_blocks: must be ...`
_USAGE_ERROR = re.compile(r"^(?:[\w.-]+: )?error: (?P<message>.+)$")
_TRACEBACK = "Traceback (most recent call last):"
DID_NOT_START = " did not start: "  # in every StartupFailure's line, after the server's name
# Lines that only point at another process's cause: taken only when nothing else is found.
WRAPPERS = (
    "See root cause above",
    "Engine core initialization failed",
    "WorkerProc initialization failed",
    "Worker failed",
    "Worker proc",
)


@dataclass(frozen=True)
class Hint:
    """A known failure and its fix: when `pattern` (a regex, case-insensitive) matches the root
    cause line, the one-line message ends with `fix`."""

    pattern: str
    fix: str

    def matches(self, line: str) -> bool:
        return re.search(self.pattern, line, re.IGNORECASE) is not None


def clean(line: str) -> str:
    """A log line without colour codes, process tag or logging prefix."""
    line = _ANSI.sub("", line.rstrip())
    line = _PROCESS_TAG.sub("", line)
    return _LOG_PREFIX.sub("", line)


def _exception_lines(lines: list[str]) -> Iterable[tuple[int, str, bool]]:
    """(index, cause line, ends a traceback) of every exception or usage-error line."""
    in_traceback = False
    for i, line in enumerate(lines):
        if line.startswith(_TRACEBACK):
            in_traceback = True
            continue
        m = _EXCEPTION_LINE.match(line)
        if m and not m.group("type").endswith("Warning"):
            message = (m.group("message") or "").strip()
            text = f"{m.group('type')}: {message}" if message else m.group("type")
            if m.group("type") != "SystemExit" or in_traceback:
                yield i, text, in_traceback
            in_traceback = False
            continue
        usage = _USAGE_ERROR.match(line)
        if usage:  # a refusal the program itself wrote: as good as a traceback's last line
            yield i, usage.group("message").strip(), True
        if line and not line[0].isspace() and in_traceback and not line.startswith("  "):
            # a traceback's frames are indented; an unindented line that is not its exception
            # line means the block ended without one (cut output)
            in_traceback = line.startswith(("During handling", "The above exception"))


def root_cause(text: str) -> str | None:
    """The root cause line of a failed start's log; None when the log names no error.

    The innermost cause of a chained traceback is printed first, and the first process to fail
    prints first, so the cause is the first exception line. A traceback's own exception line wins
    over an error merely logged; lines that only point elsewhere (WRAPPERS) lose to any other;
    `SystemExit: 1` and the like (an exit code, not a reason) lose too. Continuation lines of a
    multi-line message are not joined: the first line says what is wrong."""
    lines = [clean(raw) for raw in text.splitlines()]
    found = list(_exception_lines(lines))
    if not found:
        return None

    def rank(item: tuple[int, str, bool]) -> tuple[int, int, int]:
        index, line, from_traceback = item
        wrapper = any(w.lower() in line.lower() for w in WRAPPERS)
        bare_exit = re.fullmatch(r"SystemExit(: \d+)?", line) is not None
        return (int(wrapper or bare_exit), int(not from_traceback), index)

    return min(found, key=rank)[1]


def last_words(text: str) -> str | None:
    """The last non-empty line of a log (when no error line is found): what it did last."""
    for raw in reversed(text.splitlines()):
        line = clean(raw).strip()
        if line:
            return line
    return None


class StartupFailure(RuntimeError):
    """A server spikelens started did not come up; str() is the one line the user reads.

    `server` ('vLLM', 'engine'), `reason` (the root cause line, or what is known), `log_path`,
    `fix` (None: none known), `tail` (the log's end, for run.json and debugging, never shown)."""

    def __init__(
        self,
        server: str,
        reason: str,
        log_path: str | Path | None = None,
        fix: str | None = None,
        tail: str = "",
    ):
        self.server, self.reason, self.fix, self.tail = server, reason, fix, tail
        self.log_path = Path(log_path) if log_path is not None else None
        super().__init__(self.line())

    def line(self) -> str:
        """`<server> did not start: <reason> (log: <path>); fix: <fix>` on one line."""
        reason = " ".join(self.reason.split())
        out = f"{self.server}{DID_NOT_START}{reason}"
        if self.log_path is not None:
            out += f" (log: {self.log_path})"
        if self.fix:
            out += f"; fix: {self.fix}"
        return out

    def __reduce__(self):  # picklable across Prefect's result handling
        return (type(self), (self.server, self.reason, self.log_path, self.fix, self.tail))

    @classmethod
    def from_log(
        cls,
        server: str,
        log_path: str | Path,
        what_happened: str,
        hints: Iterable[Hint] = (),
        tail_chars: int = 4000,
    ) -> Self:
        """From the log at `log_path`: `what_happened` (e.g. "exited with 1") when the log
        names no error, else the root cause line; the first matching hint's fix."""
        try:
            text = Path(log_path).read_text(errors="replace")
        except OSError:
            text = ""
        cause = root_cause(text)
        if cause is None:
            words = last_words(text)
            reason = what_happened + (f"; its log ends: {words}" if words else "")
        else:
            reason = cause
        fix = next((h.fix for h in hints if h.matches(reason)), None)
        return cls(server, reason, log_path, fix, text[-tail_chars:])


def startup_failure_in(error: BaseException | None) -> StartupFailure | None:
    """The StartupFailure `error` is or was caused by (its __cause__/__context__ chain)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, StartupFailure):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None
