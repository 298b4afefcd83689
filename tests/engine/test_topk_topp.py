"""min-p / top-k / top-p vs transformers' warpers (per row, since HF takes one value per batch)."""

import math

import pytest
import torch
from transformers import MinPLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from engine.sampling.topk_topp import apply_min_p, apply_top_k_top_p

V = 200
NO_IDS = torch.zeros(1, 0, dtype=torch.long)


def _logits(seed, rows=1):
    return torch.randn(rows, V, generator=torch.Generator().manual_seed(seed)) * 2


@pytest.mark.parametrize("k", [1, 5, 50, V])
def test_top_k_matches_hf(k):
    logits = _logits(k)
    ours = apply_top_k_top_p(logits, torch.tensor([k]), None)
    assert torch.equal(ours, TopKLogitsWarper(k)(NO_IDS, logits.clone()))


def test_top_k_keeps_ties():
    logits = torch.tensor([[3.0, 1.0, 3.0, 3.0, 0.0]])
    ours = apply_top_k_top_p(logits, torch.tensor([2]), None)
    assert torch.isfinite(ours).tolist() == [[True, False, True, True, False]]


@pytest.mark.parametrize("p", [0.05, 0.5, 0.9, 1.0])
def test_top_p_matches_hf(p):
    logits = _logits(int(p * 100))
    ours = apply_top_k_top_p(logits, None, torch.tensor([p]))
    assert torch.equal(ours, TopPLogitsWarper(p)(NO_IDS, logits.clone()))


def test_top_p_keeps_top_token_even_when_tiny_p():
    logits = torch.tensor([[0.0, 0.0, 0.1]])
    ours = apply_top_k_top_p(logits, None, torch.tensor([1e-6]))
    assert torch.isfinite(ours).tolist() == [[False, False, True]]


@pytest.mark.parametrize("min_p", [0.0, 0.05, 0.3, 1.0])
def test_min_p_matches_hf(min_p):
    logits = _logits(int(min_p * 100) + 7)
    ours = apply_min_p(logits, torch.tensor([min_p]))
    assert torch.equal(ours, MinPLogitsWarper(min_p)(NO_IDS, logits.clone()))


def test_per_row_values_match_hf_row_by_row():
    logits = _logits(3, rows=3)
    ks, ps, mps = [3, V, 40], [0.8, 0.6, 1.0], [0.1, 0.0, 0.02]
    ours = apply_top_k_top_p(
        apply_min_p(logits, torch.tensor(mps)), torch.tensor(ks), torch.tensor(ps)
    )
    for row in range(3):
        # Our order (min-p, top-k, top-p) composed from HF warpers.
        expected = (
            MinPLogitsWarper(mps[row])(NO_IDS, logits[row : row + 1].clone())
            if mps[row]
            else logits[row : row + 1]
        )
        expected = TopPLogitsWarper(ps[row])(
            NO_IDS, TopKLogitsWarper(ks[row])(NO_IDS, expected.clone())
        )
        assert torch.equal(ours[row : row + 1], expected)


def test_where_hf_default_order_differs():
    """HF runs top-p before min-p; with min-p removing tail mass first, our top-p keeps fewer tokens."""
    logits = torch.log(torch.tensor([[0.40, 0.30, 0.10] + [0.2 / 20] * 20]))
    ours = apply_top_k_top_p(apply_min_p(logits, torch.tensor([0.1])), None, torch.tensor([0.75]))
    hf = MinPLogitsWarper(0.1)(NO_IDS, TopPLogitsWarper(0.75)(NO_IDS, logits.clone()))
    # min-p keeps {0.40, 0.30, 0.10} -> renormalised 0.5, 0.375, 0.125; top-p 0.75 then keeps two.
    assert torch.isfinite(ours).sum() == 2
    # HF: top-p over the full mass keeps 0.40+0.30+0.10 (0.8 >= 0.75) -> three; min-p keeps them.
    assert torch.isfinite(hf).sum() == 3
    assert ours[0, 0] == logits[0, 0] and ours[0, 2] == -math.inf
