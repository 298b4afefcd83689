"""bench/ is scripts, not an installed package: make `bench.peers` importable for its tests by
naming the folder as a namespace package (no change to sys.path)."""

import sys
import types
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

if "bench" not in sys.modules:
    package = types.ModuleType("bench")
    package.__path__ = [str(BENCH)]
    sys.modules["bench"] = package
