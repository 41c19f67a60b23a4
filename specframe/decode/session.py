"""What one run of the decode loop works with: the resolved stages, the settings, and the live rows' state.

`Stages` and `DecodeSettings` are built once per pipeline (`specframe.pipeline.Pipeline`); a `Session` is one call
of the loop: the target's rows, the drafter's rows, the stage clock and the `budget: auto` controller.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specframe.cost.auto_budget import AutoBudget
from specframe.decode.acceptance_alarm import AcceptanceAlarm
from specframe.device_sync import StageClock
from specframe.interfaces import Corrector, Drafter, DrafterRows, Pruner, TargetRows, TreeBuilder, Verifier
from specframe.types import SamplingParams


@dataclass
class Stages:
    """The resolved stage objects of a pipeline."""

    drafter: Drafter
    corrector: Corrector
    tree_builder: TreeBuilder
    pruner: Pruner
    verifier: Verifier


@dataclass(frozen=True)
class DecodeSettings:
    """The pipeline settings the loop reads."""

    sampling: SamplingParams
    budget: int  # the verification budget (the upper bound under `budget: auto`)
    stage_timing: bool  # record per-stage nanoseconds in every round
    check_trees: bool  # run the DraftTree invariant checker on every verified tree
    stop_at_eos: bool
    drafts: bool  # False: the drafter never proposes (plain decoding: no draft, build, prune or verify stage)
    devices: tuple[torch.device, ...]  # every device a stage computes on (the stage clock waits for them)


@dataclass
class Session:
    """One run of the loop."""

    stages: Stages
    settings: DecodeSettings
    target: TargetRows
    drafter: DrafterRows | None  # None when the pipeline never drafts
    clock: StageClock
    auto: AutoBudget | None
    alarm: AcceptanceAlarm | None = None  # the pipeline's "no draft accepted" alarm (None: not watched)
    rounds: int = 0  # rounds run so far (stage timing on an accelerator samples one round in `TIMING_EVERY`)
