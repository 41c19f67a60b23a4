"""`cpu_linear: auto`: the linear kernels chosen by measuring both on the target, and the cache of that choice.

Which of the default BLAS path and oneDNN's prepacked weights multiplies faster depends on the CPU, the thread
count, the library versions, the layer shapes and the number of rows (:mod:`specframe.cpu_linear`), so it is
measured on the machine, once:

* **measurement** (:func:`measure_kernels`): forwards of ``q`` new tokens over a short cache, ``q`` in
  :data:`MEASURE_ROWS` (1: plain decoding; 4; 17: a verify at the shipped budget of 16), each kernel in turn
  (interleaved, so drift hits both alike), one warm-up and the median of ``reps`` runs. On SmolLM2-135M that is
  about a second;
* **decision** (:func:`decide`): a kernel *wins* at ``q`` when it is faster there; oneDNN must beat the default
  by :data:`MARGIN` (it doubles the weights' memory and changes results in the last bits, so a tie keeps
  ``nn.Linear``). Winning everywhere takes every row count; when the winner changes once along ``q`` (the
  Intel case: BLAS at one row, oneDNN at sixteen), the packed layers dispatch by the product's row count, with
  the boundary where the two measured costs cross (linear between the two measured sizes around it), so plain
  rounds and verify rounds each get their faster kernel. Winners that change more than once (noise) fall back to
  one kernel for every row count: the one with the smaller summed time over the measured sizes, i.e. the
  plain round (q = 1) and the verify round (q = 17) weighted equally with the middle point. Row counts beyond
  the largest measured size (bigger budgets, batches) keep the kernel that won there;
* **cache** (:func:`choose_linear_kernels`): ``$SPECFRAME_CACHE/profiles/cpu-linear-<hash>.json``, next to the
  cost profiles (:mod:`specframe.cost.measure`), named by a hash of the whole key (CPU model, thread count, torch
  version, model config hash, dtype and measured sizes), so runs at different thread counts keep a choice each; the
  file records the full key and the timings. It is a cache file (:mod:`specframe.files.cache`: a regular file, never
  read or written through a link, set aside when something else is at its path; written atomically under a lock,
  and a choice another run cached meanwhile is kept), and its timings must be plausible (:data:`MS_RANGE` each, the
  two kernels within :data:`MAX_KERNEL_RATIO` of each other at every size: they compute the same product). A file
  that does not read as such a file is reported with a notice and measured again; the decision is re-derived from
  the stored timings, so a changed rule needs no new measurement.
  A measurement taken while other processes kept the CPUs busy (:class:`specframe.metrics.machine_load.LoadWindow`
  says contended) is used for the run that took it but **not cached**, with a notice: the cache outlives the
  moment, and a choice made on shared cores (a training job beside it, say) would hold for every later run.

Example::

    timings = KernelTimings(default_ms={1: 55.5, 4: 70.0, 17: 130.0}, onednn_ms={1: 61.7, 4: 66.0, 17: 100.2})
    decide(timings)       # LinearKernels(low=4, high=UNBOUNDED): BLAS for 1-3 rows, oneDNN from 4
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from specframe.cost.measure import cache_root
from specframe.cost.profile import MAX_STAGE_MS, MIN_FORWARD_MS
from specframe.cpu_linear import ALWAYS, NEVER, UNBOUNDED, LinearKernels
from specframe.files.cache import busy_reason, measuring, read_cache_json, update_cache_json
from specframe.metrics.machine_info import cpu_model

#: New tokens per measured forward: plain decoding, a small tree, a verify at budget 16.
MEASURE_ROWS: tuple[int, ...] = (1, 4, 17)
#: oneDNN must be this much faster (relative) to be chosen at a row count.
MARGIN = 0.02
CHOICE_FORMAT = 1
#: Plausible milliseconds of one measured forward (a microsecond to ten minutes, as a cost profile's).
MS_RANGE = (MIN_FORWARD_MS, MAX_STAGE_MS)
#: Most one kernel's time may exceed the other's at one size: both compute the same product, so a larger gap is a
#: broken measurement or an edited file.
MAX_KERNEL_RATIO = 50.0

Notify = Callable[[str], None]


@dataclass(frozen=True)
class KernelTimings:
    """Median milliseconds of a forward of ``q`` new tokens on each kernel."""

    default_ms: Mapping[int, float]
    onednn_ms: Mapping[int, float]

    def rows(self) -> list[int]:
        return sorted(set(self.default_ms) & set(self.onednn_ms))

    def to_json(self) -> dict[str, dict[str, float]]:
        return {"default_ms": {str(q): round(ms, 4) for q, ms in sorted(self.default_ms.items())},
                "onednn_ms": {str(q): round(ms, 4) for q, ms in sorted(self.onednn_ms.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelTimings:
        """Parse :meth:`to_json` output; ``ValueError`` names the bad field."""
        parsed = []
        for field in ("default_ms", "onednn_ms"):
            raw = data.get(field)
            if not isinstance(raw, dict) or not raw:
                raise ValueError(f"'{field}' must be a non-empty object of rows -> milliseconds")
            points = {}
            for q, ms in raw.items():
                if not str(q).isascii() or not str(q).isdigit() or len(str(q)) > 9 or int(q) < 1 \
                        or isinstance(ms, bool) or not isinstance(ms, int | float) or not math.isfinite(ms) \
                        or not MS_RANGE[0] <= ms <= MS_RANGE[1]:
                    raise ValueError(f"{field}[{q!r}] = {ms!r} is not a row count with a plausible time "
                                     f"({MS_RANGE[0]} to {MS_RANGE[1]:.0f} ms)")
                points[int(q)] = float(ms)
            parsed.append(points)
        timings = cls(default_ms=parsed[0], onednn_ms=parsed[1])
        if not timings.rows():
            raise ValueError("default_ms and onednn_ms share no row count")
        for q in timings.rows():
            a, b = timings.default_ms[q], timings.onednn_ms[q]
            if max(a, b) > MAX_KERNEL_RATIO * min(a, b):
                raise ValueError(f"at {q} rows one kernel took {max(a, b) / min(a, b):.0f}x the other's time "
                                 f"({a:g} / {b:g} ms); two kernels of one product differ by far less")
        return timings

    def summary(self) -> str:
        return ", ".join(f"q={q}: {self.default_ms[q]:.1f} ms default / {self.onednn_ms[q]:.1f} ms oneDNN"
                         for q in self.rows())


def decide(timings: KernelTimings, *, margin: float = MARGIN) -> LinearKernels:
    """The rule the measured timings call for (see the module docstring)."""
    rows = timings.rows()
    gain = [(1 - margin) * timings.default_ms[q] - timings.onednn_ms[q] for q in rows]  # > 0: oneDNN wins
    wins = [g > 0 for g in gain]
    if all(wins):
        return ALWAYS
    if not any(wins):
        return NEVER
    switches = sum(a != b for a, b in itertools.pairwise(wins))
    if switches > 1:
        total_default = sum(timings.default_ms[q] for q in rows)
        total_onednn = sum(timings.onednn_ms[q] for q in rows)
        return ALWAYS if total_onednn < (1 - margin) * total_default else NEVER
    i = next(k for k in range(1, len(rows)) if wins[k] != wins[0])
    q0, q1, g0, g1 = rows[i - 1], rows[i], gain[i - 1], gain[i]
    cross = q0 + (q1 - q0) * g0 / (g0 - g1)  # where the interpolated gain is 0
    if wins[0]:  # oneDNN for few rows (where gain > 0, i.e. below the crossing)
        return LinearKernels(low=1, high=min(q1, max(q0 + 1, math.ceil(cross))))
    return LinearKernels(low=min(q1, max(q0 + 1, math.floor(cross) + 1)), high=UNBOUNDED)


def measure_kernels(forward: Callable[[int], None], use: Callable[[LinearKernels], None], *,
                    rows: Sequence[int] = MEASURE_ROWS, reps: int = 3) -> KernelTimings:
    """Median milliseconds of ``forward(q)`` under the default rule and under oneDNN for every row count.

    Args:
        forward: one forward of ``q`` new tokens over the same short cache (it restores the cache itself).
        use: puts the model's packed layers under a rule.
        rows: the ``q`` measured.
        reps: timed runs per kernel and size, after one warm-up each; the two kernels alternate.
    """
    times: dict[LinearKernels, dict[int, float]] = {NEVER: {}, ALWAYS: {}}
    try:
        for q in rows:
            runs: dict[LinearKernels, list[float]] = {NEVER: [], ALWAYS: []}
            for rep in range(reps + 1):
                for kernels in (NEVER, ALWAYS):
                    use(kernels)
                    t0 = time.perf_counter_ns()
                    forward(q)
                    if rep:
                        runs[kernels].append((time.perf_counter_ns() - t0) / 1e6)
            for kernels, values in runs.items():
                times[kernels][q] = statistics.median(values)
    finally:
        use(ALWAYS)
    return KernelTimings(default_ms=times[NEVER], onednn_ms=times[ALWAYS])


def choice_key(*, model: str, dtype: str, rows: Sequence[int] = MEASURE_ROWS) -> dict[str, Any]:
    """What a measured choice is valid for: this CPU, thread count and torch build, a model config, a dtype."""
    return {"format": CHOICE_FORMAT, "cpu": cpu_model(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "model": model, "dtype": dtype, "rows": list(rows)}


def choice_path(key: Mapping[str, Any]) -> Path:
    """The cache file of a choice key (a hash of the whole key: another thread count or torch gets its own file)."""
    ident = json.dumps(dict(key), sort_keys=True, default=str)
    return cache_root() / "profiles" / f"cpu-linear-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json"


def _timings_in(data: Any, key: Mapping[str, Any], path: Path, notify: Notify) -> KernelTimings | None:
    """The timings a parsed choice file holds if it is one measured under ``key``; else None with a notice."""
    try:
        if not isinstance(data, dict) or data.get("format") != CHOICE_FORMAT or not isinstance(data.get("key"), dict):
            raise ValueError(f"not a cpu_linear choice of format {CHOICE_FORMAT}")
        timings = KernelTimings.from_json(data)
    except ValueError as exc:
        notify(f"ignoring the cpu_linear choice {path}: {exc}; measuring again")
        return None
    stored = data["key"]
    if json.loads(json.dumps(stored, default=str)) != json.loads(json.dumps(dict(key), default=str)):
        changed = sorted(k for k in set(key) | set(stored) if key.get(k) != stored.get(k))
        notify(f"ignoring the cpu_linear choice {path}: it was measured with another {', '.join(changed)}; "
               "measuring again")
        return None
    return timings


def load_choice(path: Path, key: Mapping[str, Any], notify: Notify) -> KernelTimings | None:
    """The timings in ``path`` if it is a regular file (:mod:`specframe.files.cache`) holding a choice measured under
    ``key``; else None (with a notice, except when there is no file)."""
    data = read_cache_json(path, what="cpu_linear choice", notify=notify, then="measuring again")
    return None if data is None else _timings_in(data, key, path, notify)


def save_choice(path: Path, key: Mapping[str, Any], timings: KernelTimings, notify: Notify) -> bool:
    """Write the choice into the cache (a cache that cannot be written is a notice, not an error); a valid choice
    that another run cached meanwhile is kept, with a notice; implausible timings are not cached. Returns whether
    ``path`` now holds this choice."""
    try:
        KernelTimings.from_json(timings.to_json())
    except ValueError as exc:
        notify(f"not caching the cpu_linear choice: {exc}")
        return False

    def merge(current: Any) -> Any:
        if current is not None and _timings_in(current, key, path, lambda _: None) is not None:
            notify(f"kept the cpu_linear choice {path} that another run cached meanwhile")
            return None
        kernels = decide(timings)
        return {"format": CHOICE_FORMAT, "key": dict(key), **timings.to_json(), "decision": kernels.to_json(),
                "describe": kernels.describe()}

    return update_cache_json(path, merge, what="cpu_linear choice", notify=notify) is not None


@dataclass(frozen=True)
class KernelChoice:
    kernels: LinearKernels
    timings: KernelTimings
    measured: bool  # False: read from the cache
    path: Path
    cached: bool = True  # whether ``path`` holds this choice (False: measured on a busy machine, or not writable)


def choose_linear_kernels(key: Mapping[str, Any], measure: Callable[[], KernelTimings], notify: Notify,
                          *, path: Path | None = None) -> KernelChoice:
    """The cached choice for ``key``, else ``measure()`` it, cache it and say so."""
    path = path or choice_path(key)
    timings = load_choice(path, key, notify)
    measured = timings is None
    cached = True
    if timings is None:
        with measuring() as window:
            timings = measure()
        busy = busy_reason(window.load)
        if busy is not None:
            notify(f"cpu_linear: auto measured while other processes used the CPUs ({busy}): using the choice for "
                   "this run, not caching it (it is measured again next time)")
            cached = False
        else:
            cached = save_choice(path, key, timings, notify)
    return KernelChoice(decide(timings), timings, measured, path, cached)
