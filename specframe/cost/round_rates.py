"""Measured round rates per batch size: the guard that keeps `budget: auto` from losing to plain decoding.

The controller prices rounds with a model (the verify curve, the draft cost, the calibrated acceptance). Where the
model is wrong for a batch size (the verify curve is measured on one row, and a batch's forward over ``n`` rows of
one token each costs something else than one row of ``n`` tokens), drafted rounds can cost more than they return.
`RoundRates` keeps, per number of rows in flight, what rounds really did: the moving average of a plain round's
milliseconds, and of a drafted round's milliseconds and committed tokens (every row's accepted drafts plus its
bonus token). Alone, only rounds drafted because the controller expected them to pay are judged: a request's probes
and first drafted round are its own exploration, whose cost the probe schedule bounds, and a chat request's losing
probe must not stop a code request from drafting. In a batch every drafted round is judged, since every row waits
for its probes, and a round of 3 or more rows is judged from the first (one row after 3 drafted rounds, 2 rows
after 2: :data:`MIN_DRAFTED_ROWS`). Until plain rounds were measured at ``n`` > 1 rows (rows that always draft
never decode plainly), drafted rounds are compared with the cost model's price of a plain round. When the judged
drafted rounds at ``n`` rows have committed fewer tokens per millisecond than plain rounds at ``n`` rows, nobody
drafts at ``n`` rows (probes and first rounds included) for a hold of rounds; then the next chosen drafted round is
a trial. A trial that beats plain decoding's rate ends the hold; one that does not doubles it (16, 32, ... up to
1024 rounds), so a workload that changes is noticed again while a losing batch size costs at most one chosen
drafted round in 16.

Example: at 4 rows plain rounds take 54 ms (4 / 54 = 0.074 tokens per ms); drafted rounds take 90 ms and commit
5.2 tokens (0.058 per ms), so drafting is held at 4 rows for 16 rounds; the 17th may draft; if it commits 5.0
tokens in 88 ms (0.057 per ms) the next hold is 32 rounds. At 1 row the same drafter commits 2.4 tokens in 75 ms
against plain decoding's 1 in 59 ms: no hold.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Plain rounds measured at a batch size before their rate is the comparison.
MIN_ROUNDS = 3
#: Drafted row-rounds (drafted rounds times rows) measured at a batch size before the guard judges it: one row
#: after 3 drafted rounds, 2 rows after 2, a batch of 3 or more rows after its first (every row waits for it).
MIN_DRAFTED_ROWS = 3
FIRST_HOLD = 16
MAX_HOLD = 1024


@dataclass
class _Rates:
    """The measured rounds at one batch size."""

    plain_ms: float = 0.0
    plain_rounds: int = 0
    draft_ms: float = 0.0
    draft_tokens: float = 0.0
    draft_rounds: int = 0
    hold_left: int = 0  # rounds left in which nobody drafts
    next_hold: int = FIRST_HOLD
    trial: bool = False  # the hold ended: the next drafted round is a trial


class RoundRates:
    """What rounds with and without drafts really achieved, per batch size; see the module docstring."""

    def __init__(self, smoothing: float = 0.3) -> None:
        self.smoothing = smoothing
        self._by_rows: dict[int, _Rates] = {}

    def _at(self, rows: int) -> _Rates:
        return self._by_rows.setdefault(rows, _Rates())

    def allows_drafting(self, rows: int) -> bool:
        """Whether a round of ``rows`` rows may draft (called once per round that would draft)."""
        r = self._at(rows)
        if r.hold_left > 0:
            r.hold_left -= 1
            if r.hold_left == 0:
                r.trial = True
            return False
        return True

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
        if r.trial:  # the round after a hold decides alone: the averages are of the time before it
            r.trial = False
            r.draft_ms, r.draft_tokens, r.draft_rounds = ms, tokens, 1
            if plain_rate is not None and tokens / max(ms, 1e-9) < plain_rate:
                r.next_hold = min(2 * r.next_hold, MAX_HOLD)
                r.hold_left = r.next_hold
            else:
                r.next_hold = FIRST_HOLD
            return
        w = self.smoothing
        if r.draft_rounds == 0:
            r.draft_ms, r.draft_tokens = ms, tokens
        else:
            r.draft_ms += w * (ms - r.draft_ms)
            r.draft_tokens += w * (tokens - r.draft_tokens)
        r.draft_rounds += 1
        if (plain_rate is not None and r.draft_rounds * rows >= MIN_DRAFTED_ROWS
                and r.draft_tokens / max(r.draft_ms, 1e-9) < plain_rate):
            r.hold_left = r.next_hold
