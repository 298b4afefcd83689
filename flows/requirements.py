"""Optional dependencies per command, checked before the command starts any work.

What: a table command → (extra, modules it imports) and ``require(command)``, which exits with code 2
and one line naming the missing modules and the install command when any is absent. Why: an
optional tool found missing at the end of a long run (the evaluation suite runs ~15 minutes of
scenarios before it scores peers with pandas) wastes the run; checking at the start costs a
``find_spec`` per module, without importing any of them.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

# Install commands of each extra: the Makefile target, and plain pip for a checkout without make.
MAKE_TARGETS = {"eval": "make setup-eval", "test": "make setup-test", "kernels": "make setup-test"}


@dataclass(frozen=True)
class Requirement:
    """What one command (or one part of it) needs beyond the core dependencies."""

    extra: str  # the pyproject optional-dependencies group that installs the modules
    modules: tuple[str, ...]  # import names (not distribution names: causal-learn is causallearn)
    # What to do instead, when the command can run without that part (shown after the install line).
    without: str = ""

    def install_command(self) -> str:
        pip = f"pip install -e '.[{self.extra}]' -c constraints.txt"
        make = MAKE_TARGETS.get(self.extra)
        return f"{make}  (or {pip})" if make else pip


REQUIREMENTS: dict[str, Requirement] = {
    # BARO and NSigma (RCAEval) score beside spikelens; RCAEval imports what it does not declare.
    "evaluate": Requirement(
        "eval",
        (
            "pandas",
            "RCAEval",
            "matplotlib",
            "statsmodels",
            "causallearn",
            "networkx",
            "tqdm",
            "requests",
        ),
        without="or score without the peers: spikelens evaluate --no-peers",
    ),
    # On a GPU the engine samples with Triton kernels; without them it falls back to the torch
    # reference (correct, slower), so this one is a note, not an error (see `note`).
    "engine --device cuda": Requirement(
        "kernels", ("triton",), without="until then sampling runs on the torch reference (slower)"
    ),
    # The Triton kernels vs the torch reference (GPU; the interpreter on a CPU).
    "bench/kernels.py": Requirement("kernels", ("triton",)),
    # The engine against transformers' generate and logits processors.
    "bench/decode.py": Requirement("test", ("transformers",)),
    "bench/sampling.py": Requirement("test", ("transformers",)),
}


class MissingExtra(RuntimeError):
    """A command's optional dependencies are not installed; the message says how to install them."""


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (found by spec, none imported)."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package missing, or a blocked import
            found = False
        if not found:
            missing.append(name)
    return missing


def check(command: str, table: dict[str, Requirement] | None = None) -> None:
    """Raise ``MissingExtra`` naming the missing modules and the install command of ``command``."""
    req = (REQUIREMENTS if table is None else table).get(command)
    if req is None:
        return
    missing = missing_modules(req.modules)
    if missing:
        label = command if command.startswith("bench/") else f"spikelens {command}"
        message = (
            f"{label} needs the {req.extra!r} extra (missing: {', '.join(missing)}); "
            f"install it with: {req.install_command()}"
        )
        raise MissingExtra(message + (f"; {req.without}" if req.without else ""))


def note(command: str) -> str | None:
    """``check``'s message for a part a command can run without (said up front), or None."""
    try:
        check(command)
    except MissingExtra as e:
        return str(e)
    return None


def require(command: str) -> None:
    """``check`` for a command line: print the message to stderr and exit with code 2."""
    import sys

    try:
        check(command)
    except MissingExtra as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
