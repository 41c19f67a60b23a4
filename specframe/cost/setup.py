"""Wiring `budget: auto` into a pipeline: find or measure its cost profile, build the controller, save what it learnt.

Order of sources for the profile: the file named by ``auto_budget.profile``, else the cache
(:func:`specframe.cost.measure.profile_path`); a profile measured under another key (device, dtype, threads,
library versions) is ignored with a notice; with none usable, the verify curve is measured on the first
request's prompt before its clock starts (about a second on a CPU for a 135M target). After every request
the learnt profile is written back to the cache, so the next run starts where this one ended.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from specframe.cost.auto_budget import AutoBudget, AutoBudgetSettings
from specframe.cost.measure import load_profile, measure_verify_curve, profile_key, profile_path, save_profile
from specframe.cost.profile import CostProfile
from specframe.errors import GenerationError

if TYPE_CHECKING:
    from specframe.pipeline import Pipeline


def notify(message: str) -> None:
    """A notice for the person running the pipeline (stderr; results are unaffected)."""
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


def build_auto_budget(pipe: Pipeline, prompt_ids: torch.Tensor) -> AutoBudget:
    """The controller for ``pipe``, with a cached, given or freshly measured profile."""
    cfg = pipe.config.auto_budget
    key = pipeline_profile_key(pipe)
    profile = None
    if cfg.profile:
        profile = load_profile(Path(cfg.profile).expanduser(), key, notify)
        if profile is None and not Path(cfg.profile).expanduser().is_file():
            notify(f"auto_budget.profile {cfg.profile} does not exist; measuring the verify curve")
    if profile is None:
        profile = load_profile(profile_path(key), key, notify)
    if profile is None:
        try:
            curve = measure_verify_curve(pipe.target, prompt_ids)
        except ValueError as exc:
            raise GenerationError(f"budget: auto has no cost profile and cannot measure one: {exc}",
                                  hint="start with a shorter prompt, or give auto_budget.profile (a JSON "
                                       "written by `specframe profile`)") from None
        profile = CostProfile(key=key, verify_ms=curve)
        _save_quietly(profile)
    settings = AutoBudgetSettings(max_budget=cfg.max_budget, min_probe_interval=cfg.min_probe_interval,
                                  max_probe_interval=cfg.max_probe_interval)
    return AutoBudget(profile, settings, sibling_prefix=needs_sibling_prefix(pipe))


def save_learned_profile(pipe: Pipeline) -> None:
    """Write the controller's current profile back to the cache (best effort: a read-only cache is skipped)."""
    if pipe.auto_budget is not None:
        _save_quietly(pipe.auto_budget.profile)


def _save_quietly(profile: CostProfile) -> None:
    try:
        save_profile(profile, profile_path(profile.key))
    except OSError as exc:
        notify(f"could not save the cost profile: {exc}")
