"""`CostProfile`: the one cost model of `budget: auto`, ``C(B, n)``, measured, cached and kept current online.

The decode loop's cost has two parts:

* the **forward cost** ``C(B, n)``: wall time of one target forward over ``B`` rows carrying ``n`` new tokens in
  all, on top of the rows' caches. A plain round is the point ``(B, B)``; a round in which every row verifies
  ``k`` nodes is ``(B, B (k + 1))``. Stored per measured batch size as points over ``n`` (``verify_ms`` is the
  one-row curve ``C(1, n)``, ``batch_ms[B]`` the others), interpolated piecewise-linearly in ``n`` (extrapolated
  along the last segment) and, between measured batch sizes, linearly in ``B`` at equal tokens per row. A
  profile without batch curves (format 1) prices ``C(B, n)`` as ``C(1, n)``, one row carrying every token. On a
  CPU the cost is steep in ``n``; on a GPU it is flat until the device saturates;
* the **overheads** per round outside the target forward: ``draft``, ``build``, ``prune``, ``verify`` and
  ``commit`` in milliseconds, and ``plain`` (verify + commit of a root-only round).

Both are exponential moving averages updated from every round the loop times (:meth:`CostProfile.observe`), so a
profile measured elsewhere converges to the truth of this run; a forward at a batch size without a curve starts
one, seeded from the interpolation. :attr:`CostProfile.frozen` stops all learning (tests that need the same
decisions on every machine).

A profile read from a file or about to be cached is untrusted until :meth:`CostProfile.problem` finds nothing:
at least :data:`MIN_POINTS` verify points, token counts from 1 to :data:`MAX_PROFILE_TOKENS`, verify times
from :data:`MIN_FORWARD_MS` to :data:`MAX_STAGE_MS` (a forward takes some time, and not hours), overheads
from 0 to :data:`MAX_STAGE_MS`, and a curve that is monotone enough to decide with (no point below
:data:`MONOTONE_SLACK` times the time of a smaller forward). :meth:`CostProfile.covers` says which of two
profiles of one key is kept in the cache.

Example::

    >>> p = CostProfile(key={}, verify_ms={1: 50.0, 9: 120.0, 17: 130.0}, batch_ms={4: {4: 60.0, 36: 200.0}})
    >>> p.cost(1, 5)        # halfway between 1 and 9 -> 85.0
    >>> p.cost(4, 4)        # a plain round of 4 rows -> 60.0
    >>> p.cost(2, 2)        # halfway between C(1, 1) = 50 and C(4, 4) = 60 at one token a row -> 53.3
    >>> p.observe(4, 36, 180.0)   # the point (4, 36) moves towards 180 ms
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from typing import Any

#: Points of the verify curve measured by `specframe profile` (tokens per forward: root + nodes).
DEFAULT_GRID: tuple[int, ...] = (1, 2, 3, 5, 9, 17, 33, 65)

#: Per-round overheads besides the target forward, in the loop's stage names; ``loop`` is the round's time outside
#: every timed stage (the loop's own bookkeeping, measured by `specframe profile`; read by the simulator).
OVERHEADS: tuple[str, ...] = ("draft", "build", "prune", "verify", "commit", "plain", "loop")

PROFILE_FORMAT = 2
#: Formats this version reads: 1 has the one-row curve only (``C(B, n)`` is then priced as ``C(1, n)``; run
#: `specframe profile` again to measure batches).
READABLE_FORMATS = (1, 2)
#: Batch sizes and verified nodes per row `specframe profile` measures ``C(B, B (k + 1))`` at.
PROFILE_BATCHES: tuple[int, ...] = (1, 2, 4, 8)
PROFILE_NODES: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64)

#: Fewest verify points a usable curve has (one point has no slope: every size would cost the same).
MIN_POINTS = 2
#: Most tokens one forward can verify: a batch of 4096 rows of 4096 draft nodes plus their roots.
MAX_PROFILE_TOKENS = 4096 * 4097
#: Shortest plausible target forward in milliseconds (a microsecond; real ones take 0.1 ms and more).
MIN_FORWARD_MS = 1e-3
#: Longest plausible stage or forward in milliseconds (ten minutes).
MAX_STAGE_MS = 600_000.0
#: A bigger forward measured below this share of a smaller one's time is noise or a broken measurement.
MONOTONE_SLACK = 0.5
#: Most rows of a measured batch (the command line's `--batch-size` limit).
MAX_PROFILE_BATCH = 4096


def _interpolate(curve: dict[int, float], grid: list[int], tokens: float) -> float:
    """Piecewise-linear ``curve`` (points ``grid``, sorted) at ``tokens``, extrapolated along the end segments."""
    if len(grid) == 1:
        return curve[grid[0]]
    i = bisect.bisect_left(grid, tokens)
    if i < len(grid) and grid[i] == tokens:
        return curve[grid[i]]
    lo, hi = (0, 1) if i == 0 else (len(grid) - 2, len(grid) - 1) if i == len(grid) else (i - 1, i)
    x0, x1 = grid[lo], grid[hi]
    y0, y1 = curve[x0], curve[x1]
    return max(0.0, y0 + (y1 - y0) * (tokens - x0) / (x1 - x0))


@dataclass
class CostProfile:
    """Measured round costs on one device; see the module docstring.

    Attributes:
        key: what the numbers are valid for (target, device, dtype, threads, library versions).
        verify_ms: tokens per forward -> milliseconds of a one-row target forward, ``C(1, n)``.
        overhead_ms: stage -> milliseconds per round outside the target forward.
        batch_ms: batch size ``B`` (2 and more) -> tokens in all ``n`` -> milliseconds, ``C(B, n)``.
        smoothing: weight of a new observation in the moving averages.
        frozen: no observation changes anything (decisions come from the numbers as given).
    """

    key: dict[str, Any]
    verify_ms: dict[int, float]
    overhead_ms: dict[str, float] = field(default_factory=dict)
    batch_ms: dict[int, dict[int, float]] = field(default_factory=dict)
    smoothing: float = 0.2
    frozen: bool = False

    def __post_init__(self) -> None:
        if not self.verify_ms:
            raise ValueError("a cost profile needs at least one verify point")
        self.verify_ms = {int(n): float(ms) for n, ms in sorted(self.verify_ms.items())}
        self.batch_ms = {int(b): {int(n): float(ms) for n, ms in sorted(c.items())}
                         for b, c in sorted(self.batch_ms.items()) if int(b) != 1 and c}
        self._reindex()

    def _reindex(self) -> None:
        self._curves: dict[int, dict[int, float]] = {1: self.verify_ms, **self.batch_ms}
        self._grids = {b: sorted(c) for b, c in self._curves.items()}
        self._batches = sorted(self._curves)

    # ------------------------------------------------------------------------------------------ queries
    @property
    def batches(self) -> list[int]:
        """The batch sizes with a curve of their own (1 always)."""
        return list(self._batches)

    def cost(self, batch: int, tokens: float) -> float:
        """``C(B, n)``: milliseconds of one target forward over ``batch`` rows carrying ``tokens`` tokens in all."""
        if batch in self._curves:
            return _interpolate(self._curves[batch], self._grids[batch], tokens)
        sizes = self._batches
        if len(sizes) == 1:
            return _interpolate(self.verify_ms, self._grids[1], tokens)  # format 1: one row carrying them all
        per_row = tokens / max(batch, 1)
        i = bisect.bisect_left(sizes, batch)
        lo, hi = (sizes[-2], sizes[-1]) if i == len(sizes) else (sizes[i - 1], sizes[i])
        y0 = _interpolate(self._curves[lo], self._grids[lo], per_row * lo)
        y1 = _interpolate(self._curves[hi], self._grids[hi], per_row * hi)
        return max(0.0, y0 + (y1 - y0) * (batch - lo) / (hi - lo))

    def plain_ms(self, batch: int) -> float:
        """A plain round of ``batch`` rows: ``C(B, B)`` plus its other stages."""
        return self.cost(batch, batch) + self.overhead("plain")

    def plain_rate(self, batch: int) -> float:
        """``lambda_B``: tokens per millisecond of plain decoding at ``batch`` rows."""
        return batch / max(self.plain_ms(batch), 1e-6)

    def verify_cost(self, tokens: int) -> float:
        """Milliseconds of one one-row target forward over ``tokens`` new tokens, ``C(1, n)``."""
        return self.cost(1, tokens)

    def verify_costs(self, max_tokens: int) -> list[float]:
        """``[C(1, 1), ..., C(1, max_tokens)]``, made non-decreasing (a bigger forward never costs less)."""
        out, running = [], 0.0
        for n in range(1, max_tokens + 1):
            running = max(running, self.verify_cost(n))
            out.append(running)
        return out

    def overhead(self, stage: str) -> float:
        return self.overhead_ms.get(stage, 0.0)

    # ------------------------------------------------------------------------------------ plausibility
    def problem(self) -> str | None:
        """Why this profile cannot be trusted to decide with (see the module docstring); None when it can."""
        if len(self.verify_ms) < MIN_POINTS:
            return (f"its verify curve has {len(self.verify_ms)} point(s); at least {MIN_POINTS} are needed "
                    "to tell a small forward from a large one")
        for batch, curve in self._curves.items():
            name = "verify_ms" if batch == 1 else f"batch_ms[{batch}]"
            if not 1 <= batch <= MAX_PROFILE_BATCH:
                return f"batch_ms has a batch of {batch} rows; batches have 1 to {MAX_PROFILE_BATCH} rows"
            slowest, slowest_at = 0.0, 0
            for n, ms in curve.items():
                if not batch <= n <= MAX_PROFILE_TOKENS:
                    return (f"{name} has a point at {n} tokens; a forward over {batch} row(s) carries {batch} to "
                            f"{MAX_PROFILE_TOKENS} tokens")
                if not MIN_FORWARD_MS <= ms <= MAX_STAGE_MS:
                    return (f"{name}[{n}] = {ms!r} ms is not a plausible forward time ({MIN_FORWARD_MS} to "
                            f"{MAX_STAGE_MS:.0f} ms)")
                if ms < MONOTONE_SLACK * slowest:
                    return (f"{name}[{n}] = {ms:g} ms is less than half of {name}[{slowest_at}] = {slowest:g} ms; "
                            "a forward over more tokens does not cost less")
                if ms > slowest:
                    slowest, slowest_at = ms, n
        for stage, ms in self.overhead_ms.items():
            if stage not in OVERHEADS:
                return f"overhead_ms has an unknown stage {stage!r} (known: {', '.join(OVERHEADS)})"
            if not 0 <= ms <= MAX_STAGE_MS:
                return f"overhead_ms[{stage!r}] = {ms!r} ms is not a plausible stage time (0 to {MAX_STAGE_MS:.0f} ms)"
        return None

    def covers(self, other: CostProfile) -> bool:
        """Whether this profile measures at least what ``other`` does: every batch size ``other`` has a curve for,
        each reaching at least as many tokens with at least as many points. A cached profile is only replaced by
        one that covers it."""
        for batch, curve in other._curves.items():
            mine = self._curves.get(batch)
            if mine is None or max(mine) < max(curve) or len(mine) < len(curve):
                return False
        return True

    def coverage(self) -> str:
        """``"8 points up to 65 tokens at 1 row; batches 2, 4"``, for notices."""
        text = f"{len(self.verify_ms)} point(s) up to {max(self.verify_ms)} tokens at 1 row"
        return text + (f"; batches {', '.join(map(str, self.batch_ms))}" if self.batch_ms else "")

    # ------------------------------------------------------------------------------------- online update
    def observe(self, batch: int, tokens: int, ms: float) -> None:
        """Move ``C(batch, .)`` towards one timed forward of ``batch`` rows carrying ``tokens`` tokens.

        The observation updates the two points around ``tokens``, each weighted by its closeness (a point exactly
        on the grid updates only that point); a forward beyond the curve's last point becomes a point of its own
        (extrapolating is wrong where the device saturates). A batch size without a curve gets one, seeded from
        the interpolation at the token counts of the nearest measured batch size scaled to it.
        """
        if self.frozen or not math.isfinite(ms) or ms < 0 or batch < 1 or tokens < batch:
            return
        if batch not in self._curves:
            self._seed(batch)
        curve, grid = self._curves[batch], self._grids[batch]
        if tokens > grid[-1]:
            curve[int(tokens)] = float(ms)
            self._reindex()
            return
        i = bisect.bisect_left(grid, tokens)
        if grid[i] == tokens:
            weights = {tokens: 1.0}
        elif i == 0:
            weights = {grid[0]: 0.5}
        else:
            lo, hi = grid[i - 1], grid[i]
            w_hi = (tokens - lo) / (hi - lo)
            weights = {lo: 1.0 - w_hi, hi: w_hi}
        error = ms - self.cost(batch, tokens)
        for point, w in weights.items():
            curve[point] = max(0.0, curve[point] + self.smoothing * w * error)

    def observe_verify(self, tokens: int, ms: float) -> None:
        """One timed one-row forward (:meth:`observe` at ``batch = 1``)."""
        self.observe(1, tokens, ms)

    def _seed(self, batch: int) -> None:
        nearest = min(self._batches, key=lambda b: (abs(b - batch), b))
        per_row = sorted({max(1, round(n / nearest)) for n in self._grids[nearest]})
        points = {batch * m: self.cost(batch, batch * m) for m in per_row}
        self.batch_ms[batch] = dict(sorted(points.items()))
        self.batch_ms = dict(sorted(self.batch_ms.items()))
        self._reindex()

    def observe_overhead(self, stage: str, ms: float) -> None:
        if self.frozen or not math.isfinite(ms) or ms < 0:
            return
        old = self.overhead_ms.get(stage)
        self.overhead_ms[stage] = ms if old is None else old + self.smoothing * (ms - old)

    # ------------------------------------------------------------------------------------------- JSON
    def to_json(self) -> dict[str, Any]:
        return {"format": PROFILE_FORMAT, "key": self.key,
                "verify_ms": {str(n): round(ms, 4) for n, ms in self.verify_ms.items()},
                "batch_ms": {str(b): {str(n): round(ms, 4) for n, ms in c.items()} for b, c in self.batch_ms.items()},
                "overhead_ms": {k: round(v, 4) for k, v in self.overhead_ms.items()}}

    @classmethod
    def from_json(cls, data: Any) -> CostProfile:
        """Parse :meth:`to_json` output (format 1 or 2) into a plausible profile (:meth:`problem`); raises
        ``ValueError`` naming the bad field."""
        if not isinstance(data, dict) or data.get("format") not in READABLE_FORMATS:
            raise ValueError(f"not a cost profile of format {' or '.join(map(str, READABLE_FORMATS))}")
        key, verify, overhead = data.get("key"), data.get("verify_ms"), data.get("overhead_ms", {})
        batches = data.get("batch_ms", {})
        if not isinstance(key, dict) or not isinstance(verify, dict) or not isinstance(overhead, dict) \
                or not isinstance(batches, dict):
            raise ValueError("key, verify_ms, batch_ms and overhead_ms must be objects")
        points = _points(verify, "verify_ms")
        batch_ms: dict[int, dict[int, float]] = {}
        for b, curve in batches.items():
            size = _count(b, f"batch_ms[{b!r}]", MAX_PROFILE_BATCH)
            if not isinstance(curve, dict) or not curve:
                raise ValueError(f"batch_ms[{b!r}] must be an object of token counts and times in ms")
            batch_ms[size] = _points(curve, f"batch_ms[{b!r}]")
        for stage, ms in overhead.items():
            if stage not in OVERHEADS or not _finite_non_negative(ms):
                raise ValueError(f"overhead_ms[{stage!r}] = {ms!r} is not a known stage with a time in ms")
        if not points:
            raise ValueError("verify_ms has no points")
        profile = cls(key=key, verify_ms=points, overhead_ms={k: float(v) for k, v in overhead.items()},
                      batch_ms=batch_ms)
        reason = profile.problem()
        if reason is not None:
            raise ValueError(reason)
        return profile

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"


def _count(text: Any, where: str, limit: int) -> int:
    digits = str(text)
    if not digits.isascii() or not digits.isdigit() or int(digits[:12]) < 1:
        raise ValueError(f"{where} is not keyed by a positive count")
    if len(digits) > 9 or int(digits) > limit:
        raise ValueError(f"{where}: {digits[:12]}{'...' if len(digits) > 12 else ''} is above the limit of {limit}")
    return int(digits)


def _points(curve: dict[Any, Any], name: str) -> dict[int, float]:
    points: dict[int, float] = {}
    for n, ms in curve.items():
        digits = str(n)
        if not digits.isascii() or not digits.isdigit() or int(digits[:12]) < 1 or not _finite_non_negative(ms):
            raise ValueError(f"{name}[{n!r}] = {ms!r} is not a positive token count with a time in ms")
        if len(digits) > 9 or int(digits) > MAX_PROFILE_TOKENS:
            raise ValueError(f"{name} has a point at {digits[:12]}{'...' if len(digits) > 12 else ''} "
                             f"tokens; forwards verify 1 to {MAX_PROFILE_TOKENS} tokens")
        points[int(digits)] = float(ms)
    return points


def _finite_non_negative(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
