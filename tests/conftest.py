"""Test-wide setup: state (warehouse, Prefect home, runs) goes under .spikelens/test, never the
user's own state directory. Set before `flows` is imported, since importing it configures Prefect."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("SPIKELENS_HOME", str(REPO / ".spikelens" / "test"))
