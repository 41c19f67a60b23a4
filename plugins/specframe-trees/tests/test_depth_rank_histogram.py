"""JetSpec's depth_rank_histogram pruner and its profile: properties of both rules, recording, and bad profiles.

``fanout_cap`` (any tree, profile, tau and budget): a valid ancestor-closed tree within the budget, no node whose
own or an ancestor's rank is over its depth's cap (the cap computed here from JetSpec's documented rule), and among
eligible nodes none dropped for one of lower path score; with ``tau = 0`` it is ``deferred_topb`` with
``beta = 0``; over a heap tree it is the brute-force capped heap's first pops.
``path_product``: the kept set is a valid ancestor-closed tree of ``min(nodes, B)`` non-root nodes; it is the top-B
by the profile's path product, computed here from scratch per node (its path, each node's sibling rank by
``logq``), so a node of higher product is never dropped for a lower one.
"""

from __future__ import annotations

import itertools
import json
import math
import pickle
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from specframe_trees.builders import HeapBuilder, HeapConfig
from specframe_trees.pruners import (
    DeferredTopBConfig,
    DeferredTopBPruner,
    DepthRankHistogramConfig,
    DepthRankHistogramPruner,
)
from trees_testkit import ctx

from specframe.builtin.identity import IdentityCorrector
from specframe.errors import ConfigError
from specframe.metrics.depth_rank import FORMAT, DepthRankCounts, counts_from_json, dumps, load_counts
from specframe.metrics.records import RoundRecord
from specframe.testing.strategies import draft_trees, proposals
from specframe.tree import DraftTree, check_tree
from specframe.types import DraftProposal

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def profiles(draw: st.DrawFn) -> DepthRankCounts:
    """Random counts: 1-5 depths, 1-4 ranks, every row's accepted total within its trials."""
    depths, ranks = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    trials, accepted = [], []
    for _ in range(depths):
        row = [draw(st.integers(0, 20)) for _ in range(ranks)]
        accepted.append(row)
        trials.append(sum(row) + draw(st.integers(0, 20)))
    return DepthRankCounts(trials, accepted)


def pruner_for(counts: DepthRankCounts, tmp: Path, budget: int | None = None, smoothing: float = 1.0,
               rule: str = "path_product", tau: float = 0.02) -> DepthRankHistogramPruner:
    path = tmp / "profile.json"
    path.write_text(dumps(counts))
    config = DepthRankHistogramConfig(profile=str(path), budget=budget, smoothing=smoothing, rule=rule, tau=tau)
    return DepthRankHistogramPruner(config, load_counts(path))


def sibling_rank(tree: DraftTree, b: int, i: int) -> int:
    """Node ``i``'s place among its parent's children by ``logq`` (ties: lower index first)."""
    n = int(tree.num_nodes[b])
    logq, parent = tree.logq[b].tolist(), tree.parent[b].tolist()
    return sum(1 for j in range(1, n) if j != i and parent[j] == parent[i]
               and (logq[j] > logq[i] or (logq[j] == logq[i] and j < i)))


def reference_caps(counts: DepthRankCounts, tau: float) -> list[float]:
    """JetSpec's cap per depth 1..D: how many ranks' raw rates clear tau, at least 1; inf where nothing binds."""
    caps: list[float] = []
    for t, row in zip(counts.trials, counts.accepted, strict=True):
        clears = sum(1 for a in row if t and a / t >= tau)
        caps.append(math.inf if tau <= 0 or t == 0 or clears >= 16 else max(1, clears))
    return caps


def reference_eligible(tree: DraftTree, b: int, counts: DepthRankCounts, tau: float) -> set[int]:
    """Non-root nodes of row ``b`` whose own and every ancestor's rank is under its depth's cap."""
    caps = reference_caps(counts, tau)

    def allowed(i: int) -> bool:
        d = int(tree.depth[b, i])
        return d > len(caps) or sibling_rank(tree, b, i) < caps[d - 1]

    return {i for i in range(1, int(tree.num_nodes[b])) if all(allowed(j) for j in tree.path_to(b, i)[1:])}


def reference_products(tree: DraftTree, b: int, counts: DepthRankCounts, s: float) -> list[float]:
    """Per node of row ``b``: the product of profile entries along its path, from the module docstring's rules."""
    n = int(tree.num_nodes[b])

    def rank(i: int) -> int:
        return sibling_rank(tree, b, i)

    def entry(i: int) -> float:
        d = min(int(tree.depth[b, i]), counts.depths) - 1
        t, row = counts.trials[d], counts.accepted[d]
        width = max(len(r) for r in counts.accepted)
        r = rank(i)
        hits = row[r] if r < len(row) and r < width else 0
        return (hits + s) / (t + 2 * s)

    return [math.prod(entry(j) for j in tree.path_to(b, i)[1:]) for i in range(n)]


def kept_nodes(tree: DraftTree, pruned: DraftTree, b: int) -> set[int]:
    by_path = {tuple(int(tree.tokens[b, j]) for j in tree.path_to(b, i)): i for i in range(int(tree.num_nodes[b]))}
    return {by_path[tuple(int(pruned.tokens[b, j]) for j in pruned.path_to(b, i))]
            for i in range(1, int(pruned.num_nodes[b]))}


# ------------------------------------------------------------------------------------ Lemma-style properties
@SETTINGS
@given(tree=draft_trees(nodes=(1, 14)), counts=profiles(), budget=st.integers(1, 14),
       smoothing=st.sampled_from([0.5, 1.0, 4.0]))
def test_keeps_an_ancestor_closed_top_b_by_profiled_path_product(tmp_path_factory, tree, counts, budget, smoothing):
    pruner = pruner_for(counts, tmp_path_factory.mktemp("p"), budget=budget, smoothing=smoothing)
    pruned = pruner.prune(tree, ctx(99))
    assert check_tree(pruned, budget=budget, monotone_scores=True) == []  # a valid tree within the budget
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        kept = kept_nodes(tree, pruned, b)
        assert len(kept) == min(n - 1, budget)
        assert all(int(tree.parent[b, i]) in kept | {0} for i in kept)  # ancestor-closed
        product = reference_products(tree, b, counts, smoothing)
        dropped = set(range(1, n)) - kept
        if kept and dropped:  # monotone: no dropped node has a higher path product than a kept one
            assert min(product[i] for i in kept) >= max(product[i] for i in dropped) * (1 - 1e-9)
        assert all(0.0 < product[i] < 1.0 for i in range(1, n))


def test_worked_example_of_the_module_docstring(tmp_path):
    """h[1] = [0.5, 0.25], h[2] = [0.5, 0.125] (Laplace count 1 over 6 trials): c's product 0.25 ties b's."""
    counts = DepthRankCounts(trials=[6, 6], accepted=[[3, 1], [3, 0]])
    assert counts.rates(1.0) == [[0.5, 0.25], [0.5, 0.125]]
    tree = DraftTree.from_lists([7, 1, 2, 3], [-1, 0, 0, 1], logq=[0.0, -0.1, -0.9, -0.2])
    pruned = pruner_for(counts, tmp_path, budget=2).prune(tree, ctx(99))
    assert kept_nodes(tree, pruned, 0) == {1, 3}  # a and c; c ties b on H and wins on the builder's score
    flipped = DraftTree.from_lists([7, 1, 2, 3], [-1, 0, 0, 1], logq=[0.0, -0.1, -0.3, -0.5])
    assert kept_nodes(flipped, pruner_for(counts, tmp_path, budget=2).prune(flipped, ctx(99)), 0) == {1, 2}


def test_a_profile_that_favours_siblings_keeps_them_over_the_main_path(tmp_path):
    """Depth 1's rank 1 accepted 9 times in 10: a wide first level beats the drafter's deep chain."""
    tree = DraftTree.from_lists([7, 1, 2, 3, 4], [-1, 0, 0, 1, 3], logq=[0.0, -0.1, -2.0, -0.1, -0.1])
    favour = DepthRankCounts(trials=[10, 10, 10], accepted=[[1, 9], [1, 0], [1, 0]])
    assert kept_nodes(tree, pruner_for(favour, tmp_path, budget=2).prune(tree, ctx(99)), 0) == {1, 2}
    chain = DepthRankCounts(trials=[10, 10, 10], accepted=[[9, 1], [9, 0], [9, 0]])
    assert kept_nodes(tree, pruner_for(chain, tmp_path, budget=2).prune(tree, ctx(99)), 0) == {1, 3}


def test_a_tree_within_the_budget_is_returned_unchanged(tmp_path):
    tree = DraftTree.from_lists([7, 1, 2], [-1, 0, 0], logq=[0.0, -0.1, -0.2])
    assert pruner_for(DepthRankCounts([3], [[1]]), tmp_path).prune(tree, ctx(2)) is tree


# ------------------------------------------------------------------------------------ fanout_cap (JetSpec's rule)
TAUS = st.sampled_from([0.0, 0.05, 0.2, 0.4, 1.0])


def rank_paths(tree: DraftTree, proposal: DraftProposal) -> set[tuple[int, ...]]:
    """Row 0's nodes as candidate-rank paths (a heap tree's siblings are distinct candidates of their depth)."""
    rank_of = [{int(t): r for r, t in enumerate(proposal.tokens[0, d])} for d in range(proposal.depth)]
    return {tuple(rank_of[d][int(tree.tokens[0, j])] for d, j in enumerate(tree.path_to(0, i)[1:]))
            for i in range(1, int(tree.num_nodes[0]))}


@SETTINGS
@given(tree=draft_trees(nodes=(1, 14)), counts=profiles(), budget=st.integers(1, 14), tau=TAUS)
def test_fanout_cap_keeps_the_top_b_eligible_nodes_by_path_score(tmp_path_factory, tree, counts, budget, tau):
    pruner = pruner_for(counts, tmp_path_factory.mktemp("p"), budget=budget, rule="fanout_cap", tau=tau)
    pruned = pruner.prune(tree, ctx(99))
    assert check_tree(pruned, budget=budget, monotone_scores=True) == []  # a valid tree within the budget
    for b in range(tree.batch_size):
        kept = kept_nodes(tree, pruned, b)
        eligible = reference_eligible(tree, b, counts, tau)
        assert kept <= eligible  # no node over its depth's cap, nor under one that is
        assert len(kept) == min(len(eligible), budget)
        assert all(int(tree.parent[b, i]) in kept | {0} for i in kept)  # ancestor-closed
        score = tree.score[b].tolist()
        dropped = eligible - kept
        if kept and dropped:  # no eligible node dropped for one of lower path score
            assert min(score[i] for i in kept) >= max(score[i] for i in dropped)


@SETTINGS
@given(tree=draft_trees(nodes=(1, 14)), counts=profiles(), budget=st.integers(1, 14))
def test_fanout_cap_with_tau_zero_is_the_plain_heap_top_b(tmp_path_factory, tree, counts, budget):
    pruned = pruner_for(counts, tmp_path_factory.mktemp("p"), budget=budget, rule="fanout_cap",
                        tau=0.0).prune(tree, ctx(99))
    plain = DeferredTopBPruner(DeferredTopBConfig(budget=budget, beta=0.0)).prune(tree, ctx(99))
    for b in range(tree.batch_size):
        assert kept_nodes(tree, pruned, b) == kept_nodes(tree, plain, b)


@SETTINGS
@given(p=proposals(batch=(1, 1), depth=(1, 3), candidates=(1, 3), masked=False, dead_depth=False, ties=False),
       counts=profiles(), tau=TAUS, budget=st.integers(1, 10), over=st.integers(0, 30))
def test_fanout_cap_over_an_over_expanded_heap_is_the_capped_heaps_first_pops(tmp_path_factory, p, counts, tau,
                                                                               budget, over):
    """The module docstring's claim, against a brute-force capped heap: the first B capped prefixes when the heap
    tree holds them, else the capped prefixes it holds."""
    logq, caps = p.logprobs[0].double().tolist(), reference_caps(counts, tau)
    every = [ranks for d in range(1, p.depth + 1) for ranks in itertools.product(range(p.num_candidates), repeat=d)]
    order = sorted(every, key=lambda ranks: (-sum(logq[i][r] for i, r in enumerate(ranks)), ranks))
    capped = [u for u in order if all(i >= len(caps) or r < caps[i] for i, r in enumerate(u))]
    heap = HeapBuilder(HeapConfig()).build(p, IdentityCorrector(), ctx(budget + over))
    held = rank_paths(heap, p)
    pruner = pruner_for(counts, tmp_path_factory.mktemp("p"), budget=budget, rule="fanout_cap", tau=tau)
    kept = rank_paths(pruner.prune(heap, ctx(99)), p)
    prefix = [u for u in capped if u in held]
    assert prefix == capped[:len(prefix)]  # the held eligible prefixes come first in the capped order
    assert kept == set(prefix[:budget])
    if len(order) <= budget + over:  # the heap holds every prefix: exactly the capped heap at budget B
        assert kept == set(capped[:budget])


def test_fanout_cap_worked_example_of_the_module_docstring(tmp_path):
    """p[1] = [0.6, 0.1], p[2] = [0.8, 0.1], tau = 0.3: caps [1, 1]; a, c kept though b outscores c."""
    counts = DepthRankCounts(trials=[10, 10], accepted=[[6, 1], [8, 1]])
    tree = DraftTree.from_lists([7, 1, 2, 3, 4], [-1, 0, 0, 1, 2], logq=[0.0, -0.1, -0.5, -0.8, -0.1])
    assert tree.score[0].tolist() == pytest.approx([0.0, -0.1, -0.5, -0.9, -0.6])

    def keeps(rule: str, tau: float = 0.02) -> set[int]:
        return kept_nodes(tree, pruner_for(counts, tmp_path, budget=2, rule=rule, tau=tau).prune(tree, ctx(99)), 0)

    assert keeps("fanout_cap", 0.3) == {1, 3}
    assert keeps("fanout_cap", 0.0) == {1, 2}  # no cap: the plain heap's a, b
    assert keeps("fanout_cap", 0.05) == {1, 2}  # both ranks clear 0.05: caps [2, 2]
    assert keeps("path_product") == {1, 3}
    assert DepthRankHistogramConfig(profile="p.json").rule == "fanout_cap"  # JetSpec's rule is the default


def test_fanout_cap_counts_the_ranks_that_clear_tau_as_jetspec(tmp_path):
    """Rank 1 clears tau at depth 1 and rank 0 does not: the cap is 1, so rank 0 (not rank 1) is allowed."""
    tree = DraftTree.from_lists([7, 1, 2], [-1, 0, 0], logq=[0.0, -0.1, -0.5])
    counts = DepthRankCounts(trials=[10], accepted=[[1, 6]])
    pruned = pruner_for(counts, tmp_path, budget=2, rule="fanout_cap", tau=0.3).prune(tree, ctx(99))
    assert kept_nodes(tree, pruned, 0) == {1}


def test_fanout_cap_does_not_count_the_pooled_column_of_a_full_row_as_a_rank() -> None:
    """The recorder pools ranks >= MAX_RANKS - 1 into a full row's last column: its rate caps nothing by itself (the
    shipped profile's depth 1 has 6 of 294 there, over tau 0.02, beside five ranks that clear it: cap 5, not 6); a
    full row whose every column clears tau is uncapped."""
    from specframe_trees.pruners.depth_rank_histogram import UNCAPPED, fanout_caps

    from specframe.metrics.depth_rank import MAX_RANKS

    five_and_pool = [[50, 20, 10, 8, 7] + [0] * (MAX_RANKS - 6) + [6]]
    assert fanout_caps(DepthRankCounts(trials=[100], accepted=five_and_pool), 0.05) == [5]
    assert fanout_caps(DepthRankCounts(trials=[100], accepted=[[6] * MAX_RANKS]), 0.05) == [UNCAPPED]
    assert fanout_caps(DepthRankCounts(trials=[100], accepted=[[6] * (MAX_RANKS - 1) + [1]]), 0.05) == [MAX_RANKS - 1]


def test_fanout_cap_leaves_unprofiled_depths_uncapped_and_cuts_trees_within_the_budget(tmp_path):
    """Depth 2 has no trials and depth 3 is past the profile: full fan-out there; depth 1's cap of 1 still
    drops b from a tree that fits the budget."""
    tree = DraftTree.from_lists([7, 1, 2, 3, 4, 5, 6], [-1, 0, 0, 1, 1, 3, 3],
                                logq=[0.0, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6])
    counts = DepthRankCounts(trials=[10, 0], accepted=[[9, 1], [0]])
    pruned = pruner_for(counts, tmp_path, rule="fanout_cap", tau=0.2).prune(tree, ctx(99))
    assert kept_nodes(tree, pruned, 0) == {1, 3, 4, 5, 6}
    assert check_tree(pruned, budget=6) == []


# ------------------------------------------------------------------------------------ recording
def test_counts_follow_the_recorded_rounds():
    """The module docstring's example, and plain rounds (no draft) are skipped."""
    rounds = [RoundRecord(nodes=5, depth=3, accepted=2, committed=3, drafted=True, path_ranks=[0, 1],
                          end_has_children=True),
              RoundRecord(nodes=4, depth=2, accepted=1, committed=2, drafted=True, path_ranks=[1],
                          end_has_children=False),
              RoundRecord(nodes=0, depth=0, accepted=0, committed=1, drafted=False)]
    counts = DepthRankCounts()
    counts.add_rounds(rounds)
    assert counts.trials == [2, 1, 1]
    assert counts.to_json()["accepted"] == [[1, 1], [0, 1], [0, 0]]


def test_written_profiles_read_back():
    counts = DepthRankCounts(trials=[4, 2], accepted=[[2, 1, 1], [1]], meta={"split": "tune"})
    again = counts_from_json(json.loads(dumps(counts)), source="x")
    assert again.to_json() == counts.to_json()


# ------------------------------------------------------------------------------------ bad profiles
GOOD = {"format": FORMAT, "trials": [4, 2], "accepted": [[2, 1], [1, 0]]}
BAD = [
    ({**GOOD, "format": "jetflow"}, "field 'format'"),
    ({k: v for k, v in GOOD.items() if k != "trials"}, "field 'trials'"),
    ({**GOOD, "accepted": [[2, 1]]}, "field 'accepted' must be a list of 2 rows"),
    ({**GOOD, "accepted": [[2, 1], []]}, r"field 'accepted\[1\]'"),
    ({**GOOD, "accepted": [[2, -1], [1, 0]]}, r"field 'accepted\[0\]\[1\]'"),
    ({**GOOD, "trials": [4, 2.5]}, r"field 'trials\[1\]'"),
    ({**GOOD, "accepted": [[4, 1], [1, 0]]}, r"'accepted\[0\]' sums to 5, more than trials\[0\] = 4"),
    ([1, 2, 3], "is a JSON object"),
    ({**GOOD, "trials": []}, "field 'trials' must be .*, got a list of 0\n"),
    ({**GOOD, "trials": [1] * 4097, "accepted": [[0]] * 4097}, "field 'trials' must be .*, got a list of 4097\n"),
    ({**GOOD, "trials": {"1": 4}}, "field 'trials' must be .*, got dict\n"),
    ({**GOOD, "meta": ["split", "tune"]}, "field 'meta' .* must be a JSON object, got list"),
    ({**GOOD, "meta": None}, "field 'meta' .* must be a JSON object, got NoneType"),
]


@pytest.mark.parametrize(("data", "message"), BAD, ids=[m for _, m in BAD])
def test_malformed_profiles_name_the_field_and_the_fix(tmp_path, data, message):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message) as err:
        load_counts(path)
    assert "specframe profile-acceptance" in err.value.render()  # the fix


def test_missing_corrupt_and_pickled_profiles_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="depth-rank profile"):
        load_counts(tmp_path / "absent.json")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "specframe.depth_rank_histogram/1", "trials": [1,')
    with pytest.raises(ConfigError, match="malformed JSON"):
        load_counts(corrupt)
    pickled = tmp_path / "profile.pkl"
    pickled.write_bytes(pickle.dumps(GOOD))  # never unpickled: read as text and refused
    with pytest.raises(ConfigError):
        load_counts(pickled)


def test_smoothing_must_be_positive():
    with pytest.raises(ValueError, match="smoothing"):
        DepthRankHistogramConfig(profile="p.json", smoothing=0.0)


def test_pruner_outputs_stay_on_the_trees_device(tmp_path):
    tree = DraftTree.from_lists([7, 1, 2, 3], [-1, 0, 0, 1], logq=[0.0, -0.1, -0.9, -0.2])
    pruned = pruner_for(DepthRankCounts([4, 4], [[2, 1], [1, 0]]), tmp_path, budget=1).prune(tree, ctx(99))
    assert pruned.tokens.device == torch.device("cpu") and pruned.capacity == 2


def test_fanout_cap_refuses_builder_scores_that_rise_along_an_edge_when_checking(tmp_path):
    """The cap keeps a top-B prefix of the builder's path scores, which is a tree only if no node outranks its
    parent: the pipeline's checking mode names the first node that does (as deferred_topb does)."""
    from dataclasses import replace

    from specframe.errors import ContractError

    tree = DraftTree.from_lists([9, 1, 2], [-1, 0, 1], score=[0.0, -1.0, -0.5])
    pruner = pruner_for(DepthRankCounts(trials=[10, 10], accepted=[[9, 1], [9, 1]]), tmp_path, budget=1,
                        rule="fanout_cap", tau=0.3)
    with pytest.raises(ContractError, match="depth_rank_histogram: in row 0, node 2 ranks above its parent"):
        pruner.prune(tree, replace(ctx(1), check=True))
