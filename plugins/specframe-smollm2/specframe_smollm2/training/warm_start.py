"""Warm starts: continue training from a published-layout checkpoint (``init_from:`` in a recipe).

A drafter checkpoint stores ``fc.weight`` with the tap normalisation folded in (``W_export = W_train * scale``,
see :func:`~specframe_smollm2.training.draft_train_model.fold_tap_scale`); the warm start unfolds it with the
current run's ``scale`` so training continues in the normalised parameterisation:
``W_train = W_export / scale``. Exported-then-reloaded weights therefore give the same drafter exactly (up to the
checkpoint's bf16 rounding).

Example: ``specframe train recipes/smollm2/drafter-stage2.yaml`` starts from ``checkpoints/smollm2-135m/drafter``
and trains on more data; a head recipe with ``init_from: checkpoints/smollm2-135m/ar-head`` continues that head.
"""

from __future__ import annotations

from typing import Any

import torch
from specframe_diffusion.checkpoint import DraftModelConfig
from specframe_diffusion.checkpoint.loader import CheckpointFiles
from specframe_diffusion.models.backbone import DFlashBackbone
from torch import nn

from specframe.errors import CheckpointError
from specframe_smollm2.training.export import HEAD_GROUPS

_SHAPE_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size", "block_size",
                 "target_layer_ids", "mask_token_id")


def _check_same_shape(files: CheckpointFiles, config: dict[str, Any]) -> None:
    want = DraftModelConfig.from_dict(config)
    have = files.config
    diffs = [f"{name} {getattr(have, name)} (recipe: {getattr(want, name)})" for name in _SHAPE_FIELDS
             if list(_as_list(getattr(have, name))) != list(_as_list(getattr(want, name)))]
    if diffs:
        raise CheckpointError(f"init_from {files.directory} does not match the recipe's drafter: " + "; ".join(diffs),
                              hint="warm-start only from a checkpoint of the same shape, or set init_from: null")


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@torch.no_grad()
def warm_start_backbone(backbone: DFlashBackbone, tap_scale: torch.Tensor, files: CheckpointFiles,
                        config: dict[str, Any]) -> None:
    """Load ``files``' backbone into ``backbone`` (training parameterisation, ``tap_scale [n*H]``)."""
    _check_same_shape(files, config)
    state = files.group_state("backbone", dtype=torch.float32)
    state["fc.weight"] = state["fc.weight"] / tap_scale[None, :]  # [H, n*H]: unfold the normalisation
    backbone.load_state_dict(state, strict=True)


@torch.no_grad()
def warm_start_head(head: nn.Module, files: CheckpointFiles, kind: str) -> None:
    """Load the ``kind`` head of ``files`` (Domino, DSpark, DFlash2 selector or LiLiCorr) into ``head``."""
    group = HEAD_GROUPS[kind]
    state = files.group_state(group, dtype=torch.float32)
    mine = head.state_dict()
    wrong = [f"{k} {tuple(v.shape)} (recipe: {tuple(mine[k].shape)})" for k, v in state.items()
             if k in mine and v.shape != mine[k].shape]
    if wrong or set(state) != set(mine):
        raise CheckpointError(f"init_from {files.directory}: its {group} does not match the recipe's head: "
                              + ("; ".join(wrong) or f"keys {sorted(set(state) ^ set(mine))}"),
                              hint="use the same head sizes as the checkpoint, or set init_from: null")
    head.load_state_dict(state, strict=True)
