"""`ControllerMemory`: what `budget: auto` learnt from earlier requests of one pipeline on one target.

Kept beside the cost profile in the profile cache (``profiles/<target>.memory-<pipeline>.json``), one file per
pipeline's stages and sampling settings (a drafter's acceptance belongs to it, the costs to the target's profile):

* ``calibration``: the `AcceptanceEstimator` counts (its score-to-acceptance map);
* ``outlook``: the sorted path-acceptance probabilities of the last drafted tree, what a new request's first
  round is planned with.

No timings: what a round costs depends on the thread count and the machine's load and lives in the cost profile,
which is keyed by them; this file is the same at any thread count.

The file is a cache file (:mod:`specframe.files.cache`: a regular file, never read or written through a link, a
pipe or anything else at its path, which is set aside with a notice) and untrusted input: every value is
range-checked (outlook entries in [0, 1], at most :data:`MAX_TREE_NODES` of them, calibration counts from 0 to
:data:`MAX_COUNT` with ``accepted <= seen``), and a file that fails is ignored with a notice (the controller then
starts from scratch) and rewritten after the next request. Formats 1 and 2 (which also held timings and per-prompt
gains, no longer used) are read for their calibration.

Saving (:func:`save_memory`, atomic under the cache file's lock) writes this run's calibration and outlook; when two
runs of one pipeline overlap, the one that saves last wins (each continued the calibration it read).

Example: ``{"format": 3, "calibration": {"seen": [[...]], "accepted": [[...]]}, "outlook": [0.92, 0.71, 0.4]}``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specframe.config.bounds import MAX_TREE_NODES
from specframe.cost.acceptance import DEFAULT_DECAY
from specframe.cost.measure import cache_root, target_stem
from specframe.files.cache import read_cache_json, update_cache_json

MEMORY_FORMAT = 3
#: Formats this version reads (1 and 2 held timings and per-prompt gains too; their calibration is kept).
READABLE_FORMATS = (1, 2, 3)
#: Most rows decoded in one batch (the command line's `--batch-size` limit).
MAX_ROWS = 4096
#: Largest calibration count of a cell: every round adds at most one count per verified node (at most
#: `MAX_TREE_NODES` per row) and multiplies all counts by the decay, so a count never exceeds
#: ``nodes per round / (1 - decay)`` (about 3.4e9; the 1e300 of a hostile file is far beyond it).
MAX_COUNT = MAX_TREE_NODES * MAX_ROWS / (1.0 - DEFAULT_DECAY)


@dataclass
class ControllerMemory:
    """See the module docstring."""

    calibration: dict[str, Any] | None = None
    outlook: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"format": MEMORY_FORMAT, "calibration": self.calibration,
                "outlook": None if self.outlook is None else [round(v, 6) for v in self.outlook]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ControllerMemory:
        """Parse :meth:`to_json` output; ``ValueError`` names the bad field."""
        if data.get("format") not in READABLE_FORMATS:
            raise ValueError(f"format is {data.get('format')!r}, expected one of {READABLE_FORMATS}")
        return cls(calibration=_calibration(data.get("calibration")), outlook=_outlook(data.get("outlook")))


def _outlook(value: Any) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_TREE_NODES:
        raise ValueError(f"outlook must be a list of at most {MAX_TREE_NODES} probabilities")
    out = [_in_range(v, (0.0, 1.0), f"outlook[{i}]") for i, v in enumerate(value)]
    return [float(v) for v in out if v is not None]


def _calibration(value: Any) -> dict[str, Any] | None:
    """The estimator's counts ``{"seen": [[...]], "accepted": [[...]]}`` if every count is plausible (0 to
    :data:`MAX_COUNT`, ``accepted <= seen``); the shape is checked against the estimator's settings when loaded."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"seen", "accepted"}:
        raise ValueError("calibration must be an object with 'seen' and 'accepted' only")
    tables = []
    for name in ("seen", "accepted"):
        rows = value[name]
        if not isinstance(rows, list) or not rows or len(rows) > 1024 or not all(
                isinstance(row, list) and 0 < len(row) <= 1024 for row in rows):
            raise ValueError(f"calibration.{name} must be a table (a list of up to 1024 lists of counts)")
        tables.append([[_in_range(v, (0.0, MAX_COUNT), f"calibration.{name}") for v in row] for row in rows])
    seen, accepted = tables
    if [len(r) for r in seen] != [len(r) for r in accepted]:
        raise ValueError("calibration.seen and calibration.accepted must have the same shape")
    for d, (row_seen, row_accepted) in enumerate(zip(seen, accepted, strict=True)):
        for j, (n, a) in enumerate(zip(row_seen, row_accepted, strict=True)):
            if n is None or a is None or a > n * (1 + 1e-9) + 1e-9:
                raise ValueError(f"calibration.accepted[{d}][{j}] = {a!r} exceeds calibration.seen[{d}][{j}] = "
                                 f"{n!r} (or a count is missing)")
    return {"seen": seen, "accepted": accepted}


def _in_range(value: Any, bounds: tuple[float, float], field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{field} is {value!r}, outside [{bounds[0]}, {bounds[1]}]")
    return float(value)


def memory_path(key: dict[str, Any], pipeline_key: str) -> Path:
    """The memory file of a pipeline on the target and device of a profile key (one for every thread count: what a
    drafter's acceptance depends on is the same at any)."""
    return cache_root() / "profiles" / f"{target_stem(key)}.memory-{pipeline_key}.json"


def load_memory(path: Path, notify: Callable[[str], None]) -> ControllerMemory:
    """The memory in ``path``; an empty one when it is missing, and (with a notice) when it is unusable."""
    data = read_cache_json(path, what="budget: auto memory", notify=notify)
    return ControllerMemory() if data is None else _parsed(data, path, notify) or ControllerMemory()


def _parsed(data: Any, path: Path, notify: Callable[[str], None]) -> ControllerMemory | None:
    try:
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        return ControllerMemory.from_json(data)
    except ValueError as exc:
        notify(f"ignoring the budget: auto memory {path}: {exc}; starting afresh")
        return None


def save_memory(memory: ControllerMemory, path: Path, notify: Callable[[str], None]) -> None:
    """Write ``memory`` to the file atomically under its lock (the run that saves last wins: each run's calibration
    continues the one it read)."""
    update_cache_json(path, lambda _current: memory.to_json(), what="budget: auto memory", notify=notify)
