"""`ControllerMemory`: what `budget: auto` learnt from earlier requests of one pipeline on one target and machine.

Kept beside the cost profile in the profile cache (``profiles/<target>.memory-<pipeline>.json``), one file per
pipeline's stages and sampling settings (a drafter's acceptance belongs to it, the verify curve to the target):

* ``calibration``: the `AcceptanceEstimator` counts (its score-to-acceptance map);
* ``gain``: the moving average of a drafted round's expected tokens over earlier requests (``1 + S``);
* ``draft_ms``: the moving average of a drafted round's milliseconds per row.

A request starts from them (`AutoBudget.start_row`). The file is untrusted input like every file the product
reads: it goes through the guarded JSON reader, every value is range-checked, and a file that fails is ignored
with a notice (the controller then starts from scratch) and rewritten after the next request.

Example: ``{"format": 1, "gain": 1.34, "draft_ms": 71.2, "calibration": {"seen": [[...]], "accepted": [[...]]}}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specframe.errors import SpecframeError
from specframe.files import write_text
from specframe.tensor_files import read_json_object

MEMORY_FORMAT = 1
#: Weight of one drafted round in the cross-request average of gains.
GAIN_SMOOTHING = 0.05
#: Plausible ranges: a round commits at least one token and at most a few hundred; a round takes under a minute.
GAIN_RANGE = (1.0, 1024.0)
MS_RANGE = (0.0, 60_000.0)


@dataclass
class ControllerMemory:
    """See the module docstring."""

    gain: float | None = None
    draft_ms: float | None = None
    calibration: dict[str, Any] | None = None

    def observe_gain(self, gain: float) -> None:
        if math.isfinite(gain):
            self.gain = gain if self.gain is None else self.gain + GAIN_SMOOTHING * (gain - self.gain)

    def to_json(self) -> dict[str, Any]:
        return {"format": MEMORY_FORMAT, "gain": self.gain, "draft_ms": self.draft_ms,
                "calibration": self.calibration}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ControllerMemory:
        """Parse :meth:`to_json` output; ``ValueError`` names the bad field."""
        if data.get("format") != MEMORY_FORMAT:
            raise ValueError(f"format is {data.get('format')!r}, expected {MEMORY_FORMAT}")
        gain = _in_range(data.get("gain"), GAIN_RANGE, "gain")
        draft_ms = _in_range(data.get("draft_ms"), MS_RANGE, "draft_ms")
        calibration = data.get("calibration")
        if calibration is not None and not isinstance(calibration, dict):
            raise ValueError("calibration must be an object")
        return cls(gain=gain, draft_ms=draft_ms, calibration=calibration)


def _in_range(value: Any, bounds: tuple[float, float], field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{field} is {value!r}, outside [{bounds[0]}, {bounds[1]}]")
    return float(value)


def memory_path(profile_file: Path, pipeline_key: str) -> Path:
    """The memory file of a pipeline beside its target's profile file."""
    return profile_file.with_name(f"{profile_file.stem}.memory-{pipeline_key}.json")


def load_memory(path: Path, notify: Callable[[str], None]) -> ControllerMemory:
    """The memory in ``path``; an empty one when it is missing, and (with a notice) when it is unusable."""
    if not path.exists():
        return ControllerMemory()
    try:
        return ControllerMemory.from_json(read_json_object(path, what="controller memory"))
    except (SpecframeError, ValueError) as exc:
        notify(f"ignoring the budget: auto memory {path}: {getattr(exc, 'message', exc)}; starting afresh")
        return ControllerMemory()


def save_memory(memory: ControllerMemory, path: Path) -> None:
    """Write atomically through the project's one writer."""
    write_text(path, json.dumps(memory.to_json(), sort_keys=True) + "\n", what="controller memory")
