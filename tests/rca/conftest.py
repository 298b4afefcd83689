"""The rca tests' support module (support/spikesignals.py: hand-built RunSignals) is importable."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "support"))
