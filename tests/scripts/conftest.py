"""scripts/ is not an installed package: make `scripts.train_small_model` importable for its tests
by naming the folder as a namespace package (no change to sys.path)."""

import sys
import types
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

if "scripts" not in sys.modules:
    package = types.ModuleType("scripts")
    package.__path__ = [str(SCRIPTS)]
    sys.modules["scripts"] = package
