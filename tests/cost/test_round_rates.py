"""The measured-rate guard of `budget: auto` (`specframe.cost.round_rates`): drafting is held at a batch size
where drafted rounds committed fewer tokens per millisecond than plain rounds, with a trial after each hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from specframe.cost.round_rates import FIRST_HOLD, MIN_DRAFTED_ROWS, MIN_ROUNDS, RoundRates


def plain(rates: RoundRates, rows: int, ms: float, n: int = MIN_ROUNDS) -> None:
    for _ in range(n):
        rates.observe_plain(rows, ms)


def drafts_left(rates: RoundRates, rows: int, rounds: int) -> list[bool]:
    return [rates.allows_drafting(rows) for _ in range(rounds)]


def test_drafted_rounds_that_lose_hold_drafting_at_that_batch_size_only() -> None:
    rates = RoundRates()
    plain(rates, 4, 54.0)  # 0.074 tokens per ms
    plain(rates, 1, 59.0)
    rates.observe_drafted(4, 90.0, 5.2)  # 0.058 per ms: every row waited for it, judged at once
    assert rates.held(4) and not rates.held(1)
    for _ in range(MIN_DRAFTED_ROWS - 1):
        rates.observe_drafted(1, 75.0, 1.1)  # 0.015 per ms against 1 / 59 = 0.017
        assert not rates.held(1)  # alone: not judged before MIN_DRAFTED_ROWS drafted rounds
    assert drafts_left(rates, 4, FIRST_HOLD) == [False] * FIRST_HOLD
    assert rates.allows_drafting(4) and rates.allows_drafting(1)
    rates.observe_drafted(1, 75.0, 1.1)
    assert rates.held(1)


def test_a_losing_trial_doubles_the_hold_and_a_winning_one_ends_it() -> None:
    rates = RoundRates()
    plain(rates, 4, 54.0)
    for _ in range(MIN_ROUNDS):
        rates.observe_drafted(4, 90.0, 5.2)
    drafts_left(rates, 4, FIRST_HOLD)
    rates.observe_drafted(4, 88.0, 5.0)  # the trial loses
    assert drafts_left(rates, 4, 2 * FIRST_HOLD) == [False] * (2 * FIRST_HOLD)
    rates.observe_drafted(4, 70.0, 9.0)  # this trial wins (0.129 per ms)
    assert not rates.held(4) and rates.allows_drafting(4)
    rates.observe_drafted(4, 70.0, 9.0)
    assert not rates.held(4)


def test_drafting_that_pays_is_never_held_and_no_plain_measurement_means_no_judgement() -> None:
    rates = RoundRates()
    plain(rates, 1, 59.0)
    for _ in range(20):
        rates.observe_drafted(1, 75.0, 2.4)  # 0.032 per ms against 0.017
        rates.observe_drafted(2, 500.0, 2.0)  # no plain rounds measured at 2 rows: nothing to compare with
    assert not rates.held(1) and not rates.held(2)
    assert all(drafts_left(rates, 1, 5)) and all(drafts_left(rates, 2, 5))


def test_the_loop_asks_the_guard_before_drafting_and_feeds_it_plain_rounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Driven through a real `budget: auto` pipeline (toy target and drafter): the same requests draft when the
    guard allows and decode every round plainly, with the same tokens, when it holds; plain rounds reach it."""
    from specframe.testing.load_window import fix_machine_load
    from tests.hostile.probe import toy_pipe

    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path / "cache"))
    fix_machine_load(monkeypatch)
    plain_rows: list[int] = []
    inner = RoundRates.observe_plain
    monkeypatch.setattr(RoundRates, "observe_plain",
                        lambda self, rows, ms: (plain_rows.append(rows), inner(self, rows, ms))[1])
    prompts = ["one two three four five six", "seven eight nine ten"] * 2
    allowed = toy_pipe(tmp_path, budget="auto").generate_batch(prompts, 24, batch_size=2)
    assert any(r.drafted for res in allowed for r in res.rounds)

    monkeypatch.setattr(RoundRates, "allows_drafting", lambda self, rows: False)
    held = toy_pipe(tmp_path, budget="auto").generate_batch(prompts, 24, batch_size=2)
    assert not any(r.drafted for res in held for r in res.rounds)
    assert [r.tokens for r in held] == [r.tokens for r in allowed]  # greedy: the guard never changes the output
    assert plain_rows and set(plain_rows) <= {1, 2}


def test_rows_that_always_draft_are_judged_against_the_modelled_plain_round() -> None:
    """Rows that draft every round never decode plainly at that batch size: the cost model's plain round is the
    comparison until plain rounds are measured (without one, nothing is judged)."""
    rates = RoundRates()
    for _ in range(MIN_ROUNDS):
        rates.observe_drafted(4, 90.0, 5.2)  # 0.058 per ms; no plain round measured at 4 rows
        rates.observe_drafted(1, 90.0, 1.2, modelled_plain_ms=59.0)  # alone, only measurements judge
    assert not rates.held(4) and not rates.held(1)
    modelled = RoundRates()
    for _ in range(MIN_ROUNDS):
        modelled.observe_drafted(4, 90.0, 5.2, modelled_plain_ms=54.0)  # plain priced at 0.074 per ms
    assert modelled.held(4)
    paying = RoundRates()
    for _ in range(MIN_ROUNDS):
        paying.observe_drafted(4, 90.0, 9.0, modelled_plain_ms=54.0)  # 0.1 per ms: drafting pays
    assert not paying.held(4)
