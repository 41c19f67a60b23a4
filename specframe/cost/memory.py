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

The file is a cache file (:mod:`specframe.files.cache`: a regular file, never read or written through a link, a
pipe or anything else at its path, which is set aside with a notice) and untrusted input: every value is
range-checked (gains from 1 to 1024 tokens, milliseconds up to a minute, signature entries in [0, 1], calibration
counts from 0 to :data:`MAX_COUNT` with ``accepted <= seen``), and a file that fails is ignored with a notice (the
controller then starts from scratch) and rewritten after the next request.

Saving merges (:func:`save_memory`, under the cache file's lock): the requests this run learnt are appended to the
requests the file holds *now*, so two runs of one pipeline at once both keep their requests; the moving averages and
the calibration are the saving run's own (each run started from the file as it was when it began, so the run that
saves last wins them, and a notice says so when another run saved in between). A run on a busy machine keeps the
file's ``draft_ms`` (a timing taken on shared cores is not cached).

Example: ``{"format": 2, "gain": 1.34, "draft_ms": 71.2, "calibration": {"seen": [[...]], "accepted": [[...]]},
"requests": [{"signature": [0.0, 0.12, ...], "gain": 1.1}, ...]}`` (format 1, without ``requests``, is read too).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specframe.config.bounds import MAX_TREE_NODES
from specframe.cost.acceptance import DEFAULT_DECAY
from specframe.cost.measure import cache_root, target_stem
from specframe.cost.text_kind import SIGNATURE_SIZE, neighbours
from specframe.files.cache import read_cache_json, update_cache_json

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
#: Most rows decoded in one batch (the command line's `--batch-size` limit).
MAX_ROWS = 4096
#: Largest calibration count of a cell: every round adds at most one count per verified node (at most
#: `MAX_TREE_NODES` per row) and multiplies all counts by the decay, so a count never exceeds
#: ``nodes per round / (1 - decay)`` (about 3.4e9; the 1e300 of a hostile file is far beyond it).
MAX_COUNT = MAX_TREE_NODES * MAX_ROWS / (1.0 - DEFAULT_DECAY)


@dataclass
class ControllerMemory:
    """See the module docstring."""

    gain: float | None = None
    draft_ms: float | None = None
    calibration: dict[str, Any] | None = None
    requests: list[tuple[tuple[float, ...], float]] = field(default_factory=list)  # (signature, mean gain)
    learnt: int = field(default=0, compare=False)  # requests observed since the memory was read or saved

    def observe_gain(self, gain: float) -> None:
        if math.isfinite(gain):
            self.gain = gain if self.gain is None else self.gain + GAIN_SMOOTHING * (gain - self.gain)

    def observe_request(self, signature: tuple[float, ...], gain: float) -> None:
        """A finished request's prompt signature and the mean expected tokens of its drafted rounds."""
        if len(signature) == SIGNATURE_SIZE and math.isfinite(gain):
            self.requests.append((signature, min(max(gain, GAIN_RANGE[0]), GAIN_RANGE[1])))
            del self.requests[:-MAX_REQUESTS]
            self.learnt = min(self.learnt + 1, MAX_REQUESTS)

    def predict_gain(self, signature: tuple[float, ...] | None) -> float | None:
        """The expected tokens of a drafted round for a request with this prompt signature: the similarity-weighted
        mean gain of the most alike remembered requests, else the overall ``gain`` (None: nothing learnt)."""
        if signature is not None:
            alike = neighbours(signature, [s for s, _ in self.requests], min_similarity=SIMILAR, limit=NEIGHBOURS)
            if alike:
                return sum(self.requests[i][1] * w for i, w in alike) / sum(w for _, w in alike)
        return self.gain

    def best_gain(self) -> float | None:
        """The highest mean gain of a remembered request (else the overall ``gain``; None: nothing learnt)."""
        return max((gain for _, gain in self.requests), default=self.gain)

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
        return cls(gain=gain, draft_ms=draft_ms, calibration=_calibration(data.get("calibration")),
                   requests=_requests(data.get("requests", [])))

    def merged_into(self, stored: ControllerMemory | None, *, quiet: bool) -> ControllerMemory:
        """What to save when the file now holds ``stored``: its requests followed by the ones this run learnt, this
        run's averages and calibration (``draft_ms`` only from a ``quiet`` run; else the stored one)."""
        if stored is None:
            return ControllerMemory(self.gain, self.draft_ms if quiet else None, self.calibration,
                                    list(self.requests))
        mine = self.requests[len(self.requests) - self.learnt:] if self.learnt else []
        return ControllerMemory(self.gain if self.gain is not None else stored.gain,
                                self.draft_ms if quiet and self.draft_ms is not None else stored.draft_ms,
                                self.calibration if self.calibration is not None else stored.calibration,
                                (stored.requests + mine)[-MAX_REQUESTS:])


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


def save_memory(memory: ControllerMemory, path: Path, notify: Callable[[str], None], *, quiet: bool = True) -> None:
    """Merge ``memory`` into the file as it is now (:meth:`ControllerMemory.merged_into`) and write it atomically
    under the file's lock; ``memory`` then holds what was saved. ``quiet``: the run's timings may be cached."""
    known = {sig for sig, _ in memory.requests[:len(memory.requests) - memory.learnt]}

    def merge(current: Any) -> Any:
        stored = None if current is None else _parsed(current, path, lambda _: None)  # reported when read
        if stored is not None and any(sig not in known for sig, _ in stored.requests):
            notify(f"another run saved the budget: auto memory {path} meanwhile: kept its requests and this run's "
                   "(the calibration and averages are this run's)")
        merged = memory.merged_into(stored, quiet=quiet)
        memory.requests, memory.learnt = merged.requests, 0
        return merged.to_json()

    update_cache_json(path, merge, what="budget: auto memory", notify=notify)
