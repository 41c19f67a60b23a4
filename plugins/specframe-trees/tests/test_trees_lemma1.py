"""Lemma 1 and the pruners: deferred global top-B equals a best-first heap, and beta > 0 is refused."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from specframe_trees.builders import DARTreeBuilder, DARTreeConfig, HeapSequentialBuilder, HeapSequentialConfig
from specframe_trees.pruners import DeferredTopBConfig, DeferredTopBPruner
from trees_testkit import ctx, heap_pops, small_gru, small_markov, token_paths

from specframe.builtin.no_pruner import NoPruneConfig, NoPruner
from specframe.errors import ContractError
from specframe.interfaces import Corrector
from specframe.testing.strategies import draft_trees, proposals
from specframe.tree import DraftTree, check_tree
from specframe.tree.proposal_view import proposal_row
from specframe.types import DraftProposal

SETTINGS = settings(max_examples=40, deadline=None)
BETAS = st.one_of(st.sampled_from([0.0, -0.2]), st.floats(min_value=-2.0, max_value=0.0))

CONSTRUCTION_CORRECTORS = {
    "gru": lambda: small_gru(pure_prefix_len=1),
    "gru_slot0": lambda: small_gru(pure_prefix_len=0),
    "markov_vanilla": lambda: small_markov("vanilla"),
    "markov_gated": lambda: small_markov("gated"),
    "markov_rnn": lambda: small_markov("rnn"),
}


def _children(tree: DraftTree, b: int) -> list[list[int]]:
    n = int(tree.num_nodes[b])
    kids: list[list[int]] = [[] for _ in range(n)]
    for i in range(1, n):
        kids[int(tree.parent[b, i])].append(i)
    return kids


def _kept_nodes(tree: DraftTree, pruned: DraftTree, b: int) -> list[int]:
    """Indices in ``tree`` of the non-root nodes ``pruned`` kept (matched by token path)."""
    by_path = {tuple(int(tree.tokens[b, j]) for j in tree.path_to(b, i)): i for i in range(int(tree.num_nodes[b]))}
    return sorted(by_path[tuple(int(pruned.tokens[b, j]) for j in pruned.path_to(b, i))]
                  for i in range(1, int(pruned.num_nodes[b])))


# ------------------------------------------------------------------------------ abstract Lemma 1
@SETTINGS
@given(tree=draft_trees(nodes=(1, 14)), beta=BETAS, budget=st.integers(1, 14))
def test_heap_pops_equal_global_top_b_and_are_ancestor_closed(tree: DraftTree, beta: float, budget: int) -> None:
    pruned = DeferredTopBPruner(DeferredTopBConfig(beta=beta, budget=budget)).prune(tree, ctx(99))
    assert check_tree(pruned, budget=budget, monotone_scores=True) == []
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        s = [float(tree.score[b, i]) + beta * int(tree.depth[b, i]) for i in range(n)]
        pops = heap_pops(_children(tree, b), s, budget)
        global_top = sorted(range(1, n), key=lambda i: (-s[i], i))[:budget]
        assert pops == global_top  # the heap pops in global (-s, index) order
        kept = set(global_top) | {0}
        assert all(int(tree.parent[b, i]) in kept for i in global_top)  # ancestor-closed
        assert _kept_nodes(tree, pruned, b) == sorted(global_top)


def test_beta_above_zero_breaks_closure_and_is_refused() -> None:
    """The §6 counterexample: root -> a -> b with lp = -0.1 each and beta = +0.2, B = 1."""
    tree = DraftTree.from_lists([0, 1, 2], [-1, 0, 1], logq=[0.0, -0.1, -0.1])
    beta = 0.2
    s = [float(tree.score[0, i]) + beta * int(tree.depth[0, i]) for i in range(3)]
    top1 = max(range(1, 3), key=lambda i: (s[i], -i))
    assert top1 == 2  # b outranks its parent a
    keep = torch.tensor([[True, False, True]])
    with pytest.raises(ValueError, match="not ancestor-closed"):
        tree.subtree(keep)
    assert heap_pops(_children(tree, 0), s, 1) == [1]  # the heap can only pop a
    with pytest.raises(ValidationError, match=r"beta = 0\.2 > 0 is refused.*prefix-closed.*Lemma 1"):
        DeferredTopBConfig(beta=beta)
    with pytest.raises(ValidationError, match="finite"):
        DeferredTopBConfig(beta=float("nan"))


# ------------------------------------------------------------------------------------- the pruner
def test_pruner_worked_example_and_passthrough() -> None:
    tree = DraftTree.from_lists([9, 1, 2, 3], [-1, 0, 0, 1], logq=[0.0, -0.1, -0.5, -0.1])
    pruned = DeferredTopBPruner(DeferredTopBConfig(beta=-0.2)).prune(tree, ctx(2))
    assert pruned.tokens.tolist() == [[9, 1, 3]] and pruned.parent.tolist() == [[-1, 0, 1]]
    assert DeferredTopBPruner(DeferredTopBConfig()).prune(tree, ctx(3)) is tree
    assert NoPruner().prune(tree, ctx(1)) is tree
    assert NoPruneConfig().type == "none"


def test_pruner_refuses_trees_whose_scores_rise_when_checking() -> None:
    """The check reads the device, so it runs in the pipeline's checking mode (metrics.check_trees)."""
    tree = DraftTree.from_lists([9, 1, 2], [-1, 0, 1], score=[0.0, -1.0, -0.5])
    with pytest.raises(ContractError, match="ranks above its parent"):
        DeferredTopBPruner(DeferredTopBConfig(beta=0.0)).prune(tree, replace(ctx(1), check=True))


def test_pruner_ties_keep_the_lower_index() -> None:
    tree = DraftTree.from_lists([9, 1, 2, 3, 4], [-1, 0, 0, 1, 2], logq=[0.0, 0.0, 0.0, 0.0, 0.0])
    pruned = DeferredTopBPruner(DeferredTopBConfig(beta=0.0)).prune(tree, ctx(3))
    assert pruned.tokens.tolist() == [[9, 1, 2, 3]]


# --------------------------------------------------------------------- construction-level Lemma 1
def _sequential_heap_over(supertree: DraftTree, p: DraftProposal, corr: Corrector, b: int, beta: float,
                          budget: int) -> tuple[list[int], list[float]]:
    """Best-first heap over the supertree's nodes whose scores come from per-node (M = 1) corrector calls.

    Returns the popped node indices and the recomputed path scores (indexed like the supertree). The heap
    ranks by those scores rounded to float32, the precision a `DraftTree` stores, ties by node index.
    """
    row = proposal_row(p, b)
    kids = _children(supertree, b)
    n = int(supertree.num_nodes[b])
    score = [0.0] * n
    state = [None] * n
    state[0] = corr.init_state(row)
    cands = row.tokens[0].tolist()

    def expand(node: int) -> None:
        depth = int(supertree.depth[b, node])
        if not kids[node]:
            return
        lp = corr.child_logprobs(row, depth + 1, supertree.tokens[b : b + 1, node : node + 1], state[node])[0, 0]
        for c in kids[node]:
            token = supertree.tokens[b : b + 1, c : c + 1]
            score[c] = score[node] + float(lp[cands[depth].index(int(token))])
            if kids[c]:
                state[c] = corr.advance(row, depth + 1, state[node], token)

    # Materialise scores in heap order: a node's children are scored when it is popped (as heap_sequential).
    expand(0)
    keyed = [0.0] * n
    popped: list[int] = []
    frontier = set(kids[0])
    while frontier and len(popped) < budget:
        for c in frontier:
            keyed[c] = float(np.float32(score[c])) + beta * int(supertree.depth[b, c])
        node = min(frontier, key=lambda c: (-keyed[c], c))
        frontier.remove(node)
        popped.append(node)
        expand(node)
        frontier.update(kids[node])
    return popped, score


@settings(max_examples=15, deadline=None, derandomize=True)
@given(p=proposals(depth=(1, 4), candidates=(2, 5), masked=False, dead_depth=False),
       corrector=st.sampled_from(sorted(CONSTRUCTION_CORRECTORS)), width=st.integers(1, 6),
       budget=st.integers(1, 12), beta=BETAS)
def test_dartree_then_topb_equals_a_sequential_heap_on_the_supertree(p: DraftProposal, corrector: str, width: int,
                                                                     budget: int, beta: float) -> None:
    corr = CONSTRUCTION_CORRECTORS[corrector]()
    supertree = DARTreeBuilder(DARTreeConfig(width=width)).build(p, corr, ctx(budget))
    pruned = DeferredTopBPruner(DeferredTopBConfig(beta=beta)).prune(supertree, ctx(budget))
    assert check_tree(pruned, budget=budget, monotone_scores=True) == []
    for b in range(p.batch_size):
        popped, score = _sequential_heap_over(supertree, p, corr, b, beta, budget)
        for i in [0, *popped]:  # batched depth-wise scores == per-node sequential scores
            assert math.isclose(score[i], float(supertree.score[b, i]), rel_tol=1e-6, abs_tol=1e-6)
        assert _kept_nodes(supertree, pruned, b) == sorted(popped)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(p=proposals(batch=(1, 1), depth=(1, 3), candidates=(2, 3), masked=False, dead_depth=False),
       corrector=st.sampled_from(sorted(CONSTRUCTION_CORRECTORS)), budget=st.integers(1, 12))
def test_complete_dartree_then_topb_equals_heap_sequential(p: DraftProposal, corrector: str, budget: int) -> None:
    """With a width that never cuts, the supertree is the whole candidate tree: both constructions agree."""
    corr = CONSTRUCTION_CORRECTORS[corrector]()
    full = p.num_candidates ** p.depth
    supertree = DARTreeBuilder(DARTreeConfig(width=full)).build(p, corr, ctx(budget))
    pruned = DeferredTopBPruner(DeferredTopBConfig(beta=0.0)).prune(supertree, ctx(budget))
    sequential = HeapSequentialBuilder(HeapSequentialConfig()).build(p, corr, ctx(budget))
    got, expected = token_paths(pruned, 0), token_paths(sequential, 0)
    assert got.keys() == expected.keys()
    for path, (score, logq) in got.items():
        assert math.isclose(score, expected[path][0], abs_tol=1e-6)
        assert math.isclose(logq, expected[path][1], abs_tol=1e-6)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(p=proposals(depth=(1, 5), candidates=(2, 5), masked=False, dead_depth=False), budget=st.integers(1, 14))
def test_heap_equals_dartree_identity_with_width_budget_then_topb(p: DraftProposal, budget: int) -> None:
    """The device-side form of DDTree's host heap (heap.py's docstring): dartree with the identity corrector and
    width = budget, then deferred_topb with beta 0, keeps the same prefixes with the same scores."""
    from specframe_trees.builders import HeapBuilder, HeapConfig

    from specframe.builtin.identity import IdentityCorrector

    corr = IdentityCorrector()
    heap = HeapBuilder(HeapConfig()).build(p, corr, ctx(budget))
    supertree = DARTreeBuilder(DARTreeConfig(width=budget)).build(p, corr, ctx(budget))
    pruned = DeferredTopBPruner(DeferredTopBConfig(beta=0.0)).prune(supertree, ctx(budget))
    for b in range(p.batch_size):
        got, expected = token_paths(pruned, b), token_paths(heap, b)
        assert got.keys() == expected.keys()
        for path, (score, _) in got.items():
            assert math.isclose(score, expected[path][0], abs_tol=1e-5)
