"""The sampled tree builders: valid trees, q is exactly the law sampled, budget and branching handling."""

from __future__ import annotations

import pytest
import torch
from specframe_verifiers import SampledTreeBuilder
from verifier_scenarios import PROMPT, ROOT, make_corrector, make_drafter, make_target

from specframe.errors import ConfigError, GenerationError
from specframe.interfaces import DecodeState, RoundContext
from specframe.sampling import processed_logprobs
from specframe.sampling.noise import RoundNoise
from specframe.testing.stats import g_test
from specframe.tree import check_tree
from specframe.types import DraftProposal, SamplingParams

T1 = SamplingParams(temperature=1.0)


def _proposal(rows: int, params: SamplingParams, seed: int = 0) -> tuple[DraftProposal, RoundContext]:
    state = DecodeState(tokens=torch.tensor([[*PROMPT, ROOT]]).expand(rows, -1), prompt_len=2, sampling=params,
                        seed=seed)
    ctx = RoundContext(budget=64, sampling=params, noise=RoundNoise.from_seed(seed))
    return make_drafter(make_target()).propose(state), ctx


@pytest.mark.parametrize("params", [T1, SamplingParams(temperature=0.7, top_p=0.9), SamplingParams(0.0)])
@pytest.mark.parametrize("branching", [(1, 1, 1), (3, 2, 1), (4,)])
def test_trees_are_valid_and_children_lie_in_the_support_of_q(branching: tuple[int, ...],
                                                             params: SamplingParams) -> None:
    proposal, ctx = _proposal(50, params)
    tree = SampledTreeBuilder(branching, 6).build(proposal, make_corrector(), ctx)
    assert check_tree(tree, budget=ctx.budget) == []
    assert tree.child_q is not None and tree.child_q.shape == (*tree.tokens.shape, 6)
    parent = tree.parent.clamp(min=0)
    q_parent = torch.gather(tree.child_q, 1, parent[..., None].expand_as(tree.child_q))  # [B, N, V]
    q_tok = q_parent.gather(2, tree.tokens[..., None])[..., 0]
    child = tree.valid & (tree.parent >= 0)
    assert bool((q_tok[child] > 0).all())
    assert torch.allclose(q_tok[child].log(), tree.logq[child].to(q_tok.dtype), atol=1e-6)
    has_children = torch.zeros_like(tree.valid).scatter(1, parent, child)  # [B, N] node has a child
    sums = tree.child_q.sum(dim=-1)
    assert torch.allclose(sums[has_children], torch.ones_like(sums[has_children]), atol=1e-5)
    assert int(tree.max_depth) == len(branching)


def test_root_children_follow_q_without_replacement() -> None:
    """First child ~ q and second child ~ q without the first: the drawn law is exactly the stored q."""
    rows = 20_000
    proposal, ctx = _proposal(rows, T1, seed=4)
    tree = SampledTreeBuilder((2,), 6).build(proposal, make_corrector(), ctx)
    q = tree.child_q[0, 0].double()  # the same law in every row (same root, same proposal)
    first, second = tree.tokens[:, 1], tree.tokens[:, 2]
    assert bool(tree.valid[:, 2].all())
    counts = torch.bincount(first * 6 + second, minlength=36).view(6, 6).double()
    law = q[:, None] * q[None, :] / (1 - q[:, None])  # P(first = a) * P(second = b | first = a)
    law.fill_diagonal_(0.0)
    res = g_test(counts, law)
    assert res.impossible == 0 and res.p_value > 1e-6, res
    # Power: the same counts against the i.i.d. law (with replacement) must fail.
    assert g_test(counts, q[:, None] * q[None, :]).p_value < 1e-6


def test_q_is_the_processed_corrected_candidate_law() -> None:
    params = SamplingParams(temperature=0.7, top_k=3, top_p=0.9)
    proposal, ctx = _proposal(2, params)
    corrector = make_corrector()
    tree = SampledTreeBuilder((1,), 6).build(proposal, corrector, ctx)
    cand_lp = corrector.child_logprobs(proposal, 1, proposal.root[:, None], torch.zeros(2, 1, 0))[:, 0]  # [B, K]
    full = torch.full((2, 6), float("-inf")).scatter(1, proposal.tokens[:, 0], cand_lp)
    assert torch.allclose(tree.child_q[:, 0], processed_logprobs(full, params).exp())


def test_budget_keeps_a_prefix_of_every_child_list() -> None:
    proposal, ctx = _proposal(30, T1)
    ctx = RoundContext(budget=5, sampling=T1, noise=ctx.noise)
    tree = SampledTreeBuilder((3, 3), 6).build(proposal, make_corrector(), ctx)
    assert check_tree(tree, budget=5) == []
    assert bool((tree.num_nodes == 6).all())  # 3 children + the first 2 grandchildren in breadth-first order
    rank = tree.sibling_rank()
    assert tree.parent[0, 4:6].tolist() == [1, 1] and rank[0, 4:6].tolist() == [0, 1]


def test_too_many_depths_is_a_config_error() -> None:
    proposal, ctx = _proposal(1, T1)
    with pytest.raises(ConfigError, match="drafter proposes only 3") as info:
        SampledTreeBuilder((1, 1, 1, 1), 6).build(proposal, make_corrector(), ctx)
    assert info.value.where == "tree_builder.branching"


def test_vocab_size_from_logits_or_error() -> None:
    proposal, ctx = _proposal(1, T1)
    tree = SampledTreeBuilder((2,), None).build(proposal, make_corrector(), ctx)
    assert tree.child_q.shape[-1] == 6
    proposal.logits = None
    with pytest.raises(GenerationError, match="vocabulary size"):
        SampledTreeBuilder((2,), None).build(proposal, make_corrector(), ctx)
