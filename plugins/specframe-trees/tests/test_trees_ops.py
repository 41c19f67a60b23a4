"""Tensor helpers: deterministic tie-breaking, unique-row evaluation and the pre-packed linear kernel."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from specframe_trees.heads.linear import FrozenLinear

from specframe.tree.ops import first_argmax, masked_log_softmax, stable_topk

NEG_INF = -math.inf


def test_stable_topk_keeps_index_order_among_ties() -> None:
    x = torch.tensor([[0.5, 1.0, 1.0, NEG_INF, 1.0], [2.0, 2.0, 2.0, 2.0, 2.0]])
    values, indices = stable_topk(x, 3)
    assert indices.tolist() == [[1, 2, 4], [0, 1, 2]]
    assert values.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]


def test_first_argmax_takes_the_lowest_index() -> None:
    x = torch.tensor([[0.25, 0.75, 0.75], [NEG_INF, NEG_INF, NEG_INF], [3.0, 1.0, 3.0]])
    best, index = first_argmax(x)
    assert index.tolist() == [1, 0, 0]
    assert best.tolist() == [0.75, NEG_INF, 3.0]


def test_masked_log_softmax_maps_all_masked_rows_to_minus_infinity() -> None:
    x = torch.tensor([[0.0, NEG_INF], [NEG_INF, NEG_INF]])
    out = masked_log_softmax(x)
    assert out.tolist() == [[0.0, NEG_INF], [NEG_INF, NEG_INF]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("rows", [1, 2, 5, 12])
def test_frozen_linear_equals_f_linear(dtype: torch.dtype, rows: int) -> None:
    g = torch.Generator().manual_seed(rows)
    weight = torch.randn(96, 80, generator=g).to(dtype)
    x = torch.randn(2, rows, 80, generator=g).to(dtype)
    proj = FrozenLinear(weight)
    if dtype == torch.float64:
        assert not proj.packed  # no packed kernel: plain F.linear
    tol = {"atol": 5e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-5}
    torch.testing.assert_close(proj(x), F.linear(x, weight), **tol)
