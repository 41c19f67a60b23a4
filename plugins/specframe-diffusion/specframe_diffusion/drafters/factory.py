"""Building a diffusion drafter from its pipeline config and the target (the registered factories).

Steps: open and validate the checkpoint; check that it is the family the config asks for; check that it fits the
target (width, vocabulary, taps, mask token); load the backbone in the chosen dtype/device; pick the embedding and
LM head (the target's, or the DeepSeek checkpoint's own copies); pick the draft vocabulary (``draft_vocab:``, else the
checkpoint's own ``d2t`` / ``t2d``, else the full one); ask the target for the drafter's taps.
"""

from __future__ import annotations

import torch
from torch import nn

from specframe.cpu_linear import NEVER, kernels_named, pack_linear_layers, packable
from specframe.draft_vocab import DraftVocab, load_draft_vocab
from specframe.errors import CheckpointError
from specframe.interfaces import BuildContext
from specframe.placement import resolve_device, resolve_dtype
from specframe_diffusion.checkpoint.loader import CheckpointFiles, open_checkpoint
from specframe_diffusion.draft_config import DraftFamily
from specframe_diffusion.drafters.block_drafter import BlockDiffusionDrafter
from specframe_diffusion.drafters.configs import DiffusionDrafterConfig
from specframe_diffusion.target_access import TargetParts, check_fits_target, target_parts

_FAMILY_HINT = {
    "dflash": "use `drafter: {type: dflash}` for z-lab DFlash checkpoints (no dflash_config.projector_type)",
    "domino": "use `drafter: {type: domino}` for Domino checkpoints (dflash_config.projector_type: domino)",
    "dspark": "use `drafter: {type: dspark}` for DSpark checkpoints (markov_rank / projector_type: dspark)",
}


def resolve_dtype_device(dtype: str, device: str, parts: TargetParts) -> tuple[torch.dtype, torch.device]:
    """``auto`` follows the target (:mod:`specframe.placement`)."""
    return (resolve_dtype(dtype, field="drafter.dtype", follow=parts.dtype),
            resolve_device(device, field="drafter.device", follow=parts.device))


def _own_embeddings(files: CheckpointFiles, dtype: torch.dtype,
                    device: torch.device) -> tuple[nn.Embedding, nn.Linear]:
    """The DeepSeek layout's own frozen ``embed_tokens`` / ``lm_head`` copies."""
    state = files.group_state("embeddings", dtype=dtype, device=device)
    vocab, hidden = state["embed_tokens.weight"].shape
    embed = nn.Embedding(vocab, hidden, device="meta")
    head = nn.Linear(hidden, vocab, bias=False, device="meta")
    embed.weight = nn.Parameter(state["embed_tokens.weight"], requires_grad=False)
    head.weight = nn.Parameter(state["lm_head.weight"], requires_grad=False)
    return embed, head


def resolve_draft_vocab(setting: str | None, files: CheckpointFiles, target_vocab_size: int) -> DraftVocab | None:
    """The pipeline's ``draft_vocab`` file, ``full``, or the checkpoint's own mapping; checked against the target."""
    if setting == "full":
        return None
    vocab = load_draft_vocab(setting) if setting is not None else files.draft_vocab()
    if vocab is not None:
        vocab.check_target(target_vocab_size)
    return vocab


def build_block_drafter(config: DiffusionDrafterConfig, ctx: BuildContext,
                        family: DraftFamily) -> BlockDiffusionDrafter:
    component = f"drafter '{config.type}'"
    files = open_checkpoint(config.checkpoint)
    cfg = files.config
    if cfg.family != family:
        raise CheckpointError(
            f"{component}: checkpoint {files.directory} is a {cfg.family} checkpoint, not {family}",
            hint=_FAMILY_HINT[cfg.family],
        )
    parts = target_parts(ctx.target, component=component)
    check_fits_target(cfg, parts, source=str(files.directory))
    dtype, device = resolve_dtype_device(config.dtype, config.device, parts)
    backbone = files.load_backbone(dtype=dtype, device=device)
    if config.cpu_linear == "auto":  # the target's measured rule, where packing applies to the backbone
        kernels = getattr(ctx.target, "linear_kernels", NEVER) if packable(backbone) else NEVER
    else:
        kernels = kernels_named(config.cpu_linear)
    if kernels.uses_onednn:
        pack_linear_layers(backbone, what=f"{component}'s backbone", kernels=kernels, field="drafter.cpu_linear",
                           hint="set drafter.cpu_linear: default (or drafter.dtype: float32 on a CPU)")
    if cfg.layout == "deepseek":
        embed, head = _own_embeddings(files, dtype, device)
    else:
        embed, head = parts.embed_tokens, parts.lm_head
    draft_vocab = resolve_draft_vocab(config.draft_vocab, files, parts.vocab_size)
    return BlockDiffusionDrafter(backbone, cfg, embed, head, top_k=config.top_k, name=config.type,
                                 draft_vocab=draft_vocab)
