"""row_argmax gives torch.argmax's ids: random rows, ties (first index wins), -inf, NaN,
strided views, fp64, and the dtypes it leaves to torch."""

import math

import pytest
import torch

from engine.sampling.row_argmax import row_argmax


@pytest.mark.parametrize("seed", range(5))
def test_matches_torch_on_random_rows_with_ties_inf_and_nan(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 50, (64, 32000), generator=g).float()  # many exact ties per row
    x[3] = -math.inf
    x[4, 17] = math.nan
    x[5, [100, 9000]] = math.nan  # the first NaN wins
    got = row_argmax(x)
    assert got.dtype == torch.int64 and got.shape == (64,)
    assert torch.equal(got, x.argmax(dim=-1))


def test_strided_views_and_fp64():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(32, 4000, generator=g, dtype=torch.float64)
    assert torch.equal(row_argmax(x), x.argmax(dim=-1))
    assert torch.equal(row_argmax(x[::2, ::3]), x[::2, ::3].argmax(dim=-1))
    assert torch.equal(row_argmax(x.t()), x.t().argmax(dim=-1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_other_dtypes_go_through_torch(dtype):
    x = torch.randn(8, 1000, generator=torch.Generator().manual_seed(1)).to(dtype)
    assert torch.equal(row_argmax(x), x.argmax(dim=-1))
