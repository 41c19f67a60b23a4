"""Closed forms and exact equalities: acceptance rates, greedy against a brute-force oracle, temperature 0."""

from __future__ import annotations

import math

import pytest
import torch
from specframe_verifiers import (
    ChainRejectionVerifier,
    GreedyVerifier,
    SampledTreeBuilder,
    TreeRejectionVerifier,
    WalkVerifier,
)
from verifier_scenarios import PROMPT, ROOT, SETTINGS, make_corrector, make_drafter, make_target, sampled_round

from specframe.errors import ContractError, GenerationError
from specframe.interfaces import DecodeState, RoundContext
from specframe.sampling import probs
from specframe.sampling.noise import RoundNoise
from specframe.testing.stats import proportion_test
from specframe.tree import DraftTree
from specframe.types import SamplingParams

GREEDY = SamplingParams(temperature=0.0)


def _ctx(params: SamplingParams, seed: int = 0) -> RoundContext:
    return RoundContext(budget=64, sampling=params, noise=RoundNoise.from_seed(seed))


# ------------------------------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_chain_first_draft_acceptance_is_sum_of_min(setting: str) -> None:
    """P(first draft accepted) = sum_x min(p(x), q(x)), within a 1e-6 two-sided normal test."""
    rnd = sampled_round(setting, (1, 1))
    result = rnd.verify(ChainRejectionVerifier())
    p = probs(rnd.logits[0, 0], rnd.params).double()
    q = rnd.tree.child_q[0, 0].double()  # identical in every row: the root's draft law
    expected = float(torch.minimum(p, q).sum())
    accepted = int((result.num_accepted >= 1).sum())
    assert 0.05 < expected < 0.95
    assert proportion_test(accepted, rnd.tree.batch_size, expected) >= 1e-6, (accepted, expected)


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_chain_expected_accepted_matches_product_formula(setting: str) -> None:
    """E[accepted] = sum_x m1(x) * (1 + a2(x)) with m1 = min(p1, q1), a2(x) = sum_y min(p2(y|x), q2(y|x))."""
    rnd = sampled_round(setting, (1, 1))
    result = rnd.verify(ChainRejectionVerifier())
    tree = rnd.tree
    m1 = torch.minimum(probs(rnd.logits[0, 0], rnd.params).double(), tree.child_q[0, 0].double())
    expected = 0.0
    for x in m1.nonzero().flatten().tolist():
        row = int((tree.tokens[:, 1] == x).nonzero()[0])  # any row whose first draft is x
        p2 = probs(rnd.target.next_logits(torch.tensor(ROOT), torch.tensor(x)), rnd.params).double()
        a2 = float(torch.minimum(p2, tree.child_q[row, 1].double()).sum())
        expected += float(m1[x]) * (1.0 + a2)
    accepted = result.num_accepted.double()
    z = (float(accepted.mean()) - expected) / (float(accepted.std()) / math.sqrt(accepted.numel()))
    assert abs(z) < 5.0, (float(accepted.mean()), expected)


# ------------------------------------------------------------------------------------- greedy oracle
def _random_tree(gen: torch.Generator, vocab: int) -> DraftTree:
    n = int(torch.randint(1, 13, (1,), generator=gen))
    tokens, parents = [int(torch.randint(vocab, (1,), generator=gen))], [-1]
    for _ in range(1, n):
        i = len(tokens)
        p = int(torch.randint(i, (1,), generator=gen))
        used = {tokens[j] for j in range(1, i) if parents[j] == p}
        free = [t for t in range(vocab) if t not in used]
        if not free:
            continue
        tokens.append(free[int(torch.randint(len(free), (1,), generator=gen))])
        parents.append(p)
    return DraftTree.from_lists(tokens, parents)


def _random_logits(tree: DraftTree, gen: torch.Generator, vocab: int) -> torch.Tensor:  # [1, N, V]
    """Random logits where most nodes' argmax is one of their children, so walks go deep."""
    n = tree.capacity
    logits = torch.randn(1, n, vocab, generator=gen, dtype=torch.float64)
    kids = tree.children()[0]
    for i in range(n):
        if kids[i] and float(torch.rand(1, generator=gen)) < 0.7:
            pick = kids[i][int(torch.randint(len(kids[i]), (1,), generator=gen))]
            logits[0, i, int(tree.tokens[0, pick])] = 5.0
    return logits


def _dfs_oracle(tree: DraftTree, logits: torch.Tensor) -> tuple[list[int], int]:
    """Deepest node whose whole path follows the argmax, found by checking every node's path."""
    best: list[int] = [0]
    argmax = logits[0].argmax(dim=-1).tolist()
    for node in range(int(tree.num_nodes[0])):
        path = tree.path_to(0, node)
        if all(int(tree.tokens[0, path[k + 1]]) == argmax[path[k]] for k in range(len(path) - 1)):
            if len(path) > len(best):
                best = path
    return best, argmax[best[-1]]


def test_greedy_matches_brute_force_oracle_on_random_trees() -> None:
    gen = torch.Generator().manual_seed(123)
    vocab = 5
    trees = [_random_tree(gen, vocab) for _ in range(300)]
    logits = [_random_logits(t, gen, vocab) for t in trees]
    batch = DraftTree.stack(trees)
    padded = torch.zeros(len(trees), batch.capacity, vocab, dtype=torch.float64)
    for b, lg in enumerate(logits):
        padded[b, : lg.shape[1]] = lg[0]
    result = GreedyVerifier().verify(batch, padded, _ctx(GREEDY))
    deep = 0
    for b, (tree, lg) in enumerate(zip(trees, logits, strict=True)):
        path, bonus = _dfs_oracle(tree, lg)
        n = len(path) - 1
        assert int(result.num_accepted[b]) == n
        assert result.accepted_nodes[b, : n + 1].tolist() == path
        assert bool((result.accepted_nodes[b, n + 1 :] == -1).all())
        assert int(result.bonus_token[b]) == bonus
        deep += n >= 2
    assert deep > 30  # the oracle comparison covers deep paths, not just the root


def test_walk_equals_greedy_at_temperature_zero() -> None:
    gen = torch.Generator().manual_seed(7)
    trees = [_random_tree(gen, 5) for _ in range(100)]
    batch = DraftTree.stack(trees)
    logits = torch.randn(len(trees), batch.capacity, 5, generator=gen)
    ctx = _ctx(GREEDY)
    walk, greedy = WalkVerifier().verify(batch, logits, ctx), GreedyVerifier().verify(batch, logits, ctx)
    assert torch.equal(walk.accepted_nodes, greedy.accepted_nodes)
    assert torch.equal(walk.num_accepted, greedy.num_accepted)
    assert torch.equal(walk.bonus_token, greedy.bonus_token)


@pytest.mark.parametrize("verifier", [ChainRejectionVerifier, TreeRejectionVerifier, WalkVerifier])
def test_every_verifier_equals_greedy_on_sampled_trees_at_temperature_zero(verifier: type) -> None:
    """At T = 0 the sampled builder drafts the corrected argmax chain and q, p are point masses."""
    target = make_target()
    ctx = _ctx(GREEDY, seed=3)
    state = DecodeState(tokens=torch.tensor([[*PROMPT, ROOT]]).expand(4, -1), prompt_len=2, sampling=GREEDY,
                        seed=3)
    tree = SampledTreeBuilder((3, 2, 1), target.vocab_size).build(make_drafter(target).propose(state),
                                                                  make_corrector(), ctx)
    assert int(tree.num_nodes.max()) == 4  # a single child per node: the support of q is one token
    target.prefill(torch.tensor([PROMPT]).expand(4, -1))
    logits = target.forward_tree(tree).logits
    got = verifier().verify(tree, logits, ctx)
    want = GreedyVerifier().verify(tree, logits, ctx)
    assert torch.equal(got.accepted_nodes, want.accepted_nodes)
    assert torch.equal(got.bonus_token, want.bonus_token)


# --------------------------------------------------------------------------------------- input errors
def test_rejection_verifiers_need_child_q() -> None:
    tree = DraftTree.from_lists([1, 2, 3], [-1, 0, 1])
    logits = torch.randn(1, 3, 5)
    for verifier in (ChainRejectionVerifier(), TreeRejectionVerifier()):
        with pytest.raises(GenerationError, match="child_q") as info:
            verifier.verify(tree, logits, _ctx(SamplingParams(temperature=1.0)))
        assert "walk" in info.value.hint


def test_chain_rejection_rejects_branching_trees() -> None:
    tree = DraftTree.from_lists([1, 2, 3], [-1, 0, 0])
    tree = DraftTree(**{**tree.__dict__, "child_q": torch.full((1, 3, 5), 0.2)})
    with pytest.raises(ContractError, match="several children") as info:  # a builder bug, not bad input
        ChainRejectionVerifier().verify(tree, torch.randn(1, 3, 5), _ctx(SamplingParams(temperature=1.0)))
    assert info.value.stage == "tree_builder"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (SamplingParams(temperature=-0.5), "temperature"),
        (SamplingParams(temperature=1.0, top_p=0.0), "top_p"),
        (SamplingParams(temperature=1.0, top_p=1.5), "top_p"),
        (SamplingParams(temperature=1.0, top_k=-1), "top_k"),
    ],
)
def test_bad_sampling_params_raise_generation_error(params: SamplingParams, field: str) -> None:
    tree = DraftTree.from_lists([1, 2], [-1, 0])
    tree = DraftTree(**{**tree.__dict__, "child_q": torch.full((1, 2, 5), 0.2)})
    for verifier in (WalkVerifier(), ChainRejectionVerifier(), TreeRejectionVerifier()):
        with pytest.raises(GenerationError, match=field) as info:
            verifier.verify(tree, torch.randn(1, 2, 5), _ctx(params))
        assert info.value.hint
