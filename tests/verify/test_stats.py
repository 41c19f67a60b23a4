"""`specframe.testing.stats`: G-test, chi-square tail, proportion test and the exact toy laws."""

from __future__ import annotations

import pytest
import torch

from specframe.sampling import probs
from specframe.testing.stats import (
    chi2_sf,
    conditional_g_test,
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


def null_tables(sims: int, contexts: int = 24, vocab: int = 6, n: int = 6000, seed: int = 0
                ) -> tuple[torch.Tensor, torch.Tensor]:  # [sims, C, V] counts, [C, V] law
    """``sims`` count tables drawn from a known conditional law, the contexts' counts random (the margins)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    law = rng.dirichlet(np.full(vocab, 2.0), size=contexts)  # [C, V]
    context_p = rng.dirichlet(np.full(contexts, 4.0))
    margins = rng.multinomial(n, context_p, size=sims)  # [sims, C]
    tables = rng.multinomial(margins, law)  # [sims, C, V]
    return torch.from_numpy(tables).double(), torch.from_numpy(law)


def test_conditional_g_test_has_the_degrees_of_freedom_of_fitted_margins() -> None:
    """Under the null the conditional test's p-values are about uniform (cells - contexts degrees of freedom);
    the flattened test with cells - 1 (the auto-budget G-test's former count) is far too conservative: it
    almost never rejects at 10 %, which is what left its negative control short of power."""
    tables, law = null_tables(200)
    fitted = [conditional_g_test(t, law) for t in tables]
    assert all(24 * 5 - 6 <= r.dof <= 24 * 5 for r in fitted)  # cells - contexts (small cells pooled)
    rate = sum(r.p_value < 0.1 for r in fitted) / len(fitted)
    assert 0.04 <= rate <= 0.18 and 0.38 <= sum(r.p_value for r in fitted) / len(fitted) <= 0.62
    flattened = []
    for t in tables:
        expected = t.sum(1, keepdim=True) * law
        flattened.append(g_test(t, expected / expected.sum()))
    assert all(r.dof > 24 * 5 for r in flattened)
    assert sum(r.p_value < 0.1 for r in flattened) / len(flattened) < 0.02


def test_conditional_g_test_rejects_a_slightly_wrong_law_and_flags_impossible_outcomes() -> None:
    tables, law = null_tables(1, n=60000)
    tilted = law.clone()
    tilted[:, 0] *= 1.25  # a quarter too much mass on one outcome in every context
    tilted /= tilted.sum(1, keepdim=True)
    assert conditional_g_test(tables[0], law).p_value > 1e-3
    assert conditional_g_test(tables[0], tilted).p_value < 1e-6
    zero = law.clone()
    zero[3, 1] = 0.0
    zero[3] /= zero[3].sum()
    res = conditional_g_test(tables[0], zero)
    assert res.p_value == 0.0 and res.impossible == int(tables[0][3, 1])
    worked = conditional_g_test(torch.tensor([[50.0, 50.0], [45.0, 5.0]]),
                                torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    assert worked.dof == 2 and worked.statistic == pytest.approx(0.0, abs=1e-9) and worked.p_value > 0.99
