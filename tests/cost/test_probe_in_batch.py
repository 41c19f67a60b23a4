"""`budget: auto` in a batch: which rows that want to draft do (`AutoBudget.drafting_rows`).

A probe (or a request's first drafted round) makes every row of the batch wait for its draft and its larger
forward. Where even the most hopeful gain cannot reach the break-even at that batch size, it waits for a round
with fewer rows; alone it always runs; a row that drafts by choice is not stopped (the measured-rate guard judges
that choice); and while the guard holds drafting at a batch size, nobody drafts there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specframe.cost import AutoBudget, AutoBudgetSettings, ControllerMemory, CostProfile
from specframe.cost.auto_budget import RowBudget
from specframe.cost.round_rates import MIN_ROUNDS

STEEP = {1: 45.0, 5: 75.0, 9: 99.0, 17: 130.0, 33: 190.0, 65: 300.0}


def controller(best: float) -> AutoBudget:
    """A controller that remembers a draft time and one earlier request that averaged ``best`` tokens, with plain
    rounds measured at every batch size used here (a batch measures plain decoding before drafting)."""
    memory = ControllerMemory(gain=best, draft_ms=25.0, requests=[(tuple([0.5] * 64), best)])
    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings(), memory=memory)
    return measured(auto)


def measured(auto: AutoBudget) -> AutoBudget:
    for rows in (2, 4, 8):
        for _ in range(MIN_ROUNDS):
            auto.rates.observe_plain(rows, auto.plain_round_ms(rows))
    return auto


def probe() -> RowBudget:
    return RowBudget(drafting=False, probe_interval=4, plain_left=0)


def test_a_probe_that_cannot_pay_at_this_batch_size_waits_for_fewer_rows() -> None:
    auto = controller(best=1.8)
    assert auto.break_even(1) < 1.8 < auto.break_even(8)
    wanting = [0, 3, 5]
    chosen = RowBudget(drafting=True, probe_interval=4, drafted_rounds=2)  # drafts by choice
    budgets = [probe(), chosen, probe()]
    assert auto.drafting_rows(wanting, budgets, rows=8) == [3]  # the probes wait; the choice stands
    assert auto.drafting_rows(wanting, budgets, rows=2) == wanting  # 1.8 pays at 2 rows
    alone = controller(best=0.1)
    assert alone.drafting_rows([0], [probe()], rows=1) == [0]  # alone a probe always runs


def test_first_rounds_and_rows_with_their_own_gain_are_judged_by_their_best_hope() -> None:
    auto = controller(best=1.2)
    first = RowBudget(drafting=True, probe_interval=4, drafted_rounds=0, remembered=1.2)
    assert auto.drafting_rows([0], [first], rows=8) == []  # a first round is a probe too
    hopeful = RowBudget(drafting=False, probe_interval=4, gain=4.0)  # this request once drafted well
    assert auto.drafting_rows([1], [hopeful], rows=8) == [1]
    fresh = measured(AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings()))  # nothing learnt yet
    assert fresh.drafting_rows([0, 1], [probe(), probe()], rows=8) == [0, 1]
    assert fresh.drafting_rows([0], [None], rows=8) == [0]  # a row without a budget (fixed budget) drafts


def test_a_batch_measures_plain_decoding_before_it_drafts() -> None:
    """At a batch size where plain rounds were not measured, the first MIN_ROUNDS rounds are plain (at most
    MAX_BASELINE_ROUNDS while rounds are not timed exactly), so drafted rounds there are judged against plain
    decoding as it runs, not as the model prices it; alone, a request drafts from its first round."""
    from specframe.cost.round_rates import MAX_BASELINE_ROUNDS

    auto = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings())
    chosen = RowBudget(drafting=True, probe_interval=4, drafted_rounds=3)
    assert auto.drafting_rows([0], [chosen], rows=1) == [0]
    for _ in range(MIN_ROUNDS):
        assert auto.drafting_rows([0, 1], [chosen, chosen], rows=4) == []
        auto.observe_plain([chosen, chosen, chosen, chosen], {"target": 60.0})
    assert auto.drafting_rows([0, 1], [chosen, chosen], rows=4) == [0, 1]
    untimed = AutoBudget(CostProfile(key={}, verify_ms=STEEP), AutoBudgetSettings())
    held = [untimed.drafting_rows([0], [chosen], rows=4) for _ in range(MAX_BASELINE_ROUNDS + 1)]
    assert held == [[]] * MAX_BASELINE_ROUNDS + [[0]]  # rounds without exact times: the baseline waits no longer


def test_nobody_drafts_where_the_guard_holds_drafting() -> None:
    auto = controller(best=9.0)
    for _ in range(MIN_ROUNDS):
        auto.rates.observe_plain(4, 50.0)
    for _ in range(MIN_ROUNDS):
        auto.rates.observe_drafted(4, 120.0, 5.0)  # 0.042 tokens per ms against 0.08 plain
    chosen = RowBudget(drafting=True, probe_interval=4, drafted_rounds=3)
    assert auto.drafting_rows([0, 1], [chosen, chosen], rows=4) == []
    assert auto.drafting_rows([0], [chosen], rows=2) == [0]


def test_the_loop_judges_every_drafted_round_of_a_batch_and_alone_only_the_chosen_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a real `budget: auto` pipeline (toy target and drafter): alone, a request's probes and first drafted
    round reach the controller without the committed tokens the guard judges by; in a batch of two every drafted
    round carries them, probes included (both rows wait for a probe). Every round gives the tokens it really
    committed, for the rate drafting achieves."""
    from specframe.testing.load_window import fix_machine_load
    from tests.hostile.probe import toy_pipe

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    fix_machine_load(monkeypatch)
    seen: list[tuple[int, bool, bool, int | None]] = []  # rows, a probe among them, judged, committed
    inner = AutoBudget.observe_drafted

    def spy(self: AutoBudget, drafted: list[RowBudget], plain: list[RowBudget], *args: Any, **kwargs: Any) -> None:
        probe = any(not b.drafting or b.drafted_rounds == 0 for b in drafted)
        seen.append((len(drafted) + len(plain), probe, kwargs.get("judged", True), kwargs.get("committed")))
        inner(self, drafted, plain, *args, **kwargs)

    monkeypatch.setattr(AutoBudget, "observe_drafted", spy)
    monkeypatch.setattr(AutoBudget, "break_even", lambda self, rows: 1.0)  # every row keeps drafting after its first
    prompts = ["one two three four five six", "seven eight nine ten"] * 2
    toy_pipe(tmp_path, budget="auto").generate_batch(prompts, 16, batch_size=1)
    alone = list(seen)
    seen.clear()
    toy_pipe(tmp_path, budget="auto").generate_batch(prompts, 16, batch_size=2)
    assert any(probe for _, probe, _, _ in alone) and any(not probe for _, probe, _, _ in alone)
    assert all(judged != probe for _, probe, judged, _ in alone)
    pairs = [(probe, judged) for rows, probe, judged, _ in seen if rows == 2]
    assert any(probe for probe, _ in pairs) and all(judged for _, judged in pairs)
    assert all(committed is not None and committed >= rows for rows, _, _, committed in alone + seen)


def test_the_best_remembered_gain_is_the_hope_only_of_rows_that_know_nothing_of_their_own() -> None:
    """A first round whose own prediction (its most alike earlier requests) cannot pay at 8 rows waits, however well
    another remembered request did; a row with no prediction at all hopes for the best."""
    auto = controller(best=4.0)
    assert auto.break_even(1) < 1.6 < auto.break_even(8) < 4.0
    predicted = RowBudget(drafting=True, probe_interval=4, drafted_rounds=0, remembered=1.6)
    unknown = RowBudget(drafting=True, probe_interval=4, drafted_rounds=0)
    assert auto.drafting_rows([0, 1], [predicted, unknown], rows=8) == [1]
    assert auto.drafting_rows([0], [predicted], rows=1) == [0]


def test_each_request_explores_on_its_own_first_drafted_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`choose(explore=True)` (verify at least one node, so the round teaches the estimator) is asked for on the first
    drafted round of every request, not only the first of the call: requests decoded one after another in one call,
    and requests joining a batch as others leave, each explore once they draft; rounds of rows that already drafted
    by choice do not."""
    from specframe.testing.frozen_budget import without_batch_policy
    from specframe.testing.load_window import fix_machine_load
    from tests.hostile.probe import toy_pipe

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    fix_machine_load(monkeypatch)
    monkeypatch.setattr(AutoBudget, "break_even", lambda self, rows: 1.0)  # rows keep drafting after their first
    without_batch_policy(monkeypatch)  # the toy's timings aside, every row that wants to draft does
    explored: list[bool] = []
    firsts: list[int] = []  # rows whose first drafted round this is, per choice
    inner_choose, inner_drafting = AutoBudget.choose, AutoBudget.drafting_rows
    pending: list[int] = []

    def drafting_rows(self: AutoBudget, wanting: list[int], budgets: Any, rows: int) -> list[int]:
        chosen = inner_drafting(self, wanting, budgets, rows)
        pending[:] = [sum(1 for i, b in zip(wanting, budgets, strict=True)
                          if i in chosen and b is not None and b.drafted_rounds == 0)]
        return chosen

    def choose(self: AutoBudget, tree: Any, rows: int, *, explore: bool = False) -> Any:
        explored.append(explore)
        firsts.append(pending[0])
        return inner_choose(self, tree, rows, explore=explore)

    monkeypatch.setattr(AutoBudget, "drafting_rows", drafting_rows)
    monkeypatch.setattr(AutoBudget, "choose", choose)
    prompts = ["one two three four five six", "seven eight nine ten", "eleven twelve", "three two one"]
    toy_pipe(tmp_path, budget="auto").generate_batch(prompts, 12, batch_size=1)
    assert sum(firsts) == len(prompts)  # every request reached a first drafted round
    assert explored == [n > 0 for n in firsts]
    explored.clear()
    firsts.clear()
    toy_pipe(tmp_path, budget="auto").generate_batch(prompts, 12, batch_size=2)
    assert sum(firsts) == len(prompts) and explored == [n > 0 for n in firsts]
