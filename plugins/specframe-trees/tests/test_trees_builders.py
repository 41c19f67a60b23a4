"""Tree builders: validity and budgets on random proposals, the DDTree oracle, cross-builder identities, edges."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from specframe_trees.builders import (
    ChainThenHeapBuilder,
    ChainThenHeapConfig,
    DARTreeBuilder,
    DARTreeConfig,
    HeapBuilder,
    HeapConfig,
    HeapSequentialBuilder,
    HeapSequentialConfig,
    PCTreeBuilder,
    PCTreeConfig,
)
from trees_testkit import CORRECTORS, brute_force_top_prefixes, ctx, small_gru, small_markov

from specframe.builtin.chain import ChainBuilder, ChainConfig
from specframe.builtin.identity import IdentityCorrector
from specframe.interfaces import Corrector, TreeBuilder
from specframe.testing.strategies import proposals
from specframe.tree import DraftTree, check_tree
from specframe.types import DraftProposal

SETTINGS = settings(max_examples=30, deadline=None)
IDENTITY = IdentityCorrector()


def _builders(width: int) -> dict[str, TreeBuilder]:
    return {
        "chain": ChainBuilder(ChainConfig()),
        "heap": HeapBuilder(HeapConfig()),
        "heap_sequential": HeapSequentialBuilder(HeapSequentialConfig()),
        "dartree_pruned": DARTreeBuilder(DARTreeConfig(width=width)),
        "dartree_fixed": DARTreeBuilder(DARTreeConfig(mode="fixed")),
        "chain_then_heap": ChainThenHeapBuilder(ChainThenHeapConfig()),
        "pctree": PCTreeBuilder(PCTreeConfig(width=width)),
    }


def _assert_consistent(tree: DraftTree, p: DraftProposal) -> None:
    """Every node is a finite candidate of its depth and score = parent score + logq."""
    assert torch.equal(tree.tokens[:, 0], p.root)
    for b in range(tree.batch_size):
        for i in range(1, int(tree.num_nodes[b])):
            d = int(tree.depth[b, i])
            cands = p.tokens[b, d - 1].tolist()
            token = int(tree.tokens[b, i])
            assert token in cands
            assert math.isfinite(float(p.logprobs[b, d - 1, cands.index(token)]))
            assert math.isfinite(float(tree.logq[b, i]))
            parent_score = float(tree.score[b, int(tree.parent[b, i])])
            assert math.isclose(float(tree.score[b, i]), parent_score + float(tree.logq[b, i]), abs_tol=1e-5)


@SETTINGS
@given(p=proposals(), corrector=st.sampled_from(sorted(CORRECTORS)), budget=st.integers(1, 12),
       width=st.integers(1, 4))
def test_every_builder_returns_a_valid_tree_within_budget(p: DraftProposal, corrector: str, budget: int,
                                                          width: int) -> None:
    corr = CORRECTORS[corrector]()
    for name, builder in _builders(width).items():
        tree = builder.build(p, corr, ctx(budget))
        limit = width * p.depth if name == "dartree_pruned" else budget
        assert check_tree(tree, budget=limit, monotone_scores=True) == [], name
        assert tree.max_depth <= p.depth
        _assert_consistent(tree, p)
        per_depth = torch.stack([(tree.valid & (tree.depth == d)).sum(dim=1) for d in range(1, p.depth + 1)], 1)
        if name in ("dartree_pruned", "pctree"):
            assert bool((per_depth <= width).all())
        if name == "chain":
            assert bool((per_depth <= 1).all())


@SETTINGS
@given(p=proposals(batch=(1, 1), depth=(1, 3), candidates=(1, 3), masked=False, dead_depth=False),
       budget=st.integers(1, 14))
def test_heap_returns_exactly_the_top_prefixes(p: DraftProposal, budget: int) -> None:
    """DDTree Prop. 3 against a brute-force oracle, pop order included (ties: rank path)."""
    tree = HeapBuilder(HeapConfig()).build(p, IDENTITY, ctx(budget))
    logq = p.logprobs[0].double().tolist()
    expected = brute_force_top_prefixes(logq, budget)
    rank_of = [{int(t): r for r, t in enumerate(p.tokens[0, d])} for d in range(p.depth)]
    got = []
    for i in range(1, int(tree.num_nodes[0])):
        path = tree.path_to(0, i)[1:]
        got.append(tuple(rank_of[d][int(tree.tokens[0, j])] for d, j in enumerate(path)))
    assert got == expected
    assert check_tree(tree, budget=budget) == []


@SETTINGS
@given(p=proposals(), budget=st.integers(1, 12))
def test_corrector_free_builders_agree_with_the_heap(p: DraftProposal, budget: int) -> None:
    """With the identity corrector, heap_sequential and chain_then_heap reduce to DDTree's heap exactly."""
    heap = HeapBuilder(HeapConfig()).build(p, IDENTITY, ctx(budget))
    for builder in (HeapSequentialBuilder(HeapSequentialConfig()), ChainThenHeapBuilder(ChainThenHeapConfig())):
        other = builder.build(p, IDENTITY, ctx(budget))
        for field in ("tokens", "parent", "depth", "valid", "score", "logq"):
            assert torch.equal(getattr(other, field), getattr(heap, field)), field


@SETTINGS
@given(p=proposals(), corrector=st.sampled_from(sorted(CORRECTORS)))
def test_chain_is_the_greedy_path_of_dartree_with_width_one(p: DraftProposal, corrector: str) -> None:
    corr = CORRECTORS[corrector]()
    chain = ChainBuilder(ChainConfig()).build(p, corr, ctx(64))
    dart = DARTreeBuilder(DARTreeConfig(width=1)).build(p, corr, ctx(64))
    for field in ("tokens", "parent", "depth", "valid", "score", "logq"):
        assert torch.equal(getattr(chain, field), getattr(dart, field)), field


@SETTINGS
@given(p=proposals(batch=(2, 3), masked=True), budget=st.integers(1, 20))
def test_dartree_fixed_spreads_the_budget_over_depths(p: DraftProposal, budget: int) -> None:
    tree = DARTreeBuilder(DARTreeConfig(mode="fixed")).build(p, small_markov(), ctx(budget))
    for b in range(p.batch_size):
        remaining = budget
        for d in range(1, p.depth + 1):
            quota = -(-remaining // (p.depth - d + 1))
            count = int((tree.valid[b] & (tree.depth[b] == d)).sum())
            assert count <= quota
            remaining -= count
        assert remaining >= 0


@SETTINGS
@given(p=proposals(dead_depth=False, masked=False, depth=(2, 4), candidates=(2, 5)))
def test_chain_then_heap_uses_the_chain_conditioned_rows(p: DraftProposal) -> None:
    """Every branch of chain_then_heap shares the corrected row computed along the greedy chain."""
    corr = small_gru(pure_prefix_len=0)
    chain = ChainBuilder(ChainConfig()).build(p, corr, ctx(64))
    tree = ChainThenHeapBuilder(ChainThenHeapConfig()).build(p, corr, ctx(16))
    for b in range(p.batch_size):
        rows = [_row_along_chain(p, corr, chain, b, d) for d in range(1, p.depth + 1)]
        for i in range(1, int(tree.num_nodes[b])):
            d = int(tree.depth[b, i])
            cands = p.tokens[b, d - 1].tolist()
            expected = float(rows[d - 1][cands.index(int(tree.tokens[b, i]))])
            assert math.isclose(float(tree.logq[b, i]), expected, abs_tol=1e-6)


def _row_along_chain(p: DraftProposal, corr: Corrector, chain: DraftTree, b: int, depth: int) -> torch.Tensor:
    """The corrected row of ``depth`` for the chain's node at ``depth - 1``, recomputed node by node."""
    from specframe.tree.proposal_view import proposal_row

    row_p = proposal_row(p, b)
    state = corr.init_state(row_p)
    node = row_p.root[:, None]
    for d in range(1, depth):
        node = chain.tokens[b : b + 1, d : d + 1]
        state = corr.advance(row_p, d, state, node)
    return corr.child_logprobs(row_p, depth, node, state)[0, 0]


# ------------------------------------------------------------------------------------------ edges
@pytest.mark.parametrize("corrector", sorted(CORRECTORS))
def test_budget_one_gives_the_best_first_child(corrector: str) -> None:
    g = torch.Generator().manual_seed(3)
    p = _fixed_proposal(g)
    corr = CORRECTORS[corrector]()
    first = corr.child_logprobs(p, 1, p.root[:, None], corr.init_state(p))[:, 0]  # [B, K]
    best = p.tokens[:, 0].gather(1, first.argmax(dim=1, keepdim=True))[:, 0]
    for name, builder in _builders(width=3).items():
        if name == "dartree_pruned":
            continue  # builds a supertree; the pruner applies the budget
        tree = builder.build(p, corr, ctx(1))
        assert torch.equal(tree.num_nodes, torch.tensor([2, 2])), name
        expected = p.tokens[:, 0, 0] if name == "heap" else best
        assert torch.equal(tree.tokens[:, 1], expected), name


def test_budget_larger_than_the_tree_takes_every_finite_prefix() -> None:
    g = torch.Generator().manual_seed(4)
    p = _fixed_proposal(g, k=3, length=3)
    p.logprobs[:, 1, 2] = -math.inf  # one masked candidate at depth 2
    total = 3 + 3 * 2 + 3 * 2 * 3
    for builder in (HeapBuilder(HeapConfig()), HeapSequentialBuilder(HeapSequentialConfig()),
                    DARTreeBuilder(DARTreeConfig(width=100)), ChainThenHeapBuilder(ChainThenHeapConfig())):
        tree = builder.build(p, IDENTITY, ctx(1000))
        assert torch.equal(tree.num_nodes - 1, torch.tensor([total, total])), type(builder).__name__


def test_single_candidate_and_single_depth() -> None:
    g = torch.Generator().manual_seed(5)
    p = _fixed_proposal(g)
    corr = small_gru()
    for builder in _builders(width=4).values():
        k1 = builder.build(_clamp(p, k=1), corr, ctx(64))
        assert check_tree(k1) == []
        assert k1.depth.tolist() == [list(range(p.depth + 1))] * p.batch_size  # a chain through every depth
        l1 = builder.build(_clamp(p, depth=1), corr, ctx(64))
        assert check_tree(l1) == [] and l1.max_depth <= 1


def test_ties_are_broken_by_lower_candidate_index_and_ancestor_first() -> None:
    k, length = 4, 3
    tokens = torch.arange(length * k).view(1, length, k)
    p = DraftProposal(root=torch.tensor([99]), tokens=tokens, logprobs=torch.full((1, length, k), -1.0),
                      features=torch.zeros(1, length, 8))
    heap = HeapBuilder(HeapConfig()).build(p, IDENTITY, ctx(5))
    # Every depth-1 prefix scores -1 and beats every deeper one; among equals the lower rank pops first.
    assert heap.tokens[0].tolist() == [99, 0, 1, 2, 3, 4]
    chain = ChainBuilder(ChainConfig()).build(p, IDENTITY, ctx(5))
    assert chain.tokens[0].tolist() == [99, 0, 4, 8]
    dart = DARTreeBuilder(DARTreeConfig(width=2)).build(p, IDENTITY, ctx(5))
    assert dart.tokens[0].tolist() == [99, 0, 1, 4, 5, 8, 9] and dart.parent[0].tolist() == [-1, 0, 0, 1, 1, 3, 3]
    again = DARTreeBuilder(DARTreeConfig(width=2)).build(p, IDENTITY, ctx(5))
    assert torch.equal(again.tokens, dart.tokens)


def test_masked_candidates_are_never_used_and_dead_depths_stop_the_tree() -> None:
    g = torch.Generator().manual_seed(6)
    p = _fixed_proposal(g, k=4, length=4)
    p.logprobs[:, 0, 2:] = -math.inf
    p.logprobs[:, 2:] = -math.inf
    for name, builder in _builders(width=8).items():
        for corr in (IDENTITY, small_gru(), small_markov("rnn")):
            tree = builder.build(p, corr, ctx(64))
            assert check_tree(tree, monotone_scores=True) == [], name
            assert tree.max_depth <= 2, name
            _assert_consistent(tree, p)


def test_empty_proposal_gives_the_root_alone() -> None:
    p = DraftProposal.empty(torch.tensor([4, 5]))
    for builder in _builders(width=3).values():
        tree = builder.build(p, IDENTITY, ctx(8))
        assert tree.tokens.tolist() == [[4], [5]]


def test_max_depth_and_candidates_are_clamped_to_the_proposal() -> None:
    g = torch.Generator().manual_seed(7)
    p = _fixed_proposal(g, k=3, length=2)
    tree = DARTreeBuilder(DARTreeConfig(max_depth=16, candidates=64, width=100)).build(p, small_gru(), ctx(64))
    assert tree.max_depth == 2 and int(tree.num_nodes[0]) == 1 + 3 + 9
    shallow = HeapBuilder(HeapConfig(max_depth=1, candidates=2)).build(p, IDENTITY, ctx(64))
    assert int(shallow.num_nodes[0]) == 3


def _fixed_proposal(g: torch.Generator, *, k: int = 4, length: int = 3, b: int = 2) -> DraftProposal:
    lp = torch.log_softmax(torch.randn(b, length, 12, generator=g) * 2, dim=-1)
    values, order = torch.sort(lp, dim=-1, descending=True, stable=True)
    return DraftProposal(root=torch.tensor([1, 2][:b]), tokens=order[..., :k], logprobs=values[..., :k].clone(),
                         logits=None, features=torch.randn(b, length, 8, generator=g))


def _clamp(p: DraftProposal, *, k: int | None = None, depth: int | None = None) -> DraftProposal:
    from specframe.tree.proposal_view import clamp_proposal

    return clamp_proposal(p, depth, k if k is not None else p.num_candidates)


def test_dartree_pruned_reads_the_device_at_most_once_per_depth() -> None:
    from specframe.device_sync import HostSyncCounter

    gen = torch.Generator().manual_seed(0)
    depth, k = 6, 8
    logprobs = torch.sort(torch.log_softmax(torch.randn(1, depth, k, generator=gen), -1), -1, descending=True).values
    p = DraftProposal(root=torch.tensor([1]), tokens=torch.randperm(64, generator=gen)[: depth * k].view(1, depth, k),
                      logprobs=logprobs)
    with HostSyncCounter() as counter:
        tree = DARTreeBuilder(DARTreeConfig(width=3)).build(p, IDENTITY, ctx(16))
    assert tree.max_depth == depth
    # Per depth: the early exit when no path survives; then the tree assembly (a few reads per tree).
    assert counter.total <= depth + 2, counter.by_op


@settings(max_examples=30, deadline=None, derandomize=True)
@given(p=proposals(depth=(1, 6), candidates=(1, 5)))
def test_a_path_independent_corrector_chain_equals_the_depth_by_depth_rollout(p) -> None:
    """The identity corrector's chain is rolled out for every depth at once; a copy of it that does not declare
    path independence takes the depth-by-depth rollout: same chain, same corrected rows (dead depths included),
    same tree."""
    from specframe.building import greedy_chain

    class DepthByDepth(IdentityCorrector):
        path_independent = False

    fast, slow = greedy_chain(p, IdentityCorrector(), p.depth), greedy_chain(p, DepthByDepth(), p.depth)
    assert torch.equal(fast.rows, slow.rows)
    for field in ("tokens", "alive"):
        assert torch.equal(getattr(fast, field), getattr(slow, field)), field
    for field in ("logq", "score"):
        assert torch.allclose(getattr(fast, field).double(), getattr(slow, field).double(), equal_nan=True), field
    a, b = fast.tree(p.root), slow.tree(p.root)
    for field in ("tokens", "parent", "depth", "valid"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
