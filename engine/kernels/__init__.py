"""Triton kernels for the penalty and sampling stages (the GPU backend of engine.sampling).

Importing this package imports Triton; engine.sampling.backend treats an import failure as "no
Triton" and falls back to the torch reference. On the CPU the kernels run only under the Triton
interpreter (TRITON_INTERPRET=1 set before `import triton`), which is how the tests check them.
"""

import triton  # noqa: F401  (fail here, at import, when Triton is missing)

from engine.kernels.penalties import fused_penalties_temperature
from engine.kernels.sample import triton_sample
from engine.kernels.topk_topp_sample import filtered_sample

__all__ = ["filtered_sample", "fused_penalties_temperature", "triton_sample"]
