"""The controller of `budget: auto`, by its properties: what the two rules decide on flat and steep cost models,
that kept node sets are ancestor-closed and monotone in ``p``, that exploration retries rows whose evidence is thin,
and what it remembers (synthetic cost models and histories, no timing).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specframe.cost import AutoBudget, AutoBudgetSettings, ControllerMemory, CostProfile, node_counts, plan_counts
from specframe.cost.auto_budget import RowBudget
from specframe.cost.chooser import verification_order
from specframe.cost.planner import forward_tokens
from specframe.tree import DraftTree, check_tree

BATCHES = (1, 2, 4, 8)
#: GPU-like at every batch size: 64 more tokens a row cost 5 %.
FLAT = {b: {b: 10.0, b * 65: 10.5} for b in BATCHES}
#: These CPUs: steep in the tokens, and a batch of 8 is compute-bound from its plain round on.
STEEP_AT_8 = {1: {1: 45.0, 2: 50.0, 5: 56.0, 9: 64.0, 17: 80.0},
              2: {2: 48.0, 4: 55.0, 10: 70.0, 18: 86.0, 34: 120.0},
              4: {4: 52.0, 8: 75.0, 20: 130.0, 36: 200.0, 68: 330.0},
              8: {8: 60.0, 16: 150.0, 40: 380.0, 72: 700.0, 136: 1300.0}}
GOOD = [0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.001]


def profile(curves: dict[int, dict[int, float]]) -> CostProfile:
    return CostProfile(key={}, verify_ms=curves[1], batch_ms={b: c for b, c in curves.items() if b != 1})


def controller(curves: dict[int, dict[int, float]], *, draft: tuple[float, float] = (0.0, 0.0), max_budget: int = 16,
               packs: bool = True) -> AutoBudget:
    auto = AutoBudget(profile(curves), AutoBudgetSettings(max_budget=max_budget))
    auto.draft_cost.observe(1, draft[0] + draft[1])
    auto.draft_cost.observe(2, draft[0] + 2 * draft[1])
    auto.packs = packs
    auto.freeze()
    return auto


def rows(outlooks: list[list[float]], accepted: float = 0.0, predicted: float = 0.0) -> list[RowBudget]:
    """Rows with these outlooks and a calibration of ``accepted`` out of ``predicted`` draft tokens."""
    return [RowBudget(accepted=accepted, predicted=predicted, outlook=list(o)) for o in outlooks]


# ------------------------------------------------------------------------------------- flat and steep
@pytest.mark.parametrize("batch", BATCHES)
def test_a_flat_cost_model_verifies_the_full_budget_wherever_tau_pays_the_drafter(batch: int) -> None:
    """Plain decoding at B rows earns B / 10 tokens per ms. A drafter costing 4 + 1 ms a row is paid for by the
    good rows' 8.9 expected tokens, so they verify all 16 nodes; a row whose 16 nodes bring 0.016 tokens does
    not pay its ms and decodes plainly."""
    auto = controller(FLAT, draft=(4.0, 1.0))
    poor = [0.001] * 16
    budgets = rows([GOOD if b % 2 == 0 else poor for b in range(batch)], accepted=500.0, predicted=500.0)
    plan = auto.plan(budgets, [100] * batch)
    assert plan.counts == [16 if b % 2 == 0 else 0 for b in range(batch)]
    assert plan.reasons == [None if b % 2 == 0 else "no_gain" for b in range(batch)]


def test_steep_costs_at_a_batch_size_give_plain_rounds_there_and_drafting_where_they_are_not() -> None:
    auto = controller(STEEP_AT_8, draft=(6.0, 2.0))
    for batch, drafts in ((1, True), (2, True), (8, False)):
        plan = auto.plan(rows([GOOD] * batch, accepted=200.0, predicted=200.0), [100] * batch)
        assert any(plan.counts) == drafts, (batch, plan)
        if not drafts:
            assert set(plan.reasons) == {"no_gain"}


def test_padding_targets_price_every_row_at_the_widest() -> None:
    """One of four rows drafts. Without selective batching the three plain rows are padded to its width (the
    forward carries 4 (k + 1) tokens), with it k + 1 + 3: the padded round verifies fewer nodes."""
    curves = {b: {b * m: 40.0 + 15.0 * b * m for m in (1, 2, 4, 8, 16)} for b in (1, 4)}
    outlooks = [[0.9, 0.7, 0.5, 0.2], [], [], []]
    padded = controller(curves, packs=False).plan(rows(outlooks), [100] * 4).counts[0]
    packed = controller(curves, packs=True).plan(rows(outlooks), [100] * 4).counts[0]
    assert padded < packed
    assert forward_tokens([7, 0, 0, 0], packs=True) == 11 and forward_tokens([7, 0, 0, 0], packs=False) == 32


def test_the_worked_example_of_the_planner() -> None:
    curve = {1: 40.0, 2: 50.0, 3: 55.0, 4: 60.0}
    assert node_counts([[0.9, 0.5, 0.1]], 1, lambda b, n: curve[int(n)], 1 / 40, lambda r: 0.0, packs=True) == [2]
    assert plan_counts([[0.9, 0.5, 0.1]], 1, lambda b, n: curve[int(n)], 1 / 40, 60.0, 0.0, packs=True) == [0]


# --------------------------------------------------------------------------------- node rule properties
costs = st.sampled_from(["linear", "concave", "convex", "flat"])


def cost_of(kind: str) -> object:
    return {"linear": lambda b, n: 20.0 + 3.0 * n, "concave": lambda b, n: 20.0 + 12.0 * math.sqrt(n),
            "convex": lambda b, n: 20.0 + 0.2 * n * n, "flat": lambda b, n: 20.0 + 0.01 * n}[kind]


@settings(max_examples=150, deadline=None)
@given(p=st.lists(st.lists(st.floats(0.0, 1.0), max_size=12).map(lambda r: sorted(r, reverse=True)),
                  min_size=1, max_size=6),
       kind=costs, rate=st.floats(0.01, 1.0),
       allowed=st.one_of(st.none(), st.lists(st.integers(1, 12), min_size=1, max_size=4)))
def test_node_choice_is_a_prefix_per_row_and_monotone_in_p_across_rows(p, kind, rate, allowed) -> None:
    """Each row keeps a prefix of its nodes (ancestor-closed, since p falls along a path), of an allowed size; and
    (the target packs, any count allowed) no node left out has a larger p than a node kept, in any row."""
    batch = len(p)
    counts = node_counts(p, batch, cost_of(kind), rate, lambda r: 0.0, packs=True, allowed=allowed)  # type: ignore
    assert all(0 <= k <= len(row) for k, row in zip(counts, p, strict=True))
    if allowed is not None:
        assert all(k == 0 or k in allowed for k in counts)
    else:
        kept = [v for row, k in zip(p, counts, strict=True) for v in row[:k]]
        left = [v for row, k in zip(p, counts, strict=True) for v in row[k:]]
        if kept and left:
            assert min(kept) >= max(left) - 1e-12


@settings(max_examples=60, deadline=None)
@given(scale=st.floats(0.2, 1.0))
def test_more_likely_nodes_never_get_fewer_verifications(scale) -> None:
    """Monotone in p: scaling a row's p up never lowers its count."""
    cost = cost_of("linear")
    low = node_counts([[v * scale for v in GOOD]], 1, cost, 0.05, lambda r: 0.0, packs=True)  # type: ignore[arg-type]
    high = node_counts([GOOD], 1, cost, 0.05, lambda r: 0.0, packs=True)  # type: ignore[arg-type]
    assert high[0] >= low[0]


def wide_tree(n: int = 24, seed: int = 0) -> DraftTree:
    """A random tree whose path scores fall along edges."""
    gen = torch.Generator().manual_seed(seed)
    parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
    logq = [0.0] + [math.log(float(torch.rand((), generator=gen)) * 0.8 + 0.2) for _ in range(1, n)]
    return DraftTree.from_lists(torch.randperm(100, generator=gen)[:n].tolist(), parents, logq=logq)


@pytest.mark.parametrize("sibling_prefix", [False, True])
def test_kept_trees_are_ancestor_closed_with_each_rows_own_count(sibling_prefix: bool) -> None:
    auto = AutoBudget(profile(FLAT), AutoBudgetSettings(max_budget=16), sibling_prefix=sibling_prefix)
    trees = DraftTree.stack([wide_tree(24, seed) for seed in range(3)])
    kept, p_sorted = auto.keep(trees, [5, 0, 11])
    assert check_tree(kept) == [] and (kept.num_nodes - 1).tolist() == [5, 0, 11]
    assert p_sorted.shape == (3, 16) and bool((p_sorted[:, :-1] >= p_sorted[:, 1:]).all())


def test_every_prefix_of_the_order_is_ancestor_closed_and_sibling_prefix_when_asked() -> None:
    tree = wide_tree(30, seed=30)
    p = AutoBudget(profile(FLAT), AutoBudgetSettings()).estimator.estimate(tree)
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


def test_node_counts_keep_to_the_allowed_sizes_of_the_device() -> None:
    auto = controller(FLAT)
    auto.allowed = (4, 8)
    assert auto.plan(rows([GOOD[:6], GOOD]), [100, 100]).counts == [4, 8]


# ----------------------------------------------------------------------------------------- exploration
def test_a_row_that_stopped_paying_is_retried_on_optimism_and_labelled_why_it_is_not() -> None:
    """A row whose trees were accepted at a tenth of the prediction decodes plainly; while its evidence is thin
    some rounds still draft (exploration), and as it decays over plain rounds the row is retried; with much
    evidence it is `no_gain`."""
    auto = controller(STEEP_AT_8, draft=(30.0, 10.0))
    outlook = [0.8, 0.6, 0.4]
    thin = RowBudget(accepted=0.25, predicted=2.5, outlook=outlook)
    decisions = []
    for _ in range(200):
        plan = auto.plan([thin], [100])
        decisions.append(plan.reasons[0])
        auto.observe_round([thin], plan, None, [0], [0], {}, 1)  # a plain round: the evidence ages
    assert None in decisions and "explore_declined" in decisions  # some retries, some declined draws
    sure = RowBudget(accepted=10.0, predicted=100.0, outlook=outlook)
    assert [auto.plan([sure], [100]).reasons[0] for _ in range(50)] == ["no_gain"] * 50


def test_a_row_without_room_in_its_context_is_plain_for_that_reason() -> None:
    plan = controller(FLAT).plan(rows([GOOD, GOOD]), [0, 10])
    assert plan.counts[0] == 0 and plan.reasons[0] == "context_full" and plan.counts[1] > 0


def test_plans_depend_on_the_statistics_only() -> None:
    """Two controllers with the same history and generator plan the same round, whatever the trees they then keep
    nodes of; the counts kept are the planned ones (capped by the tree)."""
    first, second = controller(STEEP_AT_8, draft=(5.0, 2.0)), controller(STEEP_AT_8, draft=(5.0, 2.0))
    budgets = rows([GOOD, GOOD[:3]], accepted=3.0, predicted=4.0)
    plans = [c.plan(budgets, [100, 100]) for c in (first, second)]
    assert plans[0] == plans[1]
    counts = [plans[0].counts[i] for i in plans[0].drafting]
    for seed in (1, 2):
        trees = DraftTree.stack([wide_tree(24, seed + 10 * r) for r in range(len(counts))])
        kept, _ = first.keep(trees, counts)
        assert (kept.num_nodes - 1).tolist() == counts


# ------------------------------------------------------------------------------------------- memory
def test_memory_keeps_the_calibration_and_the_outlook() -> None:
    auto = controller(FLAT)
    tree = DraftTree.from_lists([1, 2, 3], [-1, 0, 1], logq=[0.0, -0.05, -0.05])
    for _ in range(50):
        auto.observe_tree(tree, torch.tensor([[0, -1, -1]]))  # never accepted
    auto.outlook = [0.5, 0.25]
    again = AutoBudget(profile(FLAT), AutoBudgetSettings(),
                       memory=ControllerMemory.from_json(auto.remember().to_json()))
    assert torch.allclose(again.estimator.estimate(tree), auto.estimator.estimate(tree))
    assert float(again.estimator.estimate(tree)[0, 1]) < 0.2 and again.outlook == [0.5, 0.25]


def test_older_memory_files_keep_their_calibration_and_drop_timings() -> None:
    old = ControllerMemory.from_json({"format": 2, "gain": 1.5, "draft_ms": 70.0, "requests": [],
                                      "calibration": {"seen": [[2.0]], "accepted": [[1.0]]}})
    assert old.calibration == {"seen": [[2.0]], "accepted": [[1.0]]} and "draft_ms" not in old.to_json()


@pytest.mark.parametrize("bad", [{"format": 4}, {"format": 3, "outlook": [1.5]}, {"format": 3, "outlook": "x"},
                                 {"format": 3, "calibration": [1, 2]}, {"format": 3, "outlook": [True]}])
def test_implausible_memory_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        ControllerMemory.from_json(bad)


def test_draft_cost_splits_fixed_and_per_row_parts() -> None:
    from specframe.cost.draft_cost import DraftCost

    cost = DraftCost()
    assert cost.split() == (0.0, 0.0)
    cost.observe(2, 12.0)
    assert cost.split() == (4.0, 4.0)  # one size seen: the prior, half of a one-row round is fixed
    for n, ms in [(1, 10.0), (3, 20.0)] * 10:
        cost.observe(n, ms)
    fixed, per_row = cost.split()
    assert fixed == pytest.approx(5.0, abs=0.6) and per_row == pytest.approx(5.0, abs=0.3)
