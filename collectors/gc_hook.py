"""The environment a launcher gives a child so spikelens' GC hook runs in it and its descendants.

What: `hook_env(collect_dir, role, env)` returns a copy of `env` with the hook's directory
(`collectors/site`, holding only `sitecustomize.py`) prepended to PYTHONPATH and the variables the
hook reads: SPIKELENS_COLLECT_DIR (where `gc-<pid>.jsonl` files go) and SPIKELENS_COLLECT_ROLE
(the root's role). Any SPIKELENS_COLLECT_ROOT_PID inherited from this process is dropped, so the
child becomes the root of its own tree.
Why here and not in each engine's launcher: spikelens' engine and vLLM are started alike.
"""

from __future__ import annotations

import os
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
DIR_ENV, ROLE_ENV, ROOT_ENV = (
    "SPIKELENS_COLLECT_DIR",
    "SPIKELENS_COLLECT_ROLE",
    "SPIKELENS_COLLECT_ROOT_PID",
)
# "1": the hook disables automatic garbage collection (gc.freeze(); gc.disable()) in every process
# of the tree at interpreter start: `spikelens confirm`'s memory/GC intervention. Explicit
# gc.collect() calls still run.
GC_OFF_ENV = "SPIKELENS_GC_OFF"


def hook_env(
    collect_dir: str | Path, role: str, env: dict[str, str] | None = None, gc_off: bool = False
) -> dict[str, str]:
    """`env` (default os.environ) plus what the GC hook needs; `collect_dir` is created.
    `gc_off`: the hook also turns automatic GC off in every process of the tree (GC_OFF_ENV)."""
    if not role or not role.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"gc hook role must be a non-empty word ([A-Za-z0-9_-]), got {role!r}")
    collect_dir = Path(collect_dir).resolve()
    collect_dir.mkdir(parents=True, exist_ok=True)
    out = dict(os.environ if env is None else env)
    out.pop(ROOT_ENV, None)
    path = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE_DIR)]
    out["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *path])
    out[DIR_ENV] = str(collect_dir)
    out[ROLE_ENV] = role
    out.pop(GC_OFF_ENV, None)
    if gc_off:
        out[GC_OFF_ENV] = "1"
    return out
