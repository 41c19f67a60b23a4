"""The toy target, drafter and corrector of `specframe.testing.toy`."""

from __future__ import annotations

import pytest
import torch

from specframe.interfaces import DecodeState
from specframe.testing.toy import ToyCorrector, ToyDrafter, ToyTarget
from specframe.tree import DraftTree
from specframe.types import SamplingParams


def test_forward_tree_scores_each_node_from_its_own_path() -> None:
    target = ToyTarget.random(6, seed=0)
    out = target.prefill(torch.tensor([[1, 2]]))
    assert torch.equal(out.logits[0, 0], target.logits_after([1, 2]))
    tree = DraftTree.from_lists([4, 0, 5, 3, 1], [-1, 0, 0, 1, 3])
    logits = target.forward_tree(tree).logits
    for node in range(5):
        path_tokens = [1, 2] + [int(tree.tokens[0, i]) for i in tree.path_to(0, node)]
        assert torch.equal(logits[0, node], target.logits_after(path_tokens)), node


def test_logits_depend_on_the_last_two_tokens() -> None:
    target = ToyTarget.random(6, seed=0)
    assert not torch.equal(target.logits_after([0, 3]), target.logits_after([1, 3]))
    assert torch.equal(target.logits_after([3]), target.logits_after([target.start_token, 3]))


def test_commit_appends_the_accepted_path_per_row() -> None:
    target = ToyTarget.random(5, seed=1)
    target.prefill(torch.tensor([[1, 2], [3, 4]]))
    tree = DraftTree.stack([DraftTree.from_lists([0, 1, 2], [-1, 0, 1]), DraftTree.from_lists([3, 4], [-1, 0])])
    target.commit(tree, torch.tensor([[0, 1, 2], [0, -1, -1]]))
    assert target.cached_tokens(0) == [1, 2, 0, 1, 2]
    assert target.cached_tokens(1) == [3, 4, 3]
    assert target.cache_lens.tolist() == [5, 3]
    with pytest.raises(ValueError, match="cache_lens"):
        _ = target.cache_len
    out = target.forward_tree(DraftTree.stack([DraftTree.from_lists([4], [-1]), DraftTree.from_lists([0], [-1])]))
    assert torch.equal(out.logits[0, 0], target.logits_after([2, 4]))
    assert torch.equal(out.logits[1, 0], target.logits_after([3, 0]))
    target.reset()
    assert target.cache_len == 0


def _state(tokens: list[int]) -> DecodeState:
    return DecodeState(tokens=torch.tensor([tokens]), prompt_len=len(tokens) - 1, sampling=SamplingParams(),
                       seed=0)


def test_drafter_at_distance_zero_proposes_the_target_rollout() -> None:
    target = ToyTarget.random(6, seed=2)
    proposal = ToyDrafter(target, depth=3, num_candidates=4, distance=0.0).propose(_state([1, 5]))
    assert proposal.tokens.shape == (1, 3, 4) and proposal.logits.shape == (1, 3, 6)
    assert torch.allclose(proposal.logits[0, 0].double(), target.logits_after([1, 5]), atol=1e-6)
    x1 = int(proposal.tokens[0, 0, 0])
    assert torch.allclose(proposal.logits[0, 1].double(), target.logits_after([5, x1]), atol=1e-6)
    assert bool((proposal.logprobs[..., :-1] >= proposal.logprobs[..., 1:]).all())  # sorted descending


def test_drafter_distance_moves_it_away_and_pads_when_k_exceeds_v() -> None:
    target = ToyTarget.random(4, seed=3)
    near = ToyDrafter(target, distance=0.0).propose(_state([1, 2]))
    far = ToyDrafter(target, distance=2.0, num_candidates=6).propose(_state([1, 2]))
    assert not torch.allclose(near.logits, far.logits)
    assert far.tokens.shape[-1] == 6 and bool(torch.isinf(far.logprobs[..., 4:]).all())


def test_corrector_depends_on_the_parent_and_normalises_over_candidates() -> None:
    target = ToyTarget.random(6, seed=4)
    proposal = ToyDrafter(target, num_candidates=3).propose(_state([1, 2]))
    corrector = ToyCorrector(6, strength=1.0)
    lp = corrector.child_logprobs(proposal, 2, torch.tensor([[0, 1]]), torch.zeros(1, 2, 0))
    assert lp.shape == (1, 2, 3)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(1, 2))
    assert not torch.allclose(lp[0, 0], lp[0, 1])
    flat = ToyCorrector(6, strength=0.0).child_logprobs(proposal, 2, torch.tensor([[0, 1]]), torch.zeros(1, 2, 0))
    assert torch.allclose(flat[0, 0], flat[0, 1])
