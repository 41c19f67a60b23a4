"""Wiring `budget: auto`: find or measure the cost profile, build the controller, save what it learnt.

Takes what it measures (the target) and the configuration, never a whole pipeline. Order of sources for the
profile: the file named by ``auto_budget.profile``, else the cache (:func:`specframe.cost.measure.profile_path`);
a profile measured under another key (device, dtype, threads, library versions) is ignored with a notice; with
none usable, the verify curve is measured on the first request's prompt before its clock starts (about a second
on a CPU for a 135M target). The controller's memory of earlier requests (`specframe.cost.memory`) is read from
beside the profile. After every request the learnt profile and memory are written back to the cache, so the next
run starts where this one ended.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from specframe.config.loader import config_hash
from specframe.cost.auto_budget import AutoBudget, AutoBudgetSettings
from specframe.cost.measure import load_profile, measure_verify_curve, profile_key, profile_path, save_profile
from specframe.cost.memory import load_memory, memory_path, save_memory
from specframe.cost.profile import CostProfile
from specframe.errors import GenerationError, SpecframeError
from specframe.interfaces import TargetModel

#: Pipeline sections whose change makes earlier acceptance meaningless (the target's belongs to the profile).
MEMORY_SECTIONS = ("drafter", "corrector", "tree_builder", "pruner", "verifier", "sampling")


def notify(message: str) -> None:
    """A notice for the person running the pipeline (stderr; results are unaffected)."""
    print(f"specframe: {message}", file=sys.stderr)


def target_profile_key(target: TargetModel, config: Any) -> dict:
    """The profile key of ``target`` built from the pipeline configuration ``config``."""
    target_section = getattr(config, "target", None)
    target_config = None if target_section is None else target_section.model_dump(mode="json")
    return profile_key(target, target_config)


def pipeline_memory_key(config: Any) -> str:
    """A short hash of the sections a controller's memory depends on."""
    data = config.model_dump(mode="json")
    return config_hash({k: data.get(k) for k in MEMORY_SECTIONS})[:12]


def build_auto_budget(target: TargetModel, config: Any, prompt_ids: torch.Tensor, *,
                      sibling_prefix: bool) -> AutoBudget:
    """The controller for a pipeline configuration ``config`` on ``target``, with a cached, given or freshly
    measured profile and the remembered state of earlier requests.

    ``sibling_prefix``: the verifier tries sampled siblings in order (a rejection verifier over a sampled tree),
    so the kept children must be an index prefix chosen from depths and sibling ranks only.
    """
    cfg = config.auto_budget
    key = target_profile_key(target, config)
    profile = None
    if cfg.profile:
        profile = load_profile(Path(cfg.profile).expanduser(), key, notify)
        if profile is None and not Path(cfg.profile).expanduser().is_file():
            notify(f"auto_budget.profile {cfg.profile} does not exist; measuring the verify curve")
    if profile is None:
        profile = load_profile(profile_path(key), key, notify)
    if profile is None:
        try:
            curve = measure_verify_curve(target, prompt_ids)
        except ValueError as exc:
            raise GenerationError(f"budget: auto has no cost profile and cannot measure one: {exc}",
                                  hint="start with a shorter prompt, or give auto_budget.profile (a JSON "
                                       "written by `specframe profile`)") from None
        profile = CostProfile(key=key, verify_ms=curve)
        _save_quietly(lambda: save_profile(profile, profile_path(key)))
    settings = AutoBudgetSettings(max_budget=cfg.max_budget, min_probe_interval=cfg.min_probe_interval,
                                  max_probe_interval=cfg.max_probe_interval)
    memory_file = memory_path(profile_path(key), pipeline_memory_key(config))
    return AutoBudget(profile, settings, sibling_prefix=sibling_prefix, memory=load_memory(memory_file, notify),
                      memory_file=memory_file)


def save_learned(auto: AutoBudget) -> None:
    """Write the controller's profile and memory back to the cache (best effort: a read-only cache is skipped)."""
    _save_quietly(lambda: save_profile(auto.profile, profile_path(auto.profile.key)))
    if auto.memory_file is not None:
        _save_quietly(lambda: save_memory(auto.remember(), auto.memory_file))  # type: ignore[arg-type]


def _save_quietly(save: Any) -> None:
    try:
        save()
    except (OSError, SpecframeError) as exc:
        notify(f"could not save what budget: auto learnt: {getattr(exc, 'message', exc)}")
