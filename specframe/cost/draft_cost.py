"""`DraftCost`: what drafting costs a round, split into a fixed part and a part per drafting row, learnt online.

`budget: auto` decides per row whether to draft. In a batch the question is marginal: what does *this* row cost if
it drafts, given the others? Its share of the drafter's forward (the drafter runs once for all drafting rows, so a
round pays a fixed part once and a part per row), plus the verify tokens its tree adds to the target's forward.
:class:`DraftCost` fits the drafted rounds' draft + build + prune time as ``fixed + per_row * n`` (``n`` drafting
rows) by decayed least squares, and keeps moving averages of the nodes a drafting row verifies and of how many rows
draft together.

Identification needs rounds with different ``n``; until then (and whenever the fit is degenerate or negative) the
split falls back to the prior that half a one-row round's cost is fixed, which is what the draft backbone measures
on these CPUs (a one-row and a two-row draft forward of SmolLM2's drafter differ by about their half).

Example: rounds of 1 row at 10 ms and 3 rows at 20 ms give ``fixed = 5``, ``per_row = 5``; a row joining 2 others
costs ``5 + 5 / 3`` ms of drafting.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DraftCost:
    """See the module docstring. ``decay`` weighs older rounds down (per observation)."""

    decay: float = 0.95
    _w: float = 0.0  # decayed sums of the least-squares fit ms = a + b n
    _wn: float = 0.0
    _wnn: float = 0.0
    _wy: float = 0.0
    _wny: float = 0.0
    kept: float | None = None  # moving average of nodes a drafting row verifies
    together: float | None = None  # moving average of rows drafting in one round

    def observe(self, rows: int, ms: float, kept: float) -> None:
        """A drafted round: ``rows`` rows drafted, their draft + build + prune took ``ms``, each verified ``kept``
        nodes on average."""
        d = self.decay
        self._w, self._wn, self._wnn = d * self._w + 1, d * self._wn + rows, d * self._wnn + rows * rows
        self._wy, self._wny = d * self._wy + ms, d * self._wny + rows * ms
        self.kept = kept if self.kept is None else self.kept + (1 - d) * 4 * (kept - self.kept)
        self.together = rows if self.together is None else self.together + (1 - d) * 4 * (rows - self.together)

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

    def marginal_ms(self) -> float:
        """Drafting cost of one more drafting row: its own part plus its share of the fixed part among the rows
        that usually draft together."""
        fixed, per_row = self.split()
        return per_row + fixed / max(self.together or 1.0, 1.0)
