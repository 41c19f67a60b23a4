"""Measuring a target's verify curve, and the profile cache keyed by where the numbers are valid.

`measure_verify_curve` times ``target.forward_tree`` over chains of ``n - 1`` nodes on top of a real prompt's
cache (a forward's cost depends on the number of new tokens and the cache length, not on the tokens), taking
the median of ``reps`` runs after one warm-up per size. Each measured tree is committed with its root only, so
the cache grows by one token per forward; the target is reset afterwards. A prompt too long to leave room for
every size is cut to its longest prefix that does (the cost of a forward grows slowly with the cache length,
and the loop refines the curve online), so a long prompt never yields a curve of one point.

Profiles are cached as JSON in ``$SPECFRAME_CACHE/profiles/`` (default ``~/.cache/specframe/profiles``), one
file per key: the file name holds a hash of the target and device, the thread count and a hash of the whole key
(dtype and library versions included), so runs at 1 and at 2 threads keep a profile each instead of replacing each
other's; the file records the full key, which is checked again when it is read. Cache files follow the cache's one
rule (:mod:`specframe.files.cache`: regular files only, no link followed, atomic replace under a lock, plausible
numbers) and must be plausible (:meth:`CostProfile.problem`). :func:`cache_profile` is the only way into the
cache: it refuses an implausible profile and one measured while other processes kept the CPUs busy, and keeps a
cached one that the new one does not cover (:meth:`CostProfile.covers`), each with a notice. A named profile
(``auto_budget.profile``) is the user's file and goes through the user-file reader (:func:`read_profile`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from specframe.cost.profile import DEFAULT_GRID, PROFILE_BATCHES, PROFILE_NODES, CostProfile
from specframe.device_sync import synchronize
from specframe.errors import SpecframeError
from specframe.files import MiB, parse_json, read_text, write_text
from specframe.files.cache import busy_reason, read_cache_json, update_cache_json
from specframe.interfaces import SharedEmbeddings, TargetModel
from specframe.metrics.machine_info import cpu_model
from specframe.metrics.machine_load import MachineLoad
from specframe.tree import DraftTree


def cache_root() -> Path:
    """``$SPECFRAME_CACHE`` when set, else ``~/.cache/specframe``."""
    env = os.environ.get("SPECFRAME_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specframe"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def profile_key(target: TargetModel, target_config: dict[str, Any] | None) -> dict[str, Any]:
    """What a profile's numbers depend on: the target, its device and dtype, threads and library versions."""
    shared = target if isinstance(target, SharedEmbeddings) else None  # the declared device/dtype contract
    device = shared.device if shared else torch.device("cpu")
    dtype = shared.dtype if shared else torch.float32
    device_name = str(device)
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        device_name += f" ({torch.cuda.get_device_name(torch.device(device))})"
    elif torch.device(device).type == "cpu":
        device_name += f" ({cpu_model()}, {os.cpu_count()} cores)"
    return {
        "target": {"class": type(target).__name__, "config": target_config, "vocab_size": target.vocab_size},
        "device": device_name,
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "versions": {d: _version(d) for d in ("torch", "transformers", "specframe")},
    }


def target_stem(key: dict[str, Any]) -> str:
    """A short hash of the target and device of a profile key: what every cache file of that target starts with."""
    ident = json.dumps({"target": key["target"], "device": key["device"]}, sort_keys=True, default=str)
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def profile_path(key: dict[str, Any]) -> Path:
    """The cache file of a profile key: ``<target and device>.<threads>-threads.<whole key>.json``."""
    whole = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:8]
    threads = key.get("threads")
    return cache_root() / "profiles" / f"{target_stem(key)}.{threads}-threads.{whole}.json"


#: Largest profile file read (real ones are a few kilobytes).
MAX_PROFILE_BYTES = MiB


class ProfileError(SpecframeError):
    """A cost-profile file cannot be read or holds implausible numbers."""


class ProfileKeyError(ProfileError):
    """A readable cost profile measured under another key (device, dtype, threads, versions)."""


def read_profile(path: Path, key: dict[str, Any] | None = None) -> CostProfile:
    """The plausible profile in the user's file ``path`` (``auto_budget.profile``); a :class:`ProfileError` naming
    the file and field otherwise.

    With ``key``, a profile measured under another key raises a :class:`ProfileKeyError` naming the fields that differ
    (checked before the numbers, which another machine's profile may hold in another range).
    """
    hint = "delete it, or write a new one with `specframe profile PIPELINE -o DIR`"
    text = read_text(path, what="cost profile", max_bytes=MAX_PROFILE_BYTES, error=ProfileError, hint=hint)
    return profile_in(parse_json(text, where=str(path), error=ProfileError, hint=hint), key, path)


def _canonical(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def profile_in(data: Any, key: dict[str, Any] | None, path: Path) -> CostProfile:
    """The plausible profile measured under ``key`` that ``data`` (a parsed profile file) holds; a
    :class:`ProfileKeyError` or :class:`ProfileError` naming ``path`` otherwise."""
    hint = "delete it, or write a new one with `specframe profile PIPELINE -o DIR`"
    found = data.get("key") if isinstance(data, dict) else None
    if key is not None and isinstance(found, dict) and _canonical(found) != _canonical(key):
        changed = sorted(k for k in set(key) | set(found) if _canonical(key.get(k)) != _canonical(found.get(k)))
        raise ProfileKeyError(f"it was measured with another {', '.join(changed)}", where=str(path),
                              hint="it is valid only where it was measured")
    try:
        return CostProfile.from_json(data)
    except ValueError as exc:
        raise ProfileError(f"not a usable cost profile: {exc}", where=str(path), hint=hint) from None


def load_profile(path: Path, key: dict[str, Any] | None, notify: Callable[[str], None]) -> CostProfile | None:
    """The cached profile in ``path`` if it is a regular file (:mod:`specframe.files.cache`), plausible and measured
    under ``key``; else None (with a notice, except when there is no file)."""
    data = read_cache_json(path, what="cost profile", notify=notify, max_bytes=MAX_PROFILE_BYTES,
                           then="measuring again")
    return _cached(data, key, path, notify)


def _cached(data: Any, key: dict[str, Any] | None, path: Path, notify: Callable[[str], None]) -> CostProfile | None:
    if data is None:
        return None
    try:
        return profile_in(data, key, path)
    except ProfileError as exc:
        notify(f"ignoring the cost profile {path}: {exc.message}; measuring again")
        return None


def save_profile(profile: CostProfile, path: Path) -> None:
    """Write ``profile`` to the user's file ``path`` through the one atomic writer (an :class:`OutputError` when it
    cannot); the cache is written by :func:`cache_profile` only."""
    write_text(path, profile.dumps(), what="cost profile")


def cache_profile(profile: CostProfile, notify: Callable[[str], None], *,
                  load: MachineLoad | None = None) -> Path | None:
    """Store ``profile`` in the cache unless it is implausible, was measured (or learnt) while other processes kept
    the CPUs busy (``load``, the measurement's :class:`MachineLoad`; None: unknown), or the cached profile of its
    key measures more (:meth:`CostProfile.covers`, checked under the file's lock so a concurrent run's profile is
    weighed too); each refusal is a notice. Returns the cache file written, or None."""
    path = profile_path(profile.key)
    busy = busy_reason(load)
    if busy is not None:
        notify(f"not caching the cost profile: it was measured while other processes used the CPUs ({busy}); "
               "this run uses it, and a run on a quiet machine caches it")
        return None
    reason = profile.problem()
    if reason is not None:
        notify(f"not caching the cost profile: {reason}")
        return None

    def merge(current: Any) -> Any:
        cached = _cached(current, profile.key, path, _unreported)
        if cached is not None and not profile.covers(cached):
            notify(f"kept the cached cost profile {path} ({cached.coverage()}); this one has only "
                   f"{profile.coverage()} (delete the file to replace it)")
            return None
        return profile.to_json()

    return update_cache_json(path, merge, what="cost profile", notify=notify)


def _unreported(_: str) -> None:
    """What is wrong with the file being replaced was reported when it was read."""


def timed_forward(rows: Any, tree: DraftTree, device: torch.device) -> float:
    """Milliseconds of one ``rows.forward_tree(tree)``, the device synchronised before and after."""
    synchronize(device)
    t0 = time.perf_counter_ns()
    rows.forward_tree(tree)
    synchronize(device)
    return (time.perf_counter_ns() - t0) / 1e6


def measure_verify_curve(target: TargetModel, prompt_ids: torch.Tensor, *, grid: Sequence[int] = DEFAULT_GRID,
                         reps: int = 3) -> dict[int, float]:
    """Median milliseconds of ``target.forward_tree`` for chains of ``n`` tokens, ``n`` in ``grid``.

    Args:
        target: the target adapter (reset before and after).
        prompt_ids: ``[1, P]`` a prompt whose cache the forwards run on top of.
        grid: token counts per forward (root included).
        reps: timed runs per size (after one warm-up).
    """
    limit = target.max_length
    sizes = list(grid)
    if limit is not None:
        # Each forward leaves one token in the cache: the largest size needs room after all earlier ones.
        def need(ns: list[int]) -> int:
            return max(ns) + (reps + 1) * len(ns) + 1

        while len(sizes) > 1 and need(sizes) >= limit:
            sizes.pop()  # the context is too short for the whole grid: measure the sizes that fit
        if need(sizes) >= limit:
            raise ValueError(f"the target's context ({limit} tokens) is too short to measure forwards")
        prompt_ids = prompt_ids[:, :limit - need(sizes)]  # the longest prefix that leaves room for every size
    times: dict[int, float] = {}
    device = target.device if isinstance(target, SharedEmbeddings) else torch.device("cpu")
    fill = prompt_ids[0].tolist()
    with torch.inference_mode():
        target.reset()
        target.prefill(prompt_ids)
        for n in sizes:
            tokens = [fill[i % len(fill)] for i in range(n)]
            tree = DraftTree.from_lists(tokens, [-1, *range(n - 1)])
            accepted = torch.full((1, n), -1, dtype=torch.long)
            accepted[0, 0] = 0
            runs = []
            for rep in range(reps + 1):
                elapsed = timed_forward(target, tree, device)
                target.commit(tree, accepted)
                if rep:
                    runs.append(elapsed)
            times[n] = statistics.median(runs)
        target.reset()
    return times


def measure_batch_costs(target: TargetModel, prompt_ids: torch.Tensor, *, batches: Sequence[int] = PROFILE_BATCHES,
                        nodes: Sequence[int] = PROFILE_NODES, reps: int = 3) -> dict[int, dict[int, float]]:
    """Median milliseconds of ``C(B, B (k + 1))``, the target's forward over ``B`` rows each verifying a chain of
    ``k`` nodes on a copy of the prompt's cache, for ``B`` in ``batches`` (above 1) and ``k`` in ``nodes``.

    A target that cannot batch (:meth:`TargetModel.ragged_batch` is None) has no batch curves (an empty result):
    the controller then prices ``C(B, n)`` as ``C(1, n)`` and learns the batches it runs. The forwards are not
    committed, so every size runs on the same cache length.

    Args:
        target: the target adapter (its own single-row state is left as it was).
        prompt_ids: ``[1, P]`` the prompt every row holds (cut to leave room for the largest tree).
        batches: batch sizes (1 is measured by :func:`measure_verify_curve`).
        nodes: draft nodes per row (0: a plain round).
        reps: timed runs per size (after one warm-up).
    """
    sizes = sorted({int(b) for b in batches if b > 1})
    widths = sorted({int(k) for k in nodes if k >= 0})
    limit = target.max_length
    if limit is not None:
        widths = [k for k in widths if k + 2 < limit] or [0]
        prompt_ids = prompt_ids[:, :max(1, limit - max(widths) - 2)]
    out: dict[int, dict[int, float]] = {}
    device = target.device if isinstance(target, SharedEmbeddings) else torch.device("cpu")
    fill = prompt_ids[0].tolist()
    with torch.inference_mode():
        for b in sizes:
            rows = target.ragged_batch(())
            if rows is None:
                return {}
            try:
                for _ in range(b):
                    rows.add_row(prompt_ids, capacity=int(prompt_ids.shape[1]) + max(widths) + 2)
                curve: dict[int, float] = {}
                for k in widths:
                    chain = DraftTree.from_lists([fill[i % len(fill)] for i in range(k + 1)], [-1, *range(k)])
                    tree = DraftTree.stack([chain] * b)
                    runs = []
                    for rep in range(reps + 1):
                        elapsed = timed_forward(rows, tree, device)
                        if rep:
                            runs.append(elapsed)
                    curve[b * (k + 1)] = statistics.median(runs)
                out[b] = curve
            finally:
                rows.close()
    return out


def measure_cost_model(target: TargetModel, prompt_ids: torch.Tensor, key: dict[str, Any], *,
                       grid: Sequence[int] = DEFAULT_GRID, batches: Sequence[int] = PROFILE_BATCHES,
                       nodes: Sequence[int] = PROFILE_NODES, reps: int = 3,
                       overhead_ms: dict[str, float] | None = None) -> CostProfile:
    """The cost model ``C(B, n)`` of ``target`` measured here: the one-row curve on ``grid``
    (:func:`measure_verify_curve`) and every batch size of ``batches`` at ``nodes`` draft nodes a row
    (:func:`measure_batch_costs`), each curve made non-decreasing (a forward over more tokens never costs less; a
    busy core can make one read faster). What `specframe profile`, `budget: auto` and the benchmarks' physics bound
    all read."""
    def monotone(curve: dict[int, float]) -> dict[int, float]:
        sizes = sorted(curve)
        return dict(zip(sizes, itertools.accumulate((curve[n] for n in sizes), max), strict=True))

    verify = monotone(measure_verify_curve(target, prompt_ids, grid=grid, reps=reps))
    batch = {b: monotone(c) for b, c in measure_batch_costs(target, prompt_ids, batches=batches, nodes=nodes,
                                                            reps=reps).items()}
    return CostProfile(key=key, verify_ms=verify, batch_ms=batch, overhead_ms=dict(overhead_ms or {}))
