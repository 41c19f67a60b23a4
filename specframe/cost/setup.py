"""Wiring `budget: auto`: find or measure the cost profile, build the controller, save what it learnt.

Takes what it measures (the target) and the configuration, never a whole pipeline. Order of sources for the
profile: the file named by ``auto_budget.profile``, else the cache (:func:`specframe.cost.measure.profile_path`);
a profile measured under another key (device, dtype, threads, library versions) is ignored with a notice; with
none usable, the verify curve is measured on the first request's prompt (its longest prefix that leaves room for
every size) before its clock starts (about a second on a CPU for a 135M target). A named profile that is not a
readable, plausible profile file is a :class:`~specframe.errors.ConfigError` naming ``auto_budget.profile``. The
controller's memory of earlier requests (`specframe.cost.memory`: the calibration) is read from beside the profile.
The first-use measurement is the one-row curve ``C(1, n)`` (batch sizes are learnt online as the loop runs them,
or measured by `specframe profile`). After every
request the learnt profile goes back to the cache through :func:`specframe.cost.measure.cache_profile` (unless it
became implausible, was learnt on a busy machine or the cache holds one that measures more), and the memory is merged
into the one beside it. A profile measured here while other processes kept the CPUs busy is used for this run but
not cached (:mod:`specframe.files.cache`: only quiet measurements are cached).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import torch

from specframe.config.loader import config_hash
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
from specframe.cost.memory import load_memory, memory_path, save_memory
from specframe.cost.profile import CostProfile
from specframe.errors import ConfigError, GenerationError
from specframe.files.cache import measuring
from specframe.interfaces import TargetModel
from specframe.metrics.machine_load import MachineLoad
from specframe.notices import notify

#: Pipeline sections whose change makes earlier acceptance meaningless (the target's belongs to the profile).
MEMORY_SECTIONS = ("drafter", "corrector", "tree_builder", "pruner", "verifier", "sampling")



def target_profile_key(target: TargetModel, config: Any) -> dict:
    """The profile key of ``target`` built from the pipeline configuration ``config``."""
    target_section = getattr(config, "target", None)
    target_config = None if target_section is None else target_section.model_dump(mode="json")
    return profile_key(target, target_config)


def pipeline_memory_key(config: Any) -> str:
    """A short hash of the sections a controller's memory depends on."""
    data = config.model_dump(mode="json")
    return config_hash({k: data.get(k) for k in MEMORY_SECTIONS})[:12]


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


def build_auto_budget(target: TargetModel, config: Any, prompt_ids: torch.Tensor, *,
                      sibling_prefix: bool) -> AutoBudget:
    """The controller for a pipeline configuration ``config`` on ``target``, with a cached, given or freshly
    measured profile and the remembered state of earlier requests.

    ``sibling_prefix``: the verifier tries sampled siblings in order (a rejection verifier over a sampled tree),
    so the kept children must be an index prefix chosen from depths and sibling ranks only.
    """
    cfg = config.auto_budget
    key = target_profile_key(target, config)
    profile = given_profile(cfg.profile, key) if cfg.profile else None
    if profile is None:
        profile = load_profile(profile_path(key), key, notify)
    if profile is None:
        try:
            with measuring() as window:
                curve = measure_verify_curve(target, prompt_ids)
        except ValueError as exc:
            raise GenerationError(f"budget: auto has no cost profile and cannot measure one: {exc}",
                                  hint="give auto_budget.profile (a JSON written by `specframe profile`), or use "
                                       "a fixed budget") from None
        # This machine's own measurement: timing noise (a busy core) may make a bigger forward read faster than a
        # smaller one; a forward over more tokens never costs less, so the running maximum is the curve.
        sizes = sorted(curve)
        profile = CostProfile(key=key, verify_ms=dict(zip(sizes, itertools.accumulate((curve[n] for n in sizes),
                                                                                      max), strict=True)))
        reason = profile.problem()
        if reason is not None:
            raise GenerationError(f"budget: auto measured an unusable cost profile: {reason}",
                                  hint="give auto_budget.profile (a JSON written by `specframe profile` on this "
                                       "machine), or use a fixed budget")
        cache_profile(profile, notify, load=window.load)
    settings = AutoBudgetSettings(max_budget=cfg.max_budget, seed=getattr(config, "seed", None) or 0)
    memory_file = memory_path(key, pipeline_memory_key(config))
    return AutoBudget(profile, settings, sibling_prefix=sibling_prefix, memory=load_memory(memory_file, notify),
                      memory_file=memory_file)


def save_learned(auto: AutoBudget, load: MachineLoad | None = None) -> None:
    """Offer the controller's profile to the cache (:func:`cache_profile`: kept only when plausible, learnt on a quiet
    machine and at least as complete as the cached one) and write its memory beside it (:func:`save_memory`: the
    calibration, no timings). ``load``: the machine's load while the decode call ran (None: unknown). Best effort: a
    cache that cannot be written is a notice."""
    cache_profile(auto.profile, notify, load=load)
    if auto.memory_file is not None:
        save_memory(auto.remember(), auto.memory_file, notify)
