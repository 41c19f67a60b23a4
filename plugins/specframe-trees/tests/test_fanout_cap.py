"""JetSpec's `accum_logp` and `top2gap_fanout` builders: the worked examples, Lemma-style properties on random
proposals (a valid ancestor-closed tree within the budget, fan-out within each depth's cap, identity recovery),
and losslessness under the greedy and WALK verifiers on the toy target."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from specframe_trees.builders.fanout_cap import (
    AccumLogPBuilder,
    AccumLogPConfig,
    Top2GapFanoutBuilder,
    Top2GapFanoutConfig,
    capped_fanout,
    top2gap_caps,
)
from trees_testkit import ctx

from specframe import PluginHost
from specframe.builtin.identity import IdentityCorrector
from specframe.pipeline import Pipeline
from specframe.testing.strategies import proposals
from specframe.testing.toy import ToyTarget
from specframe.testing.toy_host import toy_drafter_host
from specframe.tree import check_tree
from specframe.types import DraftProposal

SETTINGS = settings(max_examples=40, deadline=None)
IDENTITY = IdentityCorrector()


def test_worked_example() -> None:
    tokens, logq = [[10, 11], [20, 21]], [[-0.1, -2.5], [-0.7, -0.9]]
    full = capped_fanout(5, tokens, logq, [2, 2], budget=3)
    assert (full.tokens, full.parents) == ([5, 10, 11, 20], [-1, 0, 0, 1])
    assert full.scores[3] == pytest.approx(-0.8)
    caps = top2gap_caps(logq, beta=1.0, gap0=1.0)
    assert caps == [1, 1]
    chain = capped_fanout(5, tokens, logq, caps, budget=3)
    assert (chain.tokens, chain.parents) == ([5, 10, 20], [-1, 0, 1])


def test_caps_follow_the_gap() -> None:
    rows = [[-0.01, -6.0, -7.0, -8.0], [-1.3, -1.4, -1.5, -1.6], [-0.5, -math.inf, -math.inf, -math.inf]]
    assert top2gap_caps(rows, beta=1.0, gap0=1.0) == [1, 3, 1]  # decisive, split, no runner-up
    assert top2gap_caps(rows[:2], beta=0.0, gap0=1.0) == [2, 2]  # beta 0: K / 2 everywhere
    assert top2gap_caps(rows[:2], beta=1.0, gap0=1e6) == [4, 4]  # a huge gap0: full fan-out


def children_per_node(parents: list[int]) -> dict[int, int]:
    count: dict[int, int] = {}
    for p in parents[1:]:
        count[p] = count.get(p, 0) + 1
    return count


@SETTINGS
@given(p=proposals(depth=(1, 5), candidates=(1, 5)), budget=st.integers(1, 24), beta=st.floats(0, 5),
       gap0=st.floats(-2, 4))
def test_trees_are_valid_within_budget_and_caps(p: DraftProposal, budget: int, beta: float, gap0: float) -> None:
    config = Top2GapFanoutConfig(beta=beta, gap0=gap0, candidates=5, max_depth=None)
    tree = Top2GapFanoutBuilder(config).build(p, IDENTITY, ctx(budget))
    assert check_tree(tree) == []  # valid: parents first, depths consistent, siblings distinct, contiguous
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        assert n - 1 <= budget
        parents = tree.parent[b, :n].tolist()
        depths = tree.depth[b, :n].tolist()
        caps = top2gap_caps(p.logprobs[b].double().tolist(), beta, gap0)
        for node, count in children_per_node(parents).items():
            assert count <= caps[depths[node]], (node, count, caps)
        for i in range(1, n):
            d = depths[i]
            cands = p.tokens[b, d - 1].tolist()
            assert int(tree.tokens[b, i]) in cands
            assert math.isclose(float(tree.score[b, i]), float(tree.score[b, parents[i]]) + float(tree.logq[b, i]),
                                abs_tol=1e-5)


@SETTINGS
@given(p=proposals(depth=(1, 5), candidates=(1, 5)), budget=st.integers(1, 24))
def test_top2gap_with_a_huge_threshold_is_accum_logp(p: DraftProposal, budget: int) -> None:
    full = AccumLogPBuilder(AccumLogPConfig(candidates=5, max_depth=None)).build(p, IDENTITY, ctx(budget))
    same = Top2GapFanoutBuilder(Top2GapFanoutConfig(candidates=5, max_depth=None, beta=1.0, gap0=1e6)).build(
        p, IDENTITY, ctx(budget))
    assert torch.equal(full.tokens, same.tokens) and torch.equal(full.parent, same.parent)


@SETTINGS
@given(p=proposals(depth=(1, 4), candidates=(2, 5), dead_depth=False, masked=False), budget=st.integers(1, 30))
def test_accum_logp_fills_the_budget_when_the_candidates_allow(p: DraftProposal, budget: int) -> None:
    """Full fan-out stops only at the budget or when every depth is exhausted (a K-ary tree of depth L)."""
    tree = AccumLogPBuilder(AccumLogPConfig(candidates=5, max_depth=None)).build(p, IDENTITY, ctx(budget))
    k, depth = p.tokens.shape[2], p.tokens.shape[1]
    available = sum(k**d for d in range(1, depth + 1))
    assert int(tree.num_nodes.min()) - 1 == min(budget, available)


def host(target: ToyTarget) -> PluginHost:
    return toy_drafter_host(target, depth=4, num_candidates=4, distance=0.8)


@pytest.mark.parametrize("builder", [{"type": "accum_logp", "candidates": 3},
                                     {"type": "top2gap_fanout", "candidates": 4, "gap0": 0.5}])
@pytest.mark.parametrize(("verifier", "temperature"), [("greedy", 0.0), ("walk", 0.0), ("walk", 0.9)])
def test_lossless_under_each_declared_verifier(builder: dict[str, object], verifier: str, temperature: float) -> None:
    """Greedy and WALK give plain decoding's tokens for the request seed (specframe.decode.rounds: each draw is keyed
    by the seed and the position), whatever tree the builder verified."""
    target = ToyTarget.random(vocab_size=11, seed=2)
    base = {"corrector": {"type": "identity"}, "pruner": {"type": "none"}, "budget": 10,
            "sampling": {"temperature": temperature}, "generation": {"stop_at_eos": False}}
    spec = Pipeline.from_dict({**base, "drafter": {"type": "toy"}, "tree_builder": builder,
                               "verifier": {"type": verifier}}, target=target, host=host(target))
    plain = Pipeline.from_dict({**base, "drafter": {"type": "none"}, "tree_builder": {"type": "chain"},
                                "verifier": {"type": verifier}}, target=target, host=host(target))
    drafted = 0
    for seed, prompt in enumerate(([1, 2], [3, 4, 5], [6], [9, 0])):
        out = spec.generate(prompt, 25, seed=seed)
        assert out.tokens == plain.generate(prompt, 25, seed=seed).tokens
        drafted += sum(r.accepted for r in out.rounds)
    assert drafted > 0  # the trees were used, not bypassed
