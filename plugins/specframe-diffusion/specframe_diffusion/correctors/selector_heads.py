"""The ``path_selector`` and ``lilicorr`` correctors: heads that ride on a DFlash backbone's checkpoint.

* ``path_selector``: DFlash2's path selector (``candidate_selector.*``, ``dflash_config.selector_rank`` /
  ``selector_top_k``) in a :class:`specframe_trees.correctors.PathSelectorCorrector`; every slot is corrected with
  the previous path token (the root for slot 0) as predecessor, over the first ``top_k`` candidates.
* ``lilicorr``: LiLiCorr's lattice reranker (``lilicorr.*``, ``projector_type: lilicorr``) in a
  :class:`specframe_trees.correctors.LatticeCorrector`; its candidates are embedded with the *target's* token
  embedding, and its anchor is the checkpoint's ``lilicorr_anchor``: LiLiCorr's projected target row before the
  block (``target_row``, what a published export without the field was trained with; the block drafter hands it
  over in ``proposal.extras["context_row"]``) or specframe's root-token embedding (``root_embedding``).

Both read the checkpoint named by their own ``checkpoint:`` or, by default, the drafter's, whose family stays
DFlash (the ``dflash`` drafter loads the backbone of the same directory; a head-only export,
``dflash_config.head_only``, leaves the backbone to the base drafter's directory), and load only the head's tensors
into a head built on the ``meta`` device. A path selector stored with a draft vocabulary (``d2t`` / ``t2d``) has
codebooks over that vocabulary plus one shared row.

Example::

    drafter:   {type: dflash, checkpoint: checkpoints/smollm2-135m/drafter, top_k: 16}
    corrector: {type: path_selector, checkpoint: checkpoints/smollm2-135m/path-selector}   # a head-only export
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from specframe_trees.correctors import LatticeCorrector, PathSelectorCorrector
from specframe_trees.heads import LatticeHead, LatticeHeadSizes, PathSelectorHead, PathSelectorSizes

from specframe.config.bounds import MAX_CANDIDATES
from specframe.errors import CheckpointError
from specframe.interfaces import BuildContext
from specframe_diffusion.checkpoint.head_base import check_same_vocabulary
from specframe_diffusion.correctors.checkpoint_heads import (
    CheckpointHeadConfig,
    open_head_checkpoint,
    pipeline_draft_vocab,
)
from specframe_diffusion.drafters.factory import resolve_dtype_device
from specframe_diffusion.target_access import check_fits_target, target_parts


class PathSelectorCorrectorConfig(CheckpointHeadConfig):
    """DFlash2's path selector from a DFlash2 checkpoint."""

    type: Literal["path_selector"] = "path_selector"
    top_k: int | None = Field(None, ge=1, le=MAX_CANDIDATES,
                              description="candidates scored per slot; default: the checkpoint's selector_top_k")


class LiLiCorrCorrectorConfig(CheckpointHeadConfig):
    """LiLiCorr's candidate-lattice reranker from a LiLiCorr checkpoint."""

    type: Literal["lilicorr"] = "lilicorr"
    top_k: int | None = Field(None, ge=1, le=MAX_CANDIDATES,
                              description="candidates per slot in the lattice (at most the trained "
                                          "lilicorr_candidate_topk); default: that value")


def build_path_selector_corrector(config: PathSelectorCorrectorConfig, ctx: BuildContext) -> PathSelectorCorrector:
    files = open_head_checkpoint(config, ctx, "dflash", "path_selector")
    cfg = files.config
    parts = target_parts(ctx.target, component=f"corrector '{config.type}'")
    check_fits_target(cfg, parts, source=str(files.directory))
    dtype, device = resolve_dtype_device(config.dtype, config.device, parts)
    vocab = files.draft_vocab()  # the codebooks' draft vocabulary, when the selector was trained over one
    check_same_vocabulary(vocab, pipeline_draft_vocab(ctx), component=f"corrector '{config.type}'")
    sizes = PathSelectorSizes(vocab_size=cfg.vocab_size, rank=cfg.selector_rank or 0, hidden_size=cfg.hidden_size,
                              top_k=cfg.selector_top_k or 0, codebook_rows=None if vocab is None else vocab.size + 1)
    head = PathSelectorHead(sizes, device="meta")
    head.load_state_dict(files.group_state("path_selector", dtype=dtype, device=device), strict=True, assign=True)
    head.set_vocabulary(None if vocab is None else vocab.target_ids)
    head.requires_grad_(False)
    return PathSelectorCorrector(head, top_k=config.top_k or cfg.selector_top_k, normalize=config.normalize,
                                 name=config.type)


def build_lilicorr_corrector(config: LiLiCorrCorrectorConfig, ctx: BuildContext) -> LatticeCorrector:
    files = open_head_checkpoint(config, ctx, "dflash", "lilicorr_head")
    cfg = files.config
    geo = cfg.lilicorr
    if geo is None:  # open_head_checkpoint found the group, so the geometry was read
        raise CheckpointError(f"{files.directory}: no lilicorr_* geometry in config.json")
    if config.top_k is not None and config.top_k > geo.candidate_topk:
        raise CheckpointError(f"corrector '{config.type}': top_k {config.top_k} is more than the "
                              f"{geo.candidate_topk} candidates per slot the head was trained on",
                              hint=f"use top_k <= {geo.candidate_topk}, or leave it unset")
    parts = target_parts(ctx.target, component=f"corrector '{config.type}'")
    check_fits_target(cfg, parts, source=str(files.directory))
    dtype, device = resolve_dtype_device(config.dtype, config.device, parts)
    sizes = LatticeHeadSizes(model_hidden_size=cfg.hidden_size, hidden_size=geo.hidden_size,
                             num_layers=geo.num_layers, num_heads=geo.num_heads, mlp_ratio=geo.mlp_ratio,
                             num_slots=cfg.num_slots, block_size=cfg.block_size, candidate_topk=geo.candidate_topk,
                             factor_dim=geo.factor_dim, rms_norm_eps=cfg.rms_norm_eps, vector_eps=geo.vector_eps,
                             logit_scale=geo.logit_scale, unary=geo.unary)
    head = LatticeHead(sizes, device="meta")
    head.load_state_dict(files.group_state("lilicorr_head", dtype=dtype, device=device), strict=True, assign=True)
    head.requires_grad_(False).eval()
    embed_weight: torch.Tensor = parts.embed_tokens.weight.detach().to(device)  # [V, D], shared, not copied
    return LatticeCorrector(head, embed_weight, top_k=config.top_k, name=config.type, anchor=geo.anchor)
