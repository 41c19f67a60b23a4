"""The controller of `budget: auto`: which rows draft, how many nodes each verifies, and what it remembers.

Flat curves verify everything, steep ones little or nothing; kept sets are trees; speculation shrinks as the
batch grows; a row that does not pay decodes plainly and probes at growing intervals; a new request starts from
what earlier ones taught (synthetic histories, no timing).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from specframe.cost import AutoBudget, AutoBudgetSettings, ControllerMemory, CostProfile, best_width
from specframe.cost.auto_budget import RowBudget
from specframe.cost.chooser import verification_order
from specframe.device_sync import HostSyncCounter
from specframe.tree import DraftTree, check_tree

FLAT = {1: 10.0, 65: 10.5}  # GPU-like: 64 more tokens cost 5 %
STEEP = {1: 45.0, 2: 60.0, 5: 75.0, 9: 99.0, 17: 106.0, 33: 141.0, 65: 260.0}  # these CPUs
WALL = {1: 45.0, 2: 200.0, 65: 900.0}  # any extra token is very expensive
#: GPU-like: flat while the forward is memory-bound (up to 64 tokens), then linear in the token count.
GPU = {1: 10.0, 64: 10.5, 128: 21.0, 256: 42.0, 1024: 168.0}
DRAFTED_MS = {"draft": 30.0, "build": 0.0, "prune": 0.0, "target": 80.0, "verify": 0.5, "commit": 0.5}
PLAIN_MS = {"target": 45.0, "verify": 0.1, "commit": 0.1}


def wide_tree(n: int = 24) -> DraftTree:
    """A random tree whose path scores fall along edges."""
    gen = torch.Generator().manual_seed(n)
    parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
    logq = [0.0] + [math.log(float(torch.rand((), generator=gen)) * 0.8 + 0.2) for _ in range(1, n)]
    return DraftTree.from_lists(list(range(n)), parents, logq=logq)


def controller(curve: dict[int, float], **settings: int) -> AutoBudget:
    return AutoBudget(CostProfile(key={}, verify_ms=curve), AutoBudgetSettings(**settings))


def test_worked_example_of_the_module_docstring() -> None:
    sums = [[0.0, 0.9, 1.5, 1.7]]
    assert best_width(sums, [50.0, 55.0, 60.0, 90.0], 0.01) == 2


def test_zero_is_chosen_when_no_node_pays() -> None:
    assert best_width([[0.0, 0.3, 0.5]], [45.0, 200.0, 300.0], 1 / 45) == 0


@pytest.mark.parametrize(("curve", "expect"), [(FLAT, "all"), (STEEP, "some"), (WALL, "none")])
def test_flat_profiles_verify_the_largest_tree_and_steep_ones_a_small_one(curve, expect) -> None:
    tree = wide_tree()
    choice = controller(curve, max_budget=64).choose(tree, rows=1)
    n, k = int(tree.num_nodes[0]) - 1, choice.kept[0]
    if expect == "all":
        assert k == n and choice.tree is tree
    elif expect == "some":
        assert 0 < k < n
    else:
        assert k == 0
    assert check_tree(choice.tree) == []
    assert int(choice.tree.num_nodes[0]) == k + 1
    assert choice.expected[0] >= 1.0


def test_max_budget_caps_the_choice_on_a_flat_profile() -> None:
    choice = controller(FLAT, max_budget=5).choose(wide_tree(), rows=1)
    assert choice.kept == [5] and int(choice.tree.num_nodes[0]) == 6


def test_the_choice_reads_the_host_once_for_all_rows() -> None:
    auto = controller(STEEP, max_budget=64)
    trees = DraftTree.stack([wide_tree(24), wide_tree(9), wide_tree(17)])
    auto.choose(trees, rows=3)  # tables moved once
    with HostSyncCounter() as counter:
        choice = auto.choose(trees, rows=3)
    assert counter.total == 1, counter.by_op
    assert check_tree(choice.tree) == [] and len(choice.kept) == 3


def test_every_prefix_of_the_order_is_ancestor_closed_and_sibling_prefix_when_asked() -> None:
    tree = wide_tree(30)
    p = controller(FLAT).estimator.estimate(tree)
    for sibling_prefix in (False, True):
        order, values = verification_order(tree, p, sibling_prefix=sibling_prefix)
        order, values = order[0].tolist(), values[0].tolist()
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


# ------------------------------------------------------------------------------------------ batches
def chosen_width(rows: int) -> int:
    trees = DraftTree.stack([wide_tree() for _ in range(rows)])
    choice = controller(GPU, max_budget=64).choose(trees, rows=rows)
    assert len(set(choice.kept)) == 1 and check_tree(choice.tree) == []
    assert (choice.tree.num_nodes - 1).tolist() == choice.kept
    return choice.kept[0]


def test_speculation_shrinks_as_the_batch_grows_and_stops() -> None:
    widths = [chosen_width(b) for b in (1, 2, 4, 8, 16, 32, 64)]
    # One row: the flat part of the curve pays for the whole tree; 64 rows: the roots alone
    # (docs/concepts/batched-decoding.md quotes this sequence).
    assert widths == [23, 23, 15, 7, 3, 1, 0]


def test_rows_with_smaller_trees_keep_all_they_have() -> None:
    small = DraftTree.from_lists([5, 6, 7], [-1, 0, 1], logq=[0.0, -0.1, -0.1])
    choice = controller(GPU, max_budget=64).choose(DraftTree.stack([wide_tree(), small]), rows=2)
    assert choice.kept == [23, 2] and int(choice.tree.num_nodes[1]) == 3


def test_a_batch_forward_beyond_the_measured_curve_becomes_a_point() -> None:
    auto = controller({1: 10.0, 65: 10.5})  # flat as measured: extrapolation would call 300 tokens free
    rows = [RowBudget(drafting=True, probe_interval=4) for _ in range(16)]
    auto.observe_drafted(rows, [], [1.25] * 16, 300, {"target": 40.0})
    assert auto.profile.verify_cost(300) == 40.0 and auto.profile.verify_cost(65) == 10.5
    auto.observe_drafted(rows, [], [1.25] * 16, 300, {"target": 50.0})  # then refined like any measured point
    assert 40.0 < auto.profile.verify_cost(300) < 50.0
    single = controller({1: 10.0, 65: 10.5})
    single.observe_drafted([RowBudget(drafting=True, probe_interval=4)], [], [2.0], 300, {"target": 40.0})
    assert sorted(single.profile.verify_ms) == [1, 65]  # one row: the curve keeps its measured points


# ------------------------------------------------------------------------------- draft or not, per row
def run_row(auto: AutoBudget, row: RowBudget, gains: list[float], rounds: int) -> list[bool]:
    """Drive one row: drafted rounds commit ``gains[i % len]`` tokens in expectation."""
    pattern = []
    for i in range(rounds):
        drafted = row.wants_draft
        pattern.append(drafted)
        if drafted:
            auto.observe_drafted([row], [], [gains[i % len(gains)]], 6, DRAFTED_MS)
        else:
            auto.observe_plain([row], PLAIN_MS)
    return pattern


def test_drafting_stops_when_it_does_not_pay_and_probes_with_growing_intervals() -> None:
    auto = controller(STEEP, min_probe_interval=2, max_probe_interval=8)
    row = auto.start_row()
    pattern = run_row(auto, row, [1.0], 40)
    assert pattern[0]
    starts = [i for i, d in enumerate(pattern) if d]
    gaps = [b - a - 1 for a, b in itertools.pairwise(starts)]
    assert gaps[:4] == [2, 4, 8, 8]
    assert sum(pattern) <= 7


def test_drafting_resumes_when_a_probe_pays() -> None:
    auto = controller(STEEP, min_probe_interval=2)
    row = auto.start_row()
    run_row(auto, row, [1.0], 3)
    assert not row.drafting
    pattern = run_row(auto, row, [5.0], 20)  # the text changed: the drafter is now accepted
    assert row.drafting and sum(pattern[-10:]) == 10


@pytest.mark.parametrize("gains, keeps", [([3.0, 4.0, 3.5, 3.2], True), ([1.8, 2.3, 2.0, 2.2], False)])
def test_the_expected_gain_against_break_even_decides(gains: list[float], keeps: bool) -> None:
    """The controller reads each drafted round's expected gain (the calibrated acceptance of the verified tree,
    never the tokens it happened to commit), so varying expectations above a break-even near 2.5 tokens keep a
    row drafting, and the same variation below it stops the row (the control)."""
    auto = controller(STEEP)
    row = auto.start_row()
    drafted = sum(run_row(auto, row, gains, 300))
    assert drafted >= 295 if keeps else drafted <= 20


def test_rows_decide_on_their_own_text() -> None:
    """In one batch a row whose drafts pay keeps drafting while its batch-mate decodes plainly."""
    auto = controller(STEEP)
    good, bad = auto.start_row(), auto.start_row()
    for _ in range(30):
        drafted = [r for r in (good, bad) if r.wants_draft]
        plain = [r for r in (good, bad) if not r.wants_draft]
        if drafted:
            gains = [4.0 if r is good else 1.0 for r in drafted]
            auto.observe_drafted(drafted, plain, gains, 12, DRAFTED_MS)
        else:
            auto.observe_plain(plain, PLAIN_MS)
    assert good.drafting and not bad.drafting


# ------------------------------------------------------------------------------------------- memory
def test_a_new_request_starts_from_what_earlier_requests_taught() -> None:
    """Synthetic history: earlier requests' drafted rounds averaged 1.2 tokens, below the break-even. A new
    request then decodes plainly first and probes after min_probe_interval rounds; with a history of 4 tokens it
    drafts at once; with no history it drafts at once (nothing says it does not pay)."""
    poor = controller(STEEP, min_probe_interval=3)
    poor.observe_drafted([RowBudget(drafting=True, probe_interval=3)], [], [1.2], 6, DRAFTED_MS)
    memory = poor.remember()
    remembered = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(min_probe_interval=3),
                            memory=ControllerMemory.from_json(memory.to_json()))
    row = remembered.start_row()
    assert not row.drafting and row.plain_left == 3
    assert run_row(remembered, row, [1.2], 4) == [False, False, False, True]
    rich = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(),
                      memory=ControllerMemory(gain=4.0, draft_ms=110.0))
    assert rich.start_row().drafting
    assert controller(STEEP).start_row().drafting


def test_memory_keeps_the_calibration() -> None:
    auto = controller(STEEP)
    tree = DraftTree.from_lists([1, 2, 3], [-1, 0, 1], logq=[0.0, -0.05, -0.05])
    for _ in range(50):
        auto.observe_tree(tree, torch.tensor([[0, -1, -1]]))  # never accepted
    again = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(),
                       memory=ControllerMemory.from_json(auto.remember().to_json()))
    assert torch.allclose(again.estimator.estimate(tree), auto.estimator.estimate(tree))
    assert float(again.estimator.estimate(tree)[0, 1]) < 0.2


@pytest.mark.parametrize("bad", [{"format": 1, "gain": 1e308}, {"format": 1, "gain": -1.0},
                                 {"format": 1, "draft_ms": float("nan")}, {"format": 3},
                                 {"format": 1, "calibration": [1, 2]}, {"format": 1, "gain": True}])
def test_implausible_memory_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        ControllerMemory.from_json(bad)


def test_a_round_is_priced_on_every_row_it_runs() -> None:
    """One of four rows drafts. Without selective batching the three plain rows are padded to the tree's width,
    so the forward runs 4 (k + 1) tokens; with it, k + 1 + 3. Pricing only the drafting row's k + 1 tokens (the
    mispricing of an earlier version) verifies 3 nodes where the padded round pays for none."""
    sums = [[0.0, 0.9, 1.6, 2.1]]
    verify_ms = [40.0 + 15.0 * t for t in range(1, 17)]
    rate = 1 / 45
    assert best_width(sums, verify_ms, rate, rows=4, packs=False) == 0
    assert best_width(sums, verify_ms, rate, rows=4, packs=True) == 3
    assert best_width(sums, verify_ms, rate) == 3  # the drafting row alone in the round
    curve = {t: 40.0 + 15.0 * t for t in (1, 2, 4, 8, 16, 64)}
    tree = DraftTree.from_lists([1, 2, 3, 4], [-1, 0, 1, 2], logq=[0.0, -0.05, -0.05, -0.05])
    padded, packed = controller(curve, max_budget=8), controller(curve, max_budget=8)
    packed.packs = True
    assert padded.choose(tree, rows=4).kept[0] < packed.choose(tree, rows=4).kept[0]


def test_draft_cost_splits_fixed_and_per_row_parts() -> None:
    from specframe.cost.draft_cost import DraftCost

    cost = DraftCost()
    assert cost.split() == (0.0, 0.0)
    cost.observe(2, 12.0, kept=3)
    assert cost.split() == (4.0, 4.0)  # one size seen: the prior, half of a one-row round is fixed
    for rows, ms in [(1, 10.0), (3, 20.0)] * 10:
        cost.observe(rows, ms, kept=3)
    fixed, per_row = cost.split()
    assert fixed == pytest.approx(5.0, abs=0.6) and per_row == pytest.approx(5.0, abs=0.3)


def test_a_batch_row_pays_its_marginal_cost_not_the_whole_rounds() -> None:
    """Four rows, one of which drafts well: with selective batching its drafted round adds its drafting share and
    the k tokens of its tree; the break-even is that marginal cost times the rate, and grows without selective
    batching (its tree pads every row)."""
    packed, padded = controller(STEEP), controller(STEEP)
    packed.packs = True
    for auto in (packed, padded):
        rows = [auto.start_row() for _ in range(4)]
        for n in (4, 1, 2, 1, 3, 1):
            auto.observe_drafted(rows[:n], rows[n:], [3.0] * n, 4 + 4 * n, DRAFTED_MS, kept=[4] * n)
    assert 1.0 < packed.break_even(4) < padded.break_even(4)
    assert packed.break_even(4) < packed.break_even(1)  # a row's share of a batch costs less than a round alone
