"""The measured-rate guard of `budget: auto` (`specframe.cost.round_rates`): drafting is held at a batch size
where drafted rounds committed fewer tokens per millisecond than plain rounds, with a trial after each hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from specframe.cost.round_rates import FIRST_HOLD, MAX_BASELINE_ROUNDS, MIN_DRAFTED_ROWS, MIN_ROUNDS, RoundRates


def plain(rates: RoundRates, rows: int, ms: float, n: int = MIN_ROUNDS) -> None:
    for _ in range(n):
        rates.observe_plain(rows, ms)


def drafts_left(rates: RoundRates, rows: int, rounds: int) -> list[bool]:
    return [rates.allows_drafting(rows) for _ in range(rounds)]


def drafted(rates: RoundRates, rows: int, ms: float, tokens: float, *, modelled: float | None = None) -> None:
    """Enough drafted rounds at ``rows`` rows for one judgement (:data:`MIN_DRAFTED_ROWS` row-rounds)."""
    for _ in range(-(-MIN_DRAFTED_ROWS // rows)):
        rates.observe_drafted(rows, ms, tokens, modelled_plain_ms=modelled)


def test_drafted_rounds_that_lose_hold_drafting_at_that_batch_size_only() -> None:
    rates = RoundRates()
    plain(rates, 4, 54.0)  # 0.074 tokens per ms
    plain(rates, 1, 59.0)
    rates.observe_drafted(4, 90.0, 5.2)  # 0.058 per ms
    assert not rates.held(4)  # one round of 4 rows says little
    rates.observe_drafted(4, 90.0, 5.2)  # 8 row-rounds: judged
    assert rates.held(4) and not rates.held(1)
    for _ in range(MIN_DRAFTED_ROWS - 1):
        rates.observe_drafted(1, 75.0, 1.1)  # 0.015 per ms against 1 / 59 = 0.017
        assert not rates.held(1)  # alone: not judged before MIN_DRAFTED_ROWS drafted rounds
    assert drafts_left(rates, 4, FIRST_HOLD) == [False] * FIRST_HOLD
    assert rates.allows_drafting(4) and rates.allows_drafting(1)
    rates.observe_drafted(1, 75.0, 1.1)
    assert rates.held(1)


def test_one_unlucky_round_among_paying_ones_does_not_hold_drafting() -> None:
    """Alone, a round commits 1 to depth + 1 tokens: a round that commits its bonus token only, among rounds that
    pay, leaves the guard's sums above plain decoding's rate (a moving average of the last three would not)."""
    rates = RoundRates()
    plain(rates, 1, 50.0)  # 0.02 tokens per ms
    for tokens in [3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 1.0, 1.0, 2.0, 3.0]:
        rates.observe_drafted(1, 70.0, tokens)  # 2.0 tokens in 70 ms = 0.029 per ms on average
        assert not rates.held(1)


def test_a_losing_trial_doubles_the_hold_and_a_winning_one_ends_it() -> None:
    rates = RoundRates()
    plain(rates, 4, 54.0)
    drafted(rates, 4, 90.0, 5.2)
    assert drafts_left(rates, 4, FIRST_HOLD) == [False] * FIRST_HOLD
    rates.observe_drafted(4, 88.0, 5.0)  # the trial's first round
    assert not rates.held(4) and rates.allows_drafting(4)
    rates.observe_drafted(4, 88.0, 5.0)  # its second: the trial loses
    assert drafts_left(rates, 4, 2 * FIRST_HOLD) == [False] * (2 * FIRST_HOLD)
    drafted(rates, 4, 70.0, 9.0)  # this trial wins (0.129 per ms)
    assert not rates.held(4) and rates.allows_drafting(4)
    losing = 0
    while not rates.held(4):  # losing rounds after the win: held once they outweigh it, for the first hold
        rates.observe_drafted(4, 88.0, 5.0)
        losing += 1
    assert 2 <= losing <= 20
    assert drafts_left(rates, 4, FIRST_HOLD) == [False] * FIRST_HOLD


def test_drafting_that_pays_is_never_held_and_no_plain_measurement_means_no_judgement() -> None:
    rates = RoundRates()
    plain(rates, 1, 59.0)
    for _ in range(20):
        rates.observe_drafted(1, 75.0, 2.4)  # 0.032 per ms against 0.017
        rates.observe_drafted(2, 500.0, 2.0)  # no plain rounds measured at 2 rows: nothing to compare with
    assert not rates.held(1) and not rates.held(2)
    assert all(drafts_left(rates, 1, 5))
    assert drafts_left(rates, 2, MAX_BASELINE_ROUNDS + 5)[-5:] == [True] * 5  # after its plain baseline


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

    monkeypatch.setattr(RoundRates, "allows_drafting", lambda self, rows, **_: False)
    held = toy_pipe(tmp_path, budget="auto").generate_batch(prompts, 24, batch_size=2)
    assert not any(r.drafted for res in held for r in res.rounds)
    assert [r.tokens for r in held] == [r.tokens for r in allowed]  # greedy: the guard never changes the output
    assert plain_rows and set(plain_rows) <= {1, 2}


def test_rows_that_always_draft_are_judged_against_the_modelled_plain_round() -> None:
    """Rows that draft every round never decode plainly at that batch size: the cost model's plain round is the
    comparison until plain rounds are measured (without one, nothing is judged)."""
    rates = RoundRates()
    for _ in range(MIN_DRAFTED_ROWS):
        rates.observe_drafted(4, 90.0, 5.2)  # 0.058 per ms; no plain round measured at 4 rows
        rates.observe_drafted(1, 90.0, 1.2, modelled_plain_ms=59.0)  # alone, only measurements judge
    assert not rates.held(4) and not rates.held(1)
    modelled = RoundRates()
    drafted(modelled, 4, 90.0, 5.2, modelled=54.0)  # plain priced at 0.074 per ms
    assert modelled.held(4)
    paying = RoundRates()
    drafted(paying, 4, 90.0, 9.0, modelled=54.0)  # 0.1 per ms: drafting pays
    assert not paying.held(4)


def test_a_loss_holds_the_batch_sizes_not_yet_judged_where_it_predicts_one() -> None:
    """Worked example of the module docstring: a loss at 4 rows (rho = 0.78) holds 5 rows, whose rows cost less
    each, and 3 rows only while their dearer rows cannot make up for it; 2 rows and sizes judged themselves are
    free. A transferred hold ends in a trial at its own size."""
    modelled = {1: 45.0, 2: 48.0, 3: 51.0, 4: 54.0, 5: 62.0, 6: 70.0}.__getitem__
    rates = RoundRates()
    for rows in (2, 3, 5, 6):
        plain(rates, rows, modelled(rows))  # each batch size measures plain decoding first
    plain(rates, 4, 54.0)
    drafted(rates, 4, 90.0, 5.2)  # 0.058 tokens per ms against 0.074
    assert rates.held(4)
    assert not rates.allows_drafting(5, plain_ms=modelled)  # 0.78 * 12.4 / 13.5 = 0.72
    assert rates.held(5)
    assert not rates.allows_drafting(3, plain_ms=modelled)  # 0.78 * 17 / 13.5 = 0.98
    assert rates.allows_drafting(2, plain_ms=modelled)  # 0.78 * 24 / 13.5 = 1.39
    assert rates.allows_drafting(6)  # without the model's prices nothing is predicted
    judged = RoundRates()
    plain(judged, 4, 54.0)
    plain(judged, 5, 62.0)
    drafted(judged, 5, 70.0, 9.0, modelled=62.0)  # 5 rows measured a gain of their own
    drafted(judged, 4, 90.0, 5.2)
    assert judged.allows_drafting(5, plain_ms=modelled)
    assert drafts_left(rates, 5, FIRST_HOLD - 1) == [False] * (FIRST_HOLD - 1)
    assert rates.allows_drafting(5, plain_ms=modelled)  # the trial at 5 rows
    drafted(rates, 5, 60.0, 7.0, modelled=62.0)  # it wins: 5 rows are judged free
    assert all(drafts_left(rates, 5, 3))


def test_a_loss_alone_is_a_requests_and_holds_no_batch() -> None:
    """Alone the guard judges one request's chosen rounds: their loss holds 1 row only, not a batch of 2 whose
    requests may pay (nor does a batch's loss hold a request alone)."""
    modelled = {1: 45.0, 2: 48.0, 3: 51.0, 4: 54.0}.__getitem__
    rates = RoundRates()
    plain(rates, 1, 45.0)
    for _ in range(MIN_DRAFTED_ROWS):
        rates.observe_drafted(1, 75.0, 1.1)  # 0.015 per ms against 0.022
    assert rates.held(1)
    plain(rates, 2, 48.0)
    assert rates.allows_drafting(2, plain_ms=modelled)
    batch = RoundRates()
    plain(batch, 2, 48.0)
    drafted(batch, 2, 200.0, 2.2)  # far below plain decoding's rate
    assert batch.held(2) and batch.allows_drafting(1, plain_ms=modelled)
