"""Published drafter checkpoints: config parsing, key layouts, validation, loading and atomic saving."""

from specframe_diffusion.checkpoint.key_layout import TensorSlot, checkpoint_layout
from specframe_diffusion.checkpoint.loader import (
    CheckpointFiles,
    DraftCheckpoint,
    load_checkpoint,
    open_checkpoint,
    save_checkpoint,
)
from specframe_diffusion.draft_config import DraftModelConfig, build_target_layer_ids

__all__ = [
    "CheckpointFiles",
    "DraftCheckpoint",
    "DraftModelConfig",
    "TensorSlot",
    "build_target_layer_ids",
    "checkpoint_layout",
    "load_checkpoint",
    "open_checkpoint",
    "save_checkpoint",
]
