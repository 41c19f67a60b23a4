"""The verification-size rule: flat curves verify everything, steep ones little or nothing; kept sets are trees."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from specframe.cost import AutoBudget, AutoBudgetSettings, CostProfile, best_verify_size
from specframe.cost.chooser import verification_order
from specframe.tree import DraftTree, check_tree

FLAT = {1: 10.0, 65: 10.5}  # GPU-like: 64 more tokens cost 5 %
STEEP = {1: 45.0, 2: 60.0, 5: 75.0, 9: 99.0, 17: 106.0, 33: 141.0, 65: 260.0}  # these CPUs
WALL = {1: 45.0, 2: 200.0, 65: 900.0}  # any extra token is very expensive


def wide_tree(n: int = 24) -> DraftTree:
    """A random tree whose path scores fall along edges."""
    gen = torch.Generator().manual_seed(n)
    parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
    logq = [0.0] + [math.log(float(torch.rand((), generator=gen)) * 0.8 + 0.2) for _ in range(1, n)]
    return DraftTree.from_lists(list(range(n)), parents, logq=logq)


def test_worked_example_of_the_module_docstring() -> None:
    assert best_verify_size([0.9, 0.6, 0.2], [50.0, 55.0, 60.0, 90.0], 0.01) == 2


def test_zero_is_chosen_when_no_node_pays() -> None:
    assert best_verify_size([0.3, 0.2], [45.0, 200.0, 300.0], 1 / 45) == 0


@pytest.mark.parametrize(("curve", "expect"), [(FLAT, "all"), (STEEP, "some"), (WALL, "none")])
def test_flat_profiles_verify_the_largest_tree_and_steep_ones_a_small_one(curve, expect) -> None:
    tree = wide_tree()
    auto = AutoBudget(CostProfile(key={}, verify_ms=curve), AutoBudgetSettings(max_budget=64))
    kept, k = auto.choose(tree)
    n = int(tree.num_nodes[0]) - 1
    if expect == "all":
        assert k == n and kept is tree
    elif expect == "some":
        assert 0 < k < n
    else:
        assert k == 0
    assert check_tree(kept) == []
    assert int(kept.num_nodes[0]) == k + 1


def test_max_budget_caps_the_choice_on_a_flat_profile() -> None:
    auto = AutoBudget(CostProfile(key={}, verify_ms=FLAT), AutoBudgetSettings(max_budget=5))
    kept, k = auto.choose(wide_tree())
    assert k == 5 and int(kept.num_nodes[0]) == 6


def test_every_prefix_of_the_order_is_ancestor_closed_and_sibling_prefix_when_asked() -> None:
    tree = wide_tree(30)
    auto = AutoBudget(CostProfile(key={}, verify_ms=FLAT), AutoBudgetSettings())
    p = auto.estimator.estimate(tree)
    for sibling_prefix in (False, True):
        order, values = verification_order(tree, p, sibling_prefix=sibling_prefix)
        assert values == sorted(values, reverse=True)
        parent = tree.parent[0].tolist()
        children = tree.children()[0]
        for k in range(len(order) + 1):
            kept = {0, *order[:k]}
            assert all(parent[i] in kept for i in kept if i)
            if sibling_prefix:
                for kids in children:
                    flags = [c in kept for c in kids]
                    assert flags == sorted(flags, reverse=True)


NOTHING = torch.tensor([0, -1, -1, -1, -1, -1])


def never_accepted(auto: AutoBudget, tree: DraftTree, rounds: int = 30) -> None:
    """Calibrate the estimator on rounds where nothing of ``tree`` is accepted (the prior is then forgotten)."""
    for _ in range(rounds):
        auto.estimator.observe(tree, NOTHING)


def test_drafting_stops_when_it_does_not_pay_and_probes_with_growing_intervals() -> None:
    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(min_probe_interval=2,
                                                                                max_probe_interval=8))
    tree = wide_tree(6)
    never_accepted(auto, tree)
    nothing = NOTHING
    pattern = []
    for _ in range(40):
        drafted = auto.should_draft()
        pattern.append(drafted)
        if drafted:
            auto.observe_drafted(tree, nothing, 0, {"draft": 30.0, "target": 80.0})
        else:
            auto.observe_plain({"target": 45.0})
    assert pattern[0]
    starts = [i for i, d in enumerate(pattern) if d]
    gaps = [b - a - 1 for a, b in itertools.pairwise(starts)]
    assert gaps[:4] == [2, 4, 8, 8]
    assert sum(pattern) <= 7


def test_drafting_resumes_when_a_probe_pays() -> None:
    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(min_probe_interval=2))
    chain = DraftTree.from_lists(list(range(6)), [-1, 0, 1, 2, 3, 4], logq=[0.0] + [-0.05] * 5)
    never_accepted(auto, chain, rounds=8)
    auto.observe_drafted(chain, NOTHING, 0, {"draft": 30.0, "target": 80.0})
    assert not auto.should_draft()
    auto.observe_plain({"target": 45.0})
    auto.observe_plain({"target": 45.0})
    assert auto.should_draft()
    resumed = None
    for i in range(80):  # the drafter became good: the whole chain is accepted whenever it drafts
        if auto.should_draft():
            auto.observe_drafted(chain, torch.tensor([0, 1, 2, 3, 4, 5]), 5, {"draft": 30.0, "target": 80.0})
            if auto.drafting and resumed is None:
                resumed = i
        else:
            auto.observe_plain({"target": 45.0})
    assert resumed is not None and auto.drafting  # after a few paying probes (31 rounds here)


def test_a_drafter_that_pays_on_average_keeps_drafting_through_unlucky_rounds() -> None:
    """Rounds accept all or nothing at random (mean 3.5 tokens for 111 ms against 1 per 45 ms): a moving
    average of realised tokens dips below the plain rate by chance; the calibrated expectation does not."""
    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings())
    chain = DraftTree.from_lists(list(range(6)), [-1, 0, 1, 2, 3, 4], logq=[0.0] + [-0.05] * 5)
    coin = torch.Generator().manual_seed(0)
    drafted = 0
    for _ in range(300):
        if auto.should_draft():
            drafted += 1
            if float(torch.rand((), generator=coin)) < 0.5:
                auto.observe_drafted(chain, torch.tensor([0, 1, 2, 3, 4, 5]), 5, {"draft": 30.0, "target": 80.0})
            else:
                auto.observe_drafted(chain, NOTHING, 0, {"draft": 30.0, "target": 80.0})
        else:
            auto.observe_plain({"target": 45.0})
    assert drafted >= 290


def test_a_new_request_probes_soon_but_keeps_what_was_learnt() -> None:
    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(min_probe_interval=2,
                                                                                max_probe_interval=16))
    tree = wide_tree(6)
    never_accepted(auto, tree)
    nothing = NOTHING
    for _ in range(30):  # a request on which drafting never pays: the interval grows to 16
        if auto.should_draft():
            auto.observe_drafted(tree, nothing, 0, {"draft": 30.0, "target": 80.0})
        else:
            auto.observe_plain({"target": 45.0})
    assert auto.probe_interval == 16 and not auto.drafting
    auto.start_request()
    assert auto.plain_left <= 2 and auto.probe_interval == 16 and auto.draft_rate is not None
