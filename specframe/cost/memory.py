"""`ControllerMemory`: what `budget: auto` learnt from earlier requests of one pipeline on one target and machine.

Kept beside the cost profile in the profile cache (``profiles/<target>.memory-<pipeline>.json``), one file per
pipeline's stages and sampling settings (a drafter's acceptance belongs to it, the verify curve to the target):

* ``calibration``: the `AcceptanceEstimator` counts (its score-to-acceptance map);
* ``gain``: the moving average of a drafted round's expected tokens over earlier requests (``1 + S``);
* ``draft_ms``: the moving average of a drafted round's milliseconds per row;
* ``requests``: the last :data:`MAX_REQUESTS` requests that drafted, each as its prompt's signature
  (`specframe.cost.text_kind`) and the mean expected tokens of its drafted rounds.

A request starts from them (`AutoBudget.start_row`): from the gains of the remembered requests whose prompts
are most like its own (:meth:`ControllerMemory.predict_gain`), or from the overall ``gain`` when none is alike,
so a chat request after many math requests is judged by earlier chat requests.

The file is untrusted input like every file the product reads: it goes through the guarded JSON reader, every
value is range-checked, and a file that fails is ignored with a notice (the controller then starts from scratch)
and rewritten after the next request.

Example: ``{"format": 2, "gain": 1.34, "draft_ms": 71.2, "calibration": {"seen": [[...]], "accepted": [[...]]},
"requests": [{"signature": [0.0, 0.12, ...], "gain": 1.1}, ...]}`` (format 1, without ``requests``, is read too).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specframe.cost.text_kind import SIGNATURE_SIZE, neighbours
from specframe.errors import SpecframeError
from specframe.files import write_text
from specframe.tensor_files import read_json_object

MEMORY_FORMAT = 2
#: Formats this version reads (1 had no per-request history).
READABLE_FORMATS = (1, 2)
#: Requests remembered with their prompt signatures (the oldest is forgotten first).
MAX_REQUESTS = 128
#: Centred cosine similarity from which an earlier request counts as the same kind of text, and how many count.
SIMILAR = 0.3
NEIGHBOURS = 8
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
    requests: list[tuple[tuple[float, ...], float]] = field(default_factory=list)  # (signature, mean gain)

    def observe_gain(self, gain: float) -> None:
        if math.isfinite(gain):
            self.gain = gain if self.gain is None else self.gain + GAIN_SMOOTHING * (gain - self.gain)

    def observe_request(self, signature: tuple[float, ...], gain: float) -> None:
        """A finished request's prompt signature and the mean expected tokens of its drafted rounds."""
        if len(signature) == SIGNATURE_SIZE and math.isfinite(gain):
            self.requests.append((signature, min(max(gain, GAIN_RANGE[0]), GAIN_RANGE[1])))
            del self.requests[:-MAX_REQUESTS]

    def predict_gain(self, signature: tuple[float, ...] | None) -> float | None:
        """The expected tokens of a drafted round for a request with this prompt signature: the similarity-weighted
        mean gain of the most alike remembered requests, else the overall ``gain`` (None: nothing learnt)."""
        if signature is not None:
            alike = neighbours(signature, [s for s, _ in self.requests], min_similarity=SIMILAR, limit=NEIGHBOURS)
            if alike:
                return sum(self.requests[i][1] * w for i, w in alike) / sum(w for _, w in alike)
        return self.gain

    def to_json(self) -> dict[str, Any]:
        return {"format": MEMORY_FORMAT, "gain": self.gain, "draft_ms": self.draft_ms,
                "calibration": self.calibration,
                "requests": [{"signature": list(sig), "gain": round(gain, 4)} for sig, gain in self.requests]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ControllerMemory:
        """Parse :meth:`to_json` output; ``ValueError`` names the bad field."""
        if data.get("format") not in READABLE_FORMATS:
            raise ValueError(f"format is {data.get('format')!r}, expected one of {READABLE_FORMATS}")
        gain = _in_range(data.get("gain"), GAIN_RANGE, "gain")
        draft_ms = _in_range(data.get("draft_ms"), MS_RANGE, "draft_ms")
        calibration = data.get("calibration")
        if calibration is not None and not isinstance(calibration, dict):
            raise ValueError("calibration must be an object")
        return cls(gain=gain, draft_ms=draft_ms, calibration=calibration,
                   requests=_requests(data.get("requests", [])))


def _requests(value: Any) -> list[tuple[tuple[float, ...], float]]:
    if not isinstance(value, list) or len(value) > MAX_REQUESTS:
        raise ValueError(f"requests must be a list of at most {MAX_REQUESTS} entries")
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ValueError(f"requests[{i}] must be an object")
        signature = entry.get("signature")
        if not isinstance(signature, list) or len(signature) != SIGNATURE_SIZE:
            raise ValueError(f"requests[{i}].signature must be a list of {SIGNATURE_SIZE} numbers")
        values = tuple(_in_range(v, (0.0, 1.0), f"requests[{i}].signature") for v in signature)
        gain = _in_range(entry.get("gain"), GAIN_RANGE, f"requests[{i}].gain")
        if gain is None or any(v is None for v in values):
            raise ValueError(f"requests[{i}] needs a signature and a gain")
        out.append((tuple(float(v) for v in values if v is not None), gain))
    return out


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
