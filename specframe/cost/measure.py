"""Measuring a target's verify curve, and the profile cache keyed by where the numbers are valid.

`measure_verify_curve` times ``target.forward_tree`` over chains of ``n - 1`` nodes on top of a real prompt's
cache (a forward's cost depends on the number of new tokens and the cache length, not on the tokens), taking
the median of ``reps`` runs after one warm-up per size. Each measured tree is committed with its root only, so
the cache grows by one token per forward; the target is reset afterwards.

Profiles are cached as JSON in ``$SPECFRAME_CACHE/profiles/`` (default ``~/.cache/specframe/profiles``), one
file per target and device; the file records the full key (target, device, dtype, threads, library
versions). A file whose key differs (another dtype, thread count or library version) is reported with a
notice and measured again.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from specframe.cost.profile import DEFAULT_GRID, CostProfile
from specframe.device_sync import synchronize
from specframe.interfaces import SharedEmbeddings, TargetModel
from specframe.metrics.machine_info import cpu_model
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


def profile_path(key: dict[str, Any]) -> Path:
    """The cache file of a target on a device (other key fields are checked inside the file)."""
    ident = json.dumps({"target": key["target"], "device": key["device"]}, sort_keys=True, default=str)
    return cache_root() / "profiles" / f"{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json"


def load_profile(path: Path, key: dict[str, Any] | None, notify: Callable[[str], None]) -> CostProfile | None:
    """The profile in ``path`` if it exists, parses and was measured under ``key``; else None (with a notice)."""
    if not path.is_file():
        return None
    try:
        profile = CostProfile.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        notify(f"ignoring the cost profile {path}: {exc}; measuring again")
        return None
    if key is not None and json.loads(json.dumps(profile.key, default=str)) != json.loads(
            json.dumps(key, default=str)):
        changed = sorted(k for k in set(key) | set(profile.key) if key.get(k) != profile.key.get(k))
        notify(f"ignoring the cost profile {path}: it was measured with another {', '.join(changed)}; "
               "measuring again")
        return None
    return profile


def save_profile(profile: CostProfile, path: Path) -> None:
    """Write atomically (a temporary file renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(profile.dumps(), encoding="utf-8")
    os.replace(tmp, path)


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
    room = None if limit is None else limit - int(prompt_ids.shape[1]) - 1
    sizes = [n for n in grid if room is None or n + (reps + 1) * len(grid) <= room]
    if not sizes:
        raise ValueError("the prompt leaves no room in the target's context to measure forwards")
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
                synchronize(device)
                t0 = time.perf_counter_ns()
                target.forward_tree(tree)
                synchronize(device)
                elapsed = (time.perf_counter_ns() - t0) / 1e6
                target.commit(tree, accepted)
                if rep:
                    runs.append(elapsed)
            times[n] = statistics.median(runs)
        target.reset()
    return times
