"""Measured round rates per batch size: the guard that keeps `budget: auto` from losing to plain decoding.

The controller prices rounds with a model (the verify curve, the draft cost, the calibrated acceptance). Where the
model is wrong for a batch size (the verify curve is measured on one row, and a batch's forward over ``n`` rows of
one token each costs something else than one row of ``n`` tokens), drafted rounds can cost more than they return.
`RoundRates` keeps, per number of rows in flight, what rounds really did: the moving average of a plain round's
milliseconds, and the decayed sums (:data:`DECAY` per round) of drafted rounds' milliseconds and committed tokens
(every row's accepted drafts plus its bonus token). Alone, only rounds drafted because the controller expected them
to pay are judged: a request's probes and first drafted round are its own exploration, whose cost the probe
schedule bounds, and a chat request's losing probe must not stop a code request from drafting. In a batch every
drafted round is judged, since every row waits for its probes. A round commits 1 to ``depth + 1`` tokens a row, so
one round says little: a batch size is judged once :data:`MIN_DRAFTED_ROWS` row-rounds were drafted there (one row
after 8 drafted rounds, 4 rows after 2, 8 rows after the first). A batch of ``n`` > 1 rows first decodes
:data:`MIN_ROUNDS` rounds plainly, so drafted rounds are judged against plain decoding measured at ``n`` rows (at
most :data:`MAX_BASELINE_ROUNDS` such rounds while they are not timed exactly; until then drafted rounds are
compared with the cost model's price of a plain round): on 2 CPU cores the model priced a plain round at 4 rows at
59 ms where it took 70, and drafting there was judged by the wrong baseline. When the judged drafted rounds at
``n`` rows have committed fewer tokens per millisecond than plain rounds at ``n`` rows, nobody drafts at ``n`` rows
(probes and first rounds included) for a hold of rounds; then a trial starts: the next drafted rounds, judged
afresh once they hold :data:`MIN_DRAFTED_ROWS` row-rounds. A trial that beats plain decoding's rate ends the hold;
one that does not doubles it (16, 32, ... up to 1024 rounds), so a workload that changes is noticed again while a
losing batch size costs at most a trial's rounds in 16.

A loss measured at one batch size also holds drafting at the batch sizes not yet judged where it predicts a loss
(:meth:`RoundRates.allows_drafting`): as requests finish, a batch of 8 rows shrinks to 7, 6, ..., and each size
would otherwise pay its own losing first round. The prediction scales the measured ratio ``rho(n)`` (drafted
tokens per ms over plain tokens per ms at ``n`` rows) by the plain round's cost per row: ``rho(m) = rho(n) *
c(m) / c(n)``, ``c(k) = plain round ms at k rows / k`` (measured once :data:`MIN_ROUNDS` plain rounds ran at ``k``
rows, else the cost model's). Drafting saves rounds, so its gain grows with what a round costs each row: a
larger batch, whose rows share one forward, never gains more than a smaller one that lost, and a smaller one
gains more only by its dearer rows. A transferred hold lasts :data:`FIRST_HOLD` rounds at ``m`` and ends in a
trial there, like a hold of ``m``'s own. Only batches carry a loss to each other: alone, the guard judges one
request's chosen rounds, which says as much about that request's text as about the batch size (a request whose
drafts stopped paying near its end would hold the next batch of 2 rows, whose requests pay).

Example: at 4 rows plain rounds take 54 ms (4 / 54 = 0.074 tokens per ms); two drafted rounds take 90 ms and
commit 5.2 tokens each (0.058 per ms), so drafting is held at 4 rows for 16 rounds; then the next two drafted rounds
are a trial; if they commit 5.0 tokens in 88 ms each (0.057 per ms) the next hold is 32 rounds. At 1 row the same
drafter commits 2.4 tokens in 75 ms against plain decoding's 1 in 59 ms: no hold. At 5 rows (not yet judged;
plain rounds at 62 ms, 12.4 ms per row against 13.5 at 4 rows) the loss at 4 rows predicts
0.058 / 0.074 * 12.4 / 13.5 = 0.72: held too; at 2 rows (48 ms, 24 ms per row) it predicts 1.39: free to draft.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: Plain rounds measured at a batch size before their rate is the comparison.
MIN_ROUNDS = 3
#: Drafted row-rounds (drafted rounds times rows) measured at a batch size before the guard judges it: one row
#: after 8 drafted rounds, 4 rows after 2, a batch of 8 or more rows after its first (every row waits for it).
#: Fewer mistake the spread of a round's committed tokens (1 to depth + 1 a row) for a loss.
MIN_DRAFTED_ROWS = 8
#: Weight of a drafted round in the guard's sums one round later (about the last 10 rounds count).
DECAY = 0.9
#: Most rounds a batch size is held plain to measure plain decoding there (rounds are not always timed exactly on an
#: accelerator, so the measured count can lag the rounds).
MAX_BASELINE_ROUNDS = 2 * MIN_ROUNDS
FIRST_HOLD = 16
MAX_HOLD = 1024


@dataclass
class _Rates:
    """The measured rounds at one batch size."""

    plain_ms: float = 0.0
    plain_rounds: int = 0
    draft_ms: float = 0.0  # decayed sums of the drafted rounds' ms and committed tokens since the last hold
    draft_tokens: float = 0.0
    draft_rounds: int = 0  # drafted rounds in the sums
    hold_left: int = 0  # rounds left in which nobody drafts
    next_hold: int = FIRST_HOLD
    trial: bool = False  # the hold ended: the drafted rounds now are a trial
    ratio: float | None = None  # drafted over plain tokens per ms at the last judgement (None: never judged)
    baseline_rounds: int = 0  # rounds held plain to measure plain decoding's rate


class RoundRates:
    """What rounds with and without drafts really achieved, per batch size; see the module docstring."""

    def __init__(self, smoothing: float = 0.3) -> None:
        self.smoothing = smoothing
        self._by_rows: dict[int, _Rates] = {}

    def _at(self, rows: int) -> _Rates:
        return self._by_rows.setdefault(rows, _Rates())

    def allows_drafting(self, rows: int, *, plain_ms: Callable[[int], float] | None = None) -> bool:
        """Whether a round of ``rows`` rows may draft (called once per round that would draft). ``plain_ms(k)``:
        the cost model's plain round at ``k`` rows, with which a loss measured at another batch size holds drafting
        at ``rows`` rows while ``rows`` is not judged itself (the module docstring)."""
        r = self._at(rows)
        if rows > 1 and r.plain_rounds < MIN_ROUNDS and r.baseline_rounds < MAX_BASELINE_ROUNDS:
            r.baseline_rounds += 1  # plain decoding's rate at this batch size is measured before drafting
            return False
        if r.hold_left == 0 and r.ratio is None and not r.trial and plain_ms is not None \
                and self._predicted_loss(rows, plain_ms):
            r.hold_left = FIRST_HOLD
            r.draft_ms = r.draft_tokens = 0.0  # the trial after the hold measures afresh
            r.draft_rounds = 0
        if r.hold_left > 0:
            r.hold_left -= 1
            if r.hold_left == 0:
                r.trial = True
            return False
        return True

    def _predicted_loss(self, rows: int, plain_ms: Callable[[int], float]) -> bool:
        """Whether a losing judgement at another batch size predicts that drafting loses at ``rows`` rows."""
        if rows == 1:
            return False
        for n, other in self._by_rows.items():
            if n not in (1, rows) and other.ratio is not None and other.ratio < 1:
                here, there = self._plain_ms(rows, plain_ms) / rows, self._plain_ms(n, plain_ms) / n
                if there > 0 and other.ratio * here / there < 1:
                    return True
        return False

    def _plain_ms(self, rows: int, plain_ms: Callable[[int], float]) -> float:
        """A plain round's ms at ``rows`` rows: measured when :data:`MIN_ROUNDS` ran, else modelled."""
        r = self._by_rows.get(rows)
        return r.plain_ms if r is not None and r.plain_rounds >= MIN_ROUNDS and r.plain_ms > 0 else plain_ms(rows)

    def held(self, rows: int) -> bool:
        """Whether drafting is held at ``rows`` rows now (for reports and tests)."""
        return self._at(rows).hold_left > 0

    def observe_plain(self, rows: int, ms: float) -> None:
        r = self._at(rows)
        r.plain_ms = ms if r.plain_rounds == 0 else r.plain_ms + self.smoothing * (ms - r.plain_ms)
        r.plain_rounds += 1

    def observe_drafted(self, rows: int, ms: float, tokens: float, *, modelled_plain_ms: float | None = None) -> None:
        """A round of ``rows`` rows in which some drafted took ``ms`` and committed ``tokens`` (all rows).
        ``modelled_plain_ms``: what the cost model prices a plain round of ``rows`` rows at, the comparison in a
        batch while fewer than :data:`MIN_ROUNDS` plain rounds were measured at ``rows`` rows (rows that always
        draft would otherwise never be judged; alone, the model is what decided to draft, so only measurements
        judge it)."""
        r = self._at(rows)
        if r.plain_rounds >= MIN_ROUNDS and r.plain_ms > 0:
            plain_rate: float | None = rows / r.plain_ms
        elif rows > 1 and modelled_plain_ms is not None and modelled_plain_ms > 0:
            plain_rate = rows / modelled_plain_ms
        else:
            plain_rate = None
        r.draft_ms = DECAY * r.draft_ms + ms
        r.draft_tokens = DECAY * r.draft_tokens + tokens
        r.draft_rounds += 1
        if plain_rate is None or r.draft_rounds * rows < MIN_DRAFTED_ROWS:
            return
        r.ratio = r.draft_tokens / max(r.draft_ms, 1e-9) / plain_rate
        if r.ratio < 1:
            if r.trial:
                r.next_hold = min(2 * r.next_hold, MAX_HOLD)
            r.hold_left = r.next_hold
            r.draft_ms = r.draft_tokens = 0.0  # a trial after the hold measures afresh
            r.draft_rounds = 0
        elif r.trial:
            r.next_hold = FIRST_HOLD
        r.trial = False
