"""`DraftCost`: what drafting costs a round, a fixed part plus a part per drafting row, learnt online.

`budget: auto` decides per row whether to draft. The drafter runs once for all drafting rows, so a round pays a
fixed part ``a`` once and a part ``b`` per drafting row; a row that drafts is charged ``b + a / R`` (``R`` drafting
rows share ``a``). :class:`DraftCost` fits the drafted rounds' draft + build + prune time as ``a + b R`` by decayed
least squares (weight :data:`DRAFT_COST_DECAY` per round).

Identification needs rounds with different ``R``; until then (and whenever the fit is degenerate or negative) the
split falls back to the prior that half a one-row round's cost is fixed, which is what the draft backbone measures
on these CPUs (a one-row and a two-row draft forward of SmolLM2's drafter differ by about their half). Before any
drafted round both parts are 0: the first drafted round is how the controller learns them.

Example: rounds of 1 row at 10 ms and 3 rows at 20 ms give ``a = 5``, ``b = 5``; a row joining 2 others costs
``5 + 5 / 3`` ms of drafting.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Weight of a drafted round in the fit one round later (decision constant; about the last 20 rounds count).
DRAFT_COST_DECAY = 0.95


@dataclass
class DraftCost:
    """See the module docstring. ``frozen``: observations change nothing."""

    decay: float = DRAFT_COST_DECAY
    frozen: bool = False
    _w: float = 0.0  # decayed sums of the least-squares fit ms = a + b n
    _wn: float = 0.0
    _wnn: float = 0.0
    _wy: float = 0.0
    _wny: float = 0.0

    def observe(self, rows: int, ms: float) -> None:
        """A drafted round: ``rows`` rows drafted and their draft + build + prune took ``ms``."""
        if self.frozen or rows < 1 or not ms >= 0:
            return
        d = self.decay
        self._w, self._wn, self._wnn = d * self._w + 1, d * self._wn + rows, d * self._wnn + rows * rows
        self._wy, self._wny = d * self._wy + ms, d * self._wny + rows * ms

    @property
    def observed(self) -> bool:
        return self._w > 0

    def split(self) -> tuple[float, float]:
        """``(fixed, per_row)`` milliseconds."""
        if not self.observed:
            return 0.0, 0.0
        mean_n, mean_y = self._wn / self._w, self._wy / self._w
        var = self._wnn / self._w - mean_n * mean_n
        if var > 1e-6:
            per_row = (self._wny / self._w - mean_n * mean_y) / var
            fixed = mean_y - per_row * mean_n
            if fixed >= 0 and per_row >= 0:
                return fixed, per_row
        per_row = mean_y / (mean_n + 1)  # the prior: a one-row round is half fixed
        return per_row, per_row

    def round_ms(self, rows: int) -> float:
        """The draft + build + prune milliseconds of a round in which ``rows`` rows draft (0 for none)."""
        fixed, per_row = self.split()
        return 0.0 if rows <= 0 else fixed + per_row * rows
