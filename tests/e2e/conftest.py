"""The end-to-end tests' support module (vllm_support) is importable, as runbuilder is for the
warehouse tests."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
