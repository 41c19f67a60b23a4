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
        """Parse :meth:`to_json` output; raises ``ValueError`` naming the bad field."""
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise ValueError(f"not a cost profile of format {PROFILE_FORMAT}")
        key, verify, overhead = data.get("key"), data.get("verify_ms"), data.get("overhead_ms", {})
        if not isinstance(key, dict) or not isinstance(verify, dict) or not isinstance(overhead, dict):
            raise ValueError("key, verify_ms and overhead_ms must be objects")
        points: dict[int, float] = {}
        for n, ms in verify.items():
            if not str(n).isdigit() or int(n) < 1 or not _finite_non_negative(ms):
                raise ValueError(f"verify_ms[{n!r}] = {ms!r} is not a positive token count with a time in ms")
            points[int(n)] = float(ms)
        for stage, ms in overhead.items():
            if stage not in OVERHEADS or not _finite_non_negative(ms):
                raise ValueError(f"overhead_ms[{stage!r}] = {ms!r} is not a known stage with a time in ms")
        return cls(key=key, verify_ms=points, overhead_ms={k: float(v) for k, v in overhead.items()})

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"


def _finite_non_negative(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
