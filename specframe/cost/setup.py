"""Wiring `budget: auto` into a pipeline: find or measure its cost profile, build the controller, save what it learnt.

Order of sources for the profile: the file named by ``auto_budget.profile``, else the cache
(:func:`specframe.cost.measure.profile_path`); a profile measured under another key (device, dtype, threads,
library versions) is ignored with a notice; with none usable, the verify curve is measured on the first
request's prompt (its longest prefix that leaves room for every size) before its clock starts (about a second
on a CPU for a 135M target). A named profile that is not a readable, plausible profile file is a
:class:`~specframe.errors.ConfigError` naming ``auto_budget.profile``. After every request the learnt profile
goes back to the cache through :func:`specframe.cost.measure.cache_profile`, so the next run starts where this
one ended, unless it became implausible or the cache holds one that measures more.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from specframe.cost.auto_budget import AutoBudget, AutoBudgetSettings
from specframe.cost.measure import (
    ProfileError,
    ProfileKeyError,
    cache_profile,
    load_profile,
    measure_verify_curve,
    profile_key,
    profile_path,
    read_profile,
)
from specframe.cost.profile import CostProfile
from specframe.errors import ConfigError, GenerationError

if TYPE_CHECKING:
    from specframe.pipeline import Pipeline


_NOTIFIED: set[str] = set()


def notify(message: str) -> None:
    """A notice for the person running the pipeline (stderr, once per process; results are unaffected)."""
    if message not in _NOTIFIED:
        _NOTIFIED.add(message)
        print(f"specframe: {message}", file=sys.stderr)


def needs_sibling_prefix(pipe: Pipeline) -> bool:
    """Whether the verifier tries siblings in sampling order, so kept children must be an index prefix."""
    registry = pipe.host.registry
    builder = registry.get("tree_builder", pipe.config.tree_builder.type).spec.capabilities  # type: ignore[attr-defined]
    verifier = registry.get("verifier", pipe.config.verifier.type).spec.capabilities  # type: ignore[attr-defined]
    return bool(verifier.requires_q and builder.draft_regime == "sampled")


def pipeline_profile_key(pipe: Pipeline) -> dict:
    target_section = getattr(pipe.config, "target", None)
    target_config = None if target_section is None else target_section.model_dump(mode="json")
    return profile_key(pipe.target, target_config)


def given_profile(path_text: str, key: dict) -> CostProfile | None:
    """The profile named by ``auto_budget.profile``: None (with a notice) when the file does not exist or was
    measured under another key; a ConfigError when it is not a readable, plausible profile."""
    path = Path(path_text).expanduser()
    if not os.path.lexists(path):
        notify(f"auto_budget.profile {path} does not exist; measuring the verify curve")
        return None
    try:
        return read_profile(path, key)
    except ProfileKeyError as exc:
        notify(f"ignoring auto_budget.profile {path}: {exc.message}; measuring again")
        return None
    except ProfileError as exc:
        message = f"{exc.where}: {exc.message}" if exc.where else exc.message  # the file is named either way
        raise ConfigError(message, where="auto_budget.profile", hint=exc.hint) from None


def build_auto_budget(pipe: Pipeline, prompt_ids: torch.Tensor) -> AutoBudget:
    """The controller for ``pipe``, with a cached, given or freshly measured profile."""
    cfg = pipe.config.auto_budget
    key = pipeline_profile_key(pipe)
    profile = given_profile(cfg.profile, key) if cfg.profile else None
    if profile is None:
        profile = load_profile(profile_path(key), key, notify)
    if profile is None:
        try:
            curve = measure_verify_curve(pipe.target, prompt_ids)
        except ValueError as exc:
            raise GenerationError(f"budget: auto has no cost profile and cannot measure one: {exc}",
                                  hint="give auto_budget.profile (a JSON written by `specframe profile`), or use "
                                       "a fixed budget") from None
        profile = CostProfile(key=key, verify_ms=curve)
        reason = profile.problem()
        if reason is not None:
            raise GenerationError(f"budget: auto measured an unusable cost profile: {reason}",
                                  hint="give auto_budget.profile (a JSON written by `specframe profile` on this "
                                       "machine), or use a fixed budget")
        cache_profile(profile, notify)
    settings = AutoBudgetSettings(max_budget=cfg.max_budget, min_probe_interval=cfg.min_probe_interval,
                                  max_probe_interval=cfg.max_probe_interval)
    return AutoBudget(profile, settings, sibling_prefix=needs_sibling_prefix(pipe))


def save_learned_profile(pipe: Pipeline) -> None:
    """Offer the controller's current profile to the cache (:func:`cache_profile`: kept only when plausible and
    at least as complete as the cached one; a read-only cache is a notice)."""
    if pipe.auto_budget is not None:
        cache_profile(pipe.auto_budget.profile, notify)
