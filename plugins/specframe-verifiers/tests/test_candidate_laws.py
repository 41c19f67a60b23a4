"""Draft laws at their own size: a sampled tree records ``[B, N, K]`` candidate laws, nothing of the vocabulary's
size survives the builder or is copied by the round's tree operations, and the rejection verifiers decide exactly
as they do from the same laws laid out over the whole vocabulary (``child_q=``), repeated candidates included.
(That the laws are the right ones is the distribution tests' part: test_verifier_losslessness.py and
test_parent_conditioned_laws.py.)

The vocabulary here (V = 30,000) is far larger than the candidates (K = 4), as in a real model; some candidate
lists repeat a token (a drafter may), which a candidate law must count once.
"""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch
from specframe_verifiers import ChainRejectionVerifier, SampledTreeBuilder, TreeRejectionVerifier

from specframe.builtin.identity import IdentityCorrector
from specframe.decode.rounds import merge_rows
from specframe.interfaces import RoundContext
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree
from specframe.types import DraftProposal, SamplingParams

V, K, DEPTH, ROWS = 30_000, 4, 3, 6
SETTINGS = {"T1": SamplingParams(temperature=1.0), "T0.7-p0.9": SamplingParams(temperature=0.7, top_p=0.9),
            "T0": SamplingParams(temperature=0.0)}


def proposal(seed: int) -> DraftProposal:
    """ROWS rows of DEPTH x K candidates; rows 1 and 4 list a token twice at depth 1 (with a different log-prob)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (ROWS, DEPTH, K), generator=g)
    tokens[1, 0, 2] = tokens[1, 0, 0]
    tokens[4, 0, 3] = tokens[4, 0, 1]
    logprobs = torch.sort(torch.log_softmax(torch.randn(ROWS, DEPTH, K, generator=g), -1), -1, descending=True)
    return DraftProposal(root=torch.randint(0, V, (ROWS,), generator=g), tokens=tokens, logprobs=logprobs.values)


def build(params: SamplingParams, branching: tuple[int, ...], seed: int = 0) -> DraftTree:
    ctx = RoundContext(budget=8, sampling=params, noise=RoundNoise.from_seed(seed, root=10))
    return SampledTreeBuilder(branching, V).build(proposal(seed), IdentityCorrector(), ctx)


def vocabulary_sized(tree: DraftTree) -> list[str]:
    """The tree's tensor fields with a dimension of the vocabulary's size."""
    return [f.name for f in fields(tree) if isinstance(t := getattr(tree, f.name), torch.Tensor) and V in t.shape]


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_sampled_trees_and_the_rounds_tree_operations_hold_nothing_vocabulary_sized(setting: str) -> None:
    tree = build(SETTINGS[setting], (2, 2, 1))  # cut to the budget by the builder's own subtree
    assert tree.child_ids is not None and tree.child_probs is not None and tree.child_vocab == V
    assert tuple(tree.child_ids.shape) == tuple(tree.child_probs.shape) == (ROWS, tree.capacity, K)
    assert vocabulary_sized(tree) == []
    drafting = [0, 2, 3, 5]
    picked = tree.select_rows(drafting)
    roots = torch.arange(ROWS + 2)
    merged = merge_rows(picked, drafting, roots, ROWS + 2)  # two more rows decode plainly this round
    kept = merged.subtree(merged.valid & (merged.depth <= 1))
    for t in (picked, merged, kept, DraftTree.stack([tree.row(0), tree.row(3)])):
        assert vocabulary_sized(t) == []
    q = merged.child_q  # [ROWS + 2, N, V], the dense view (built on reading)
    assert q is not None and torch.equal(q[drafting], picked.child_q)  # type: ignore[arg-type]
    plain = [b for b in range(ROWS + 2) if b not in drafting]
    assert not q[plain].any()  # rows that did not draft carry no law


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_candidate_law_is_the_law_the_children_were_drawn_from(setting: str) -> None:
    tree = build(SETTINGS[setting], (3, 2, 1))
    q = tree.child_q  # [B, N, V]
    assert q is not None
    leaves_or_dead = q.sum(-1) == 0
    assert torch.allclose(q.sum(-1)[~leaves_or_dead].double(), torch.ones(1, dtype=torch.float64), atol=1e-5)
    parent = tree.parent.clamp(min=0)
    q_token = q.gather(1, parent[..., None].expand_as(q)).gather(2, tree.tokens[..., None])[..., 0]  # [B, N]
    child = tree.valid & (tree.parent >= 0)
    assert bool((q_token[child] > 0).all())  # every drawn child is possible under its parent's law
    assert torch.allclose(q_token[child].log(), tree.logq[child], atol=1e-5)  # and is recorded with its log-prob
    assert int(tree.child_ids.shape[-1]) == K  # type: ignore[union-attr]
    for row in (1, 4):  # the repeated token is counted once: its law is that of the first listing
        first = tree.child_probs[row, 0]  # type: ignore[index]
        repeat = 2 if row == 1 else 3
        assert float(first[repeat]) == 0.0


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("verifier", [TreeRejectionVerifier(), ChainRejectionVerifier()], ids=lambda v: v.name)
def test_rejection_verifiers_decide_as_from_the_dense_laws(verifier: TreeRejectionVerifier, setting: str) -> None:
    params = SETTINGS[setting]
    branching = (1, 1, 1) if isinstance(verifier, ChainRejectionVerifier) else (3, 2, 1)
    for seed in range(4):
        tree = build(params, branching, seed)
        dense = DraftTree(tokens=tree.tokens, parent=tree.parent, depth=tree.depth, logq=tree.logq, score=tree.score,
                          valid=tree.valid, depth_bound=tree.depth_bound, width_bound=tree.width_bound,
                          child_q=tree.child_q)
        logits = torch.randn(ROWS, tree.capacity, V, generator=torch.Generator().manual_seed(100 + seed)) * 3
        logits[:, :, tree.tokens.unique()] += 6.0  # the target likes the drafts: some are accepted, some not
        ctx = RoundContext(budget=8, sampling=params, noise=RoundNoise.from_seed(seed + 50, root=10))
        ours, reference = verifier.verify(tree, logits, ctx), verifier.verify(dense, logits, ctx)
        assert torch.equal(ours.accepted_nodes, reference.accepted_nodes)
        assert torch.equal(ours.bonus_token, reference.bonus_token)
