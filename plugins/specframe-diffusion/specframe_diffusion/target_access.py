"""What the diffusion drafters need from the target: its token embedding, LM head, width, depth and vocabulary.

DFlash and Domino checkpoints own no embedding and no LM head; they use the target's (frozen, shared). The
Domino GRU reads the target's embedding of chosen tokens too. A target adapter offers these by implementing
:class:`specframe.interfaces.SharedEmbeddings` (as :class:`specframe_hf.HFTarget` does); nothing else about the
adapter is assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from specframe.errors import CheckpointError, ConfigError
from specframe.interfaces import SharedEmbeddings, TargetModel
from specframe_diffusion.draft_config import DraftModelConfig


@dataclass(frozen=True)
class TargetParts:
    """Shared modules and facts of a target model."""

    embed_tokens: nn.Module  # token ids [..] -> [.., H]
    lm_head: nn.Module  # [.., H] -> [.., V]
    hidden_size: int
    vocab_size: int
    num_layers: int | None
    device: torch.device
    dtype: torch.dtype


def target_parts(target: TargetModel | None, *, component: str) -> TargetParts:
    """Read the shared modules off ``target``; errors name ``component`` (e.g. "drafter 'dflash'")."""
    if target is None:
        raise ConfigError(f"{component} needs the target model, but none was built",
                          hint="give the pipeline a `target:` section (type: hf)")
    if not isinstance(target, SharedEmbeddings):
        raise ConfigError(
            f"{component} shares the target's token embedding and LM head, but the {type(target).__name__} "
            "target does not implement SharedEmbeddings (input_embeddings() / output_embeddings())",
            hint="use the `hf` target adapter (a transformers causal LM)",
        )
    embed, head = target.input_embeddings(), target.output_embeddings()
    weight = embed.weight  # [V, H]
    num_layers = target.num_layers()
    return TargetParts(
        embed_tokens=embed,
        lm_head=head,
        hidden_size=int(weight.shape[1]),
        vocab_size=int(getattr(target, "vocab_size", None) or head.weight.shape[0]),
        num_layers=int(num_layers) if num_layers is not None else None,
        device=weight.device,
        dtype=weight.dtype,
    )


def check_fits_target(cfg: DraftModelConfig, parts: TargetParts, *, source: str) -> None:
    """Raise :class:`CheckpointError` if the drafter's width, vocabulary, taps or mask token do not fit."""
    if cfg.hidden_size != parts.hidden_size:
        raise CheckpointError(
            f"{source}: the drafter's hidden_size is {cfg.hidden_size} but the target's is {parts.hidden_size}",
            hint="use the drafter trained for this target (e.g. Qwen3-4B drafters with Qwen/Qwen3-4B)",
        )
    if cfg.vocab_size != parts.vocab_size:
        raise CheckpointError(
            f"{source}: the drafter's vocab_size is {cfg.vocab_size} but the target's is {parts.vocab_size}",
            hint="drafter and target must share one tokenizer and vocabulary",
        )
    if parts.num_layers is not None:
        bad = [i for i in cfg.target_layer_ids if not 0 <= i < parts.num_layers]
        if bad:
            raise CheckpointError(
                f"{source}: target_layer_ids {list(cfg.target_layer_ids)} name layer(s) {bad}, but the target "
                f"has {parts.num_layers} decoder layers",
                hint="use the drafter trained for this target (its taps must be target layers)",
            )
    if not 0 <= cfg.mask_token_id < parts.vocab_size:
        raise CheckpointError(
            f"{source}: mask_token_id {cfg.mask_token_id} is outside the vocabulary (size {parts.vocab_size})",
            hint="the mask token must be a row of the embedding table (151669 for Qwen3)",
        )
