"""`CostProfile`: what a round costs on the device in use, measured, cached and kept current online.

The decode loop's cost has two parts:

* the **verify curve** ``T(n)``: wall time of one target forward over ``n`` new tokens (the root plus
  ``n - 1`` tree nodes) on top of the cache, stored as measured points and interpolated piecewise-linearly
  (extrapolated along the last segment). On a CPU the curve is steep; on a GPU it is flat until the device
  saturates;
* the **overheads** per round outside the target forward: ``draft``, ``build``, ``prune``, ``verify`` and
  ``commit`` in milliseconds, and ``plain`` (verify + commit of a root-only round).

Both are exponential moving averages updated from every round the loop times, so a profile measured
elsewhere, or none at all, converges to the truth of this run.

A profile read from a file or about to be cached is untrusted until :meth:`CostProfile.problem` finds nothing:
at least :data:`MIN_POINTS` verify points, token counts from 1 to :data:`MAX_PROFILE_TOKENS`, verify times
from :data:`MIN_FORWARD_MS` to :data:`MAX_STAGE_MS` (a forward takes some time, and not hours), overheads
from 0 to :data:`MAX_STAGE_MS`, and a curve that is monotone enough to decide with (no point below
:data:`MONOTONE_SLACK` times the time of a smaller forward). :meth:`CostProfile.covers` says which of two
profiles of one key is kept in the cache.

Example::

    >>> p = CostProfile(key={}, verify_ms={1: 50.0, 9: 120.0, 17: 130.0})
    >>> p.verify_cost(5)        # halfway between 1 and 9 -> 85.0
    >>> p.observe_verify(9, 100.0)   # the point at 9 moves towards 100 ms
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from typing import Any

#: Points of the verify curve measured by `specframe profile` (tokens per forward: root + nodes).
DEFAULT_GRID: tuple[int, ...] = (1, 2, 3, 5, 9, 17, 33, 65)

#: Per-round overheads besides the target forward, in the loop's stage names.
OVERHEADS: tuple[str, ...] = ("draft", "build", "prune", "verify", "commit", "plain")

PROFILE_FORMAT = 1

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


@dataclass
class CostProfile:
    """Measured round costs on one device; see the module docstring.

    Attributes:
        key: what the numbers are valid for (target, device, dtype, threads, library versions).
        verify_ms: tokens per forward -> milliseconds of the target forward.
        overhead_ms: stage -> milliseconds per round outside the target forward.
        smoothing: weight of a new observation in the moving averages.
    """

    key: dict[str, Any]
    verify_ms: dict[int, float]
    overhead_ms: dict[str, float] = field(default_factory=dict)
    smoothing: float = 0.2

    def __post_init__(self) -> None:
        if not self.verify_ms:
            raise ValueError("a cost profile needs at least one verify point")
        self.verify_ms = {int(n): float(ms) for n, ms in sorted(self.verify_ms.items())}
        self._grid = list(self.verify_ms)

    # ------------------------------------------------------------------------------------------ queries
    def verify_cost(self, tokens: int) -> float:
        """Milliseconds of one target forward over ``tokens`` new tokens (interpolated)."""
        grid, ms = self._grid, self.verify_ms
        if len(grid) == 1:
            return ms[grid[0]]
        i = bisect.bisect_left(grid, tokens)
        if i < len(grid) and grid[i] == tokens:
            return ms[tokens]
        lo, hi = (0, 1) if i == 0 else (len(grid) - 2, len(grid) - 1) if i == len(grid) else (i - 1, i)
        x0, x1 = grid[lo], grid[hi]
        y0, y1 = ms[x0], ms[x1]
        return max(0.0, y0 + (y1 - y0) * (tokens - x0) / (x1 - x0))

    def verify_costs(self, max_tokens: int) -> list[float]:
        """``[T(1), ..., T(max_tokens)]``, made non-decreasing (a bigger forward never costs less)."""
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
        for n, ms in self.verify_ms.items():
            if not 1 <= n <= MAX_PROFILE_TOKENS:
                return f"verify_ms has a point at {n} tokens; forwards verify 1 to {MAX_PROFILE_TOKENS} tokens"
            if not MIN_FORWARD_MS <= ms <= MAX_STAGE_MS:
                return (f"verify_ms[{n}] = {ms!r} ms is not a plausible forward time ({MIN_FORWARD_MS} to "
                        f"{MAX_STAGE_MS:.0f} ms)")
        slowest, slowest_at = 0.0, 0
        for n, ms in self.verify_ms.items():
            if ms < MONOTONE_SLACK * slowest:
                return (f"verify_ms[{n}] = {ms:g} ms is less than half of verify_ms[{slowest_at}] = {slowest:g} ms; "
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
        """Whether this profile measures at least what ``other`` does: its curve reaches at least as many tokens
        per forward with at least as many points. A cached profile is only replaced by one that covers it."""
        return max(self.verify_ms) >= max(other.verify_ms) and len(self.verify_ms) >= len(other.verify_ms)

    def coverage(self) -> str:
        """``"8 points up to 65 tokens"``, for notices."""
        return f"{len(self.verify_ms)} point(s) up to {max(self.verify_ms)} tokens"

    # ------------------------------------------------------------------------------------- online update
    def observe_verify(self, tokens: int, ms: float) -> None:
        """Move the curve towards one timed forward of ``tokens`` tokens.

        The observation updates the two grid points around ``tokens``, each weighted by its closeness (a point
        exactly on the grid updates only that point), so the curve's shape is learnt where the loop runs.
        """
        if not math.isfinite(ms) or ms < 0:
            return
        grid = self._grid
        i = bisect.bisect_left(grid, tokens)
        if i < len(grid) and grid[i] == tokens:
            weights = {tokens: 1.0}
        elif i == 0 or i == len(grid):
            near = grid[0] if i == 0 else grid[-1]
            weights = {near: 0.5}
        else:
            lo, hi = grid[i - 1], grid[i]
            w_hi = (tokens - lo) / (hi - lo)
            weights = {lo: 1.0 - w_hi, hi: w_hi}
        predicted = self.verify_cost(tokens)
        error = ms - predicted
        for point, w in weights.items():
            self.verify_ms[point] = max(0.0, self.verify_ms[point] + self.smoothing * w * error)

    def extend(self, tokens: int, ms: float) -> None:
        """A new point of the curve beyond every measured one (a batch's forward over many rows' trees).

        Extrapolating along the last measured segment is wrong where the device saturates (a GPU's flat
        curve turns steep at a few hundred tokens), so the batched loop adds the sizes it runs at and then
        refines them with :meth:`observe_verify` like any other point.
        """
        if not math.isfinite(ms) or ms < 0 or tokens <= max(self._grid):
            return
        self.verify_ms[int(tokens)] = float(ms)
        self._grid = sorted(self.verify_ms)

    def observe_overhead(self, stage: str, ms: float) -> None:
        if not math.isfinite(ms) or ms < 0:
            return
        old = self.overhead_ms.get(stage)
        self.overhead_ms[stage] = ms if old is None else old + self.smoothing * (ms - old)

    # ------------------------------------------------------------------------------------------- JSON
    def to_json(self) -> dict[str, Any]:
        return {"format": PROFILE_FORMAT, "key": self.key,
                "verify_ms": {str(n): round(ms, 4) for n, ms in self.verify_ms.items()},
                "overhead_ms": {k: round(v, 4) for k, v in self.overhead_ms.items()}}

    @classmethod
    def from_json(cls, data: Any) -> CostProfile:
        """Parse :meth:`to_json` output into a plausible profile (:meth:`problem`); raises ``ValueError`` naming
        the bad field."""
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise ValueError(f"not a cost profile of format {PROFILE_FORMAT}")
        key, verify, overhead = data.get("key"), data.get("verify_ms"), data.get("overhead_ms", {})
        if not isinstance(key, dict) or not isinstance(verify, dict) or not isinstance(overhead, dict):
            raise ValueError("key, verify_ms and overhead_ms must be objects")
        points: dict[int, float] = {}
        for n, ms in verify.items():
            digits = str(n)
            if not digits.isascii() or not digits.isdigit() or int(digits[:12]) < 1 or not _finite_non_negative(ms):
                raise ValueError(f"verify_ms[{n!r}] = {ms!r} is not a positive token count with a time in ms")
            if len(digits) > 9 or int(digits) > MAX_PROFILE_TOKENS:
                raise ValueError(f"verify_ms has a point at {digits[:12]}{'...' if len(digits) > 12 else ''} "
                                 f"tokens; forwards verify 1 to {MAX_PROFILE_TOKENS} tokens")
            points[int(digits)] = float(ms)
        for stage, ms in overhead.items():
            if stage not in OVERHEADS or not _finite_non_negative(ms):
                raise ValueError(f"overhead_ms[{stage!r}] = {ms!r} is not a known stage with a time in ms")
        if not points:
            raise ValueError("verify_ms has no points")
        profile = cls(key=key, verify_ms=points, overhead_ms={k: float(v) for k, v in overhead.items()})
        reason = profile.problem()
        if reason is not None:
            raise ValueError(reason)
        return profile

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"


def _finite_non_negative(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
