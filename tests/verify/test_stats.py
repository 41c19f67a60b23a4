"""`specframe.testing.stats`: G-test, chi-square tail, proportion test and the exact toy laws."""

from __future__ import annotations

import pytest
import torch

from specframe.sampling import probs
from specframe.testing.stats import (
    chi2_sf,
    exact_first_two_law,
    first_two_tokens,
    g_test,
    joint_counts,
    proportion_test,
)
from specframe.testing.toy import ToyTarget
from specframe.tree import DraftTree
from specframe.types import SamplingParams, VerifyResult


def test_chi2_sf_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for x, dof in [(0.5, 1), (3.0, 2), (40.0, 35), (200.0, 35), (12.0, 15)]:
        assert chi2_sf(x, dof) == pytest.approx(float(stats.chi2.sf(x, dof)), rel=1e-9, abs=1e-300)


def test_g_test_accepts_the_true_law_and_rejects_a_wrong_one() -> None:
    gen = torch.Generator().manual_seed(0)
    law = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    draws = torch.multinomial(law, 10_000, replacement=True, generator=gen)
    counts = torch.bincount(draws, minlength=3).double()
    assert g_test(counts, law).p_value > 1e-6
    assert g_test(counts, torch.tensor([0.45, 0.35, 0.2])).p_value < 1e-6


def test_g_test_flags_impossible_cells_and_pools_small_ones() -> None:
    res = g_test(torch.tensor([5.0, 5.0, 1.0]), torch.tensor([0.5, 0.5, 0.0]))
    assert res.impossible == 1 and res.p_value == 0.0
    pooled = g_test(torch.tensor([50.0, 48.0, 1.0, 1.0]), torch.tensor([0.49, 0.49, 0.01, 0.01]))
    assert pooled.dof == 2  # the two small cells form one


def test_proportion_test() -> None:
    assert proportion_test(500, 1000, 0.5) == pytest.approx(1.0)
    assert proportion_test(600, 1000, 0.5) < 1e-6


def test_exact_first_two_law_is_the_product_of_conditionals() -> None:
    target = ToyTarget.random(5, seed=1)
    params = SamplingParams(temperature=0.7, top_p=0.9)
    law = exact_first_two_law(target, prev2=2, root=3, params=params)
    assert law.sum().item() == pytest.approx(1.0)
    first = probs(target.logits_after([2, 3]), params).double()
    assert torch.allclose(law.sum(dim=1), first)
    assert torch.allclose(law[1] / law[1].sum(), probs(target.logits_after([3, 1]), params).double())


def test_first_two_tokens_uses_the_round_then_the_exact_conditional() -> None:
    target = ToyTarget.random(5, seed=2)
    tree = DraftTree.stack([DraftTree.from_lists([3, 1, 4], [-1, 0, 1])] * 3)
    result = VerifyResult(accepted_nodes=torch.tensor([[0, 1, 2], [0, 1, -1], [0, -1, -1]]),
                          num_accepted=torch.tensor([2, 1, 0]), bonus_token=torch.tensor([0, 2, 4]))
    params = SamplingParams(temperature=0.0)
    first, second = first_two_tokens(result, tree, target, params, torch.Generator())
    assert first.tolist() == [1, 1, 4]
    assert second[:2].tolist() == [4, 2]
    assert int(second[2]) == int(target.logits_after([3, 4]).argmax())


def test_joint_counts() -> None:
    counts = joint_counts(torch.tensor([0, 1, 1]), torch.tensor([2, 0, 0]), 3)
    assert counts.tolist() == [[0, 0, 1], [2, 0, 0], [0, 0, 0]]
