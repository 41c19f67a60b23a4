"""`budget: auto` across a batch: speculation shrinks as the batch grows and stops where it no longer pays."""

from __future__ import annotations

import itertools

from specframe.cost import AutoBudget, AutoBudgetSettings, CostProfile
from specframe.cost.batch_budget import choose_batch
from specframe.tree import DraftTree, check_tree

from .test_chooser import wide_tree

#: GPU-like: flat while the forward is memory-bound (up to 64 tokens), then linear in the token count.
GPU = {1: 10.0, 64: 10.5, 128: 21.0, 256: 42.0, 1024: 168.0}


def controller(curve: dict[int, float]) -> AutoBudget:
    return AutoBudget(CostProfile(key={}, verify_ms=curve), AutoBudgetSettings(max_budget=64))


def chosen_width(rows: int) -> int:
    trees, kept = choose_batch(controller(GPU), [wide_tree() for _ in range(rows)])
    assert len(set(kept)) == 1 and all(not check_tree(t) for t in trees)
    assert [int(t.num_nodes[0]) - 1 for t in trees] == kept
    return kept[0]


def test_speculation_shrinks_as_the_batch_grows_and_stops() -> None:
    widths = [chosen_width(b) for b in (1, 2, 4, 8, 16, 64)]
    assert widths[0] == 23  # one row: the flat part of the curve pays for the whole tree
    assert all(a >= b for a, b in itertools.pairwise(widths)), widths
    assert widths[-1] == 0 and widths[2] > widths[-1]  # 64 rows: the roots alone


def test_rows_with_smaller_trees_keep_all_they_have() -> None:
    small = DraftTree.from_lists([5, 6, 7], [-1, 0, 1], logq=[0.0, -0.1, -0.1])
    trees, kept = choose_batch(controller(GPU), [wide_tree(), small])
    assert kept == [23, 2] and int(trees[1].num_nodes[0]) == 3


def test_the_batch_size_sets_the_plain_rate() -> None:
    auto = controller(GPU)
    choose_batch(auto, [wide_tree() for _ in range(8)])
    assert auto.rows == 8 and abs(auto.plain_rate - 8 / auto.profile.verify_cost(8)) < 1e-9


def test_a_batch_forward_beyond_the_measured_curve_becomes_a_point() -> None:
    auto = controller({1: 10.0, 65: 10.5})  # flat as measured: extrapolation would call 300 tokens free
    auto.rows = 16
    auto.observe_round(300, 20.0, {"target": 40.0})
    assert auto.profile.verify_cost(300) == 40.0 and auto.profile.verify_cost(65) == 10.5
    auto.observe_round(300, 20.0, {"target": 50.0})  # then refined like any measured point
    assert 40.0 < auto.profile.verify_cost(300) < 50.0
    single = controller({1: 10.0, 65: 10.5})
    single.observe_round(300, 2.0, {"target": 40.0})  # one row: the curve keeps its measured points
    assert sorted(single.profile.verify_ms) == [1, 65]
