"""The end-to-end tests' support module (support/vllm_support.py) is importable, as runbuilder is
for the warehouse tests. Only the support folder goes on sys.path: tests/e2e itself holds a
`scenarios/` folder that would shadow the installed `scenarios` package."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "support"))
