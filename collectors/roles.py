"""Name the role of a process of an engine's tree from its command line (stdlib only).

What: `role_from_cmdline(argv)` maps a process's argv (as /proc/<pid>/cmdline shows it, which
includes a title set with setproctitle) to a role such as `EngineCore`; `None` when no rule
matches. `role_of(...)` adds the launcher's word for the root process and a fallback.
Why: the GC hook (inside each process) and the samplers (outside) must name a process alike, so
evidence can say "EngineCore" rather than a pid. vLLM titles its processes with
setproctitle (`VLLM::EngineCore`, `VLLM::Worker…`, `VLLM::APIServer`); the engine's tensor-parallel
ranks are multiprocessing spawn children (argv carries `multiprocessing.spawn`); Python's own
helper processes (resource tracker, forkserver) are named so they are not mistaken for workers.
This file is loaded by path from the GC hook in processes that cannot import `collectors`, so it
imports nothing outside the standard library.
"""

from __future__ import annotations

# (substring of the joined argv, role, reason); the first match wins, so specific rules come first.
ROLE_RULES: tuple[tuple[str, str, str], ...] = (
    ("VLLM::EngineCore", "EngineCore", "vLLM's engine-core process titles itself so"),
    ("VLLM::Worker", "Worker", "vLLM's model workers (VLLM::Worker, VLLM::Worker_TP1, …)"),
    ("VLLM::APIServer", "api_server", "vLLM's API server title in multi-server mode"),
    ("vllm.entrypoints", "api_server", "python -m vllm.entrypoints.openai.api_server"),
    ("vllm serve", "api_server", "the vllm console script"),
    ("multiprocessing.resource_tracker", "resource_tracker", "Python's resource tracker helper"),
    ("multiprocessing.forkserver", "forkserver", "Python's forkserver helper"),
    ("-m engine serve", "engine", "spikelens' own engine server"),
    ("multiprocessing.spawn", "spawn_child", "a multiprocessing spawn child (e.g. a TP rank)"),
)


def role_from_cmdline(argv: list[str] | tuple[str, ...] | str) -> str | None:
    """The role whose rule matches argv (a list or the joined string), or None."""
    text = argv if isinstance(argv, str) else " ".join(argv)
    for needle, role, _reason in ROLE_RULES:
        if needle in text:
            return role
    return None


def read_cmdline(pid: int | str = "self") -> list[str]:
    """argv of a live process from /proc (empty when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    # setproctitle may overwrite argv with one string padded by NULs or spaces
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def role_of(argv: list[str], is_root: bool, root_role: str | None) -> str:
    """Role of a process: a title rule first (vLLM retitles its root too), then the launcher's
    word for the root, then `child` for any other descendant."""
    role = role_from_cmdline(argv)
    if role is not None and role != "spawn_child":
        return role
    if is_root and root_role:
        return root_role
    if role is not None:
        return f"{root_role}:{role}" if root_role else role
    return f"{root_role}:child" if root_role else "child"
