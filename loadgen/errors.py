"""Errors raised on bad loadgen input.

Why a module of its own: the spec, the prompt sources and the trace readers all raise them, and
callers (flows, CLI) catch one type to show the user a single clear line.
"""


class SpecError(ValueError):
    """A scenario's workload/load block is invalid; the message names the field and valid range."""


class InputFileError(SpecError):
    """A workload, shape or trace file is invalid; the message names the file, line and field."""

    def __init__(self, path: str, line: int | None, field: str | None, problem: str):
        self.path = str(path)
        self.line = line
        self.field = field
        where = self.path + (f":{line}" if line is not None else "")
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {problem}")
