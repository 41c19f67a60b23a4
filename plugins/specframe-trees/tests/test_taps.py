"""The `taps` pruner: Lemma-style properties, the worked example and its config's errors (its conformance cases
are in test_conformance.py).

Properties (on random trees from ``specframe.testing.strategies.draft_trees``):

* the estimate equals the module docstring's formula, recomputed here node by node from explicit paths;
* it never increases along an edge (the path score of Lemma 1), so the kept set is ancestor-closed, within the
  budget, and equals the first B pops of a best-first heap by the estimate;
* with ``sibling_discount: 1`` it keeps what ``deferred_topb`` with ``beta: 0`` keeps (DDTree's ranking).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from specframe_trees.pruners import (
    DeferredTopBConfig,
    DeferredTopBPruner,
    TapsConfig,
    TapsPruner,
    path_conditioned_log_acceptance,
)
from trees_testkit import ctx, heap_pops

from specframe.config.validate import validate_pipeline
from specframe.errors import ConfigError
from specframe.plugins import PluginHost
from specframe.testing.strategies import draft_trees
from specframe.tree import DraftTree, check_tree

SETTINGS = settings(max_examples=60, deadline=None)
RHOS = st.one_of(st.sampled_from([1.0, 0.3]), st.floats(min_value=1e-3, max_value=1.0))


# ------------------------------------------------------------------------------ the reference estimate
def _children(tree: DraftTree, b: int) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in range(int(tree.num_nodes[b]))]
    for i in range(1, len(kids)):
        kids[int(tree.parent[b, i])].append(i)
    return kids


def reference_log_acceptance(tree: DraftTree, b: int, rho: float) -> list[float]:
    """The module docstring's ``log a(v)`` for row ``b``, walking each path explicitly."""
    n = int(tree.num_nodes[b])
    logq = [min(float(tree.logq[b, i]), 0.0) for i in range(n)]
    kids = _children(tree, b)
    top = {0}  # nodes that are their parent's top child (highest logq, ties to the lower index)
    for siblings in kids:
        if siblings:
            top.add(min(siblings, key=lambda i: (-logq[i], i)))
    out = []
    for v in range(n):
        path = tree.path_to(b, v)  # root first
        total, off = 0.0, False
        for u in path[1:]:
            total += logq[u] + (math.log(rho) if off else 0.0)
            off = off or u not in top
        out.append(total)
    return out


# ----------------------------------------------------------------------------------- Lemma-style properties
@SETTINGS
@given(tree=draft_trees(nodes=(1, 14)), rho=RHOS)
def test_estimate_matches_the_formula_and_never_rises_along_an_edge(tree: DraftTree, rho: float) -> None:
    est = path_conditioned_log_acceptance(tree, rho)  # [B, N]
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        ref = reference_log_acceptance(tree, b, rho)
        assert est[b, :n].tolist() == pytest.approx(ref, rel=1e-9, abs=1e-9)
        assert all(float(est[b, i]) <= float(est[b, int(tree.parent[b, i])]) for i in range(1, n))
        assert bool(torch.isneginf(est[b, n:]).all())  # padding ranks last


@SETTINGS
@given(tree=draft_trees(nodes=(1, 14)), rho=RHOS, budget=st.integers(1, 14))
def test_kept_set_is_ancestor_closed_within_budget_and_equals_heap_pops(tree: DraftTree, rho: float,
                                                                       budget: int) -> None:
    pruned = TapsPruner(TapsConfig(sibling_discount=rho, budget=budget)).prune(tree, ctx(99))
    assert check_tree(pruned, budget=budget) == []
    est = path_conditioned_log_acceptance(tree, rho)
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        s = [float(est[b, i]) for i in range(n)]
        pops = heap_pops(_children(tree, b), s, budget)
        assert pops == sorted(range(1, n), key=lambda i: (-s[i], i))[:budget]  # heap order = global order
        assert all(int(tree.parent[b, i]) in {0, *pops} for i in pops)  # ancestor-closed
        kept = {tuple(pruned.tokens[b, j].item() for j in pruned.path_to(b, i))
                for i in range(1, int(pruned.num_nodes[b]))}
        expected = {tuple(tree.tokens[b, j].item() for j in tree.path_to(b, i)) for i in pops}
        assert kept == expected


@SETTINGS
@given(tree=draft_trees(nodes=(1, 14)), budget=st.integers(1, 14))
def test_no_discount_is_ddtree_ranking(tree: DraftTree, budget: int) -> None:
    """rho = 1: the estimate is the summed marginals, which draft_trees uses as the score."""
    taps = TapsPruner(TapsConfig(sibling_discount=1.0, budget=budget)).prune(tree, ctx(99))
    topb = DeferredTopBPruner(DeferredTopBConfig(beta=0.0, budget=budget)).prune(tree, ctx(99))
    assert torch.equal(taps.tokens, topb.tokens) and torch.equal(taps.parent, topb.parent)


# ----------------------------------------------------------------------------------------- worked example
def test_worked_example_keeps_the_main_path_over_a_siblings_child() -> None:
    q = [0.6, 0.3, 0.7, 0.8, 0.5]  # a, b, c, d, e of the module docstring
    tree = DraftTree.from_lists([9, 1, 2, 3, 4, 5], [-1, 0, 0, 1, 2, 3], logq=[0.0, *map(math.log, q)])
    est = path_conditioned_log_acceptance(tree, 0.3).exp()[0].tolist()
    assert est == pytest.approx([1.0, 0.6, 0.3, 0.42, 0.072, 0.21])
    assert TapsPruner(TapsConfig()).prune(tree, ctx(4)).tokens.tolist() == [[9, 1, 2, 3, 5]]  # a, b, c, e
    ddtree = DeferredTopBPruner(DeferredTopBConfig(beta=0.0)).prune(tree, ctx(4))
    assert ddtree.tokens.tolist() == [[9, 1, 2, 3, 4]]  # a, b, c, d
    assert TapsPruner(TapsConfig()).prune(tree, ctx(5)) is tree  # fits: returned as it is


def test_zero_probability_nodes_rank_last_but_stay_finite() -> None:
    tree = DraftTree.from_lists([9, 1, 2, 3], [-1, 0, 0, 2], logq=[0.0, float("-inf"), -0.5, -0.1])
    est = path_conditioned_log_acceptance(tree, 0.3)
    assert bool(torch.isfinite(est).all())
    assert TapsPruner(TapsConfig()).prune(tree, ctx(2)).tokens.tolist() == [[9, 2, 3]]


def test_a_child_whose_logq_rounds_above_zero_never_outranks_its_parent() -> None:
    tree = DraftTree.from_lists([9, 1, 2], [-1, 0, 1], logq=[0.0, -0.5, 0.3])
    est = path_conditioned_log_acceptance(tree, 0.3)
    assert float(est[0, 2]) <= float(est[0, 1])
    assert TapsPruner(TapsConfig()).prune(tree, ctx(1)).tokens.tolist() == [[9, 1]]


# --------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("value", [0.0, -0.1, 1.5, float("nan"), float("inf")])
def test_sibling_discount_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(ValidationError, match="sibling_discount"):
        TapsConfig(sibling_discount=value)


def test_sampled_trees_with_rejection_verifiers_are_refused(specframe_installed_host: PluginHost) -> None:
    """taps may drop a sampled sibling mid-list, so tree_rejection (siblings tried in order) must be refused;
    walk (exact for any fixed tree) is accepted."""
    data = {"target": {"type": "hf", "model": "/nowhere"}, "sampling": {"temperature": 1.0},
            "drafter": {"type": "ngram"}, "tree_builder": {"type": "sampled_tree"}, "pruner": {"type": "taps"}}
    with pytest.raises(ConfigError, match="pruner 'taps' may drop a sampled sibling"):
        validate_pipeline({**data, "verifier": {"type": "tree_rejection"}}, specframe_installed_host)
    assert validate_pipeline({**data, "verifier": {"type": "walk"}}, specframe_installed_host).pruner.type == "taps"
