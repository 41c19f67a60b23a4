"""JetSpec's depth_rank_histogram pruner and its profile: Lemma-style properties, recording, and bad profiles.

Properties (any tree, profile and budget): the kept set is a valid ancestor-closed tree of ``min(nodes, B)``
non-root nodes with their scores; it is the top-B by the profile's path product, computed here from scratch per
node (its path, each node's sibling rank by ``logq``), so a node of higher product is never dropped for a lower one.
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from specframe_trees.pruners import DepthRankHistogramConfig, DepthRankHistogramPruner
from trees_testkit import ctx

from specframe.errors import ConfigError
from specframe.metrics.depth_rank import FORMAT, DepthRankCounts, counts_from_json, dumps, load_counts
from specframe.metrics.records import RoundRecord
from specframe.testing.strategies import draft_trees
from specframe.tree import DraftTree, check_tree

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


def pruner_for(counts: DepthRankCounts, tmp: Path, budget: int | None = None,
               smoothing: float = 1.0) -> DepthRankHistogramPruner:
    path = tmp / "profile.json"
    path.write_text(dumps(counts))
    config = DepthRankHistogramConfig(profile=str(path), budget=budget, smoothing=smoothing)
    return DepthRankHistogramPruner(config, load_counts(path))


def reference_products(tree: DraftTree, b: int, counts: DepthRankCounts, s: float) -> list[float]:
    """Per node of row ``b``: the product of profile entries along its path, from the module docstring's rules."""
    n = int(tree.num_nodes[b])
    logq, parent = tree.logq[b].tolist(), tree.parent[b].tolist()

    def rank(i: int) -> int:
        return sum(1 for j in range(1, n) if j != i and parent[j] == parent[i]
                   and (logq[j] > logq[i] or (logq[j] == logq[i] and j < i)))

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
