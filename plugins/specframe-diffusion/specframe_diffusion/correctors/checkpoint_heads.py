"""The ``ar`` and ``markov`` correctors: the correction heads shipped inside Domino and DSpark checkpoints.

* ``ar``: Domino's GRU head (``prefix_gru.*``, ``embed_proj.*``) in a
  :class:`specframe_trees.correctors.GRUCorrector`. Its GRU reads the *target's* token embeddings; slot 0 stays
  uncorrected when the checkpoint says ``pure_draft_prefix_len: 1``; the low-rank fast form is the default.
* ``markov``: DSpark's Markov head (``markov_w1``, ``markov_w2``, ``gate_proj``/``joint_proj``; vanilla, gated or
  rnn from ``markov_head_type``) in a :class:`specframe_trees.correctors.MarkovCorrector`; slot 0 is corrected,
  with the root (bonus) token as its previous token.

Both read the checkpoint named by their own ``checkpoint:`` or, by default, the drafter's, and load only the head's
tensors into head modules built on the ``meta`` device (no random initialisation, no copies).

Example::

    drafter:   {type: domino, checkpoint: "${DOMINO_4B_DIR}", top_k: 64}
    corrector: {type: ar}                       # same directory as the drafter, slot 0 pure, low-rank form
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from pydantic import Field
from specframe_trees.correctors import GRUCorrector, MarkovCorrector, Normalize
from specframe_trees.heads import DominoGRUHead, GRUHeadSizes, MarkovHead, MarkovHeadSizes

from specframe.config.base import ComponentConfig
from specframe.draft_vocab import DraftVocab, load_draft_vocab
from specframe.errors import CheckpointError, ConfigError
from specframe.interfaces import BuildContext
from specframe_diffusion.checkpoint.head_base import check_head_base
from specframe_diffusion.checkpoint.key_layout import Group
from specframe_diffusion.checkpoint.loader import CheckpointFiles, open_checkpoint
from specframe_diffusion.checkpoint.safetensors_dir import CONFIG_FILE
from specframe_diffusion.draft_config import DraftModelConfig
from specframe_diffusion.drafters.configs import DtypeName
from specframe_diffusion.drafters.factory import resolve_dtype_device
from specframe_diffusion.target_access import check_fits_target, target_parts


class CheckpointHeadConfig(ComponentConfig):
    """Fields shared by the checkpoint-backed correctors."""

    checkpoint: str | None = Field(None, description="checkpoint directory holding the head; default: the "
                                                     "drafter's `checkpoint`")
    normalize: Normalize = Field("candidates", description="log-softmax over the K candidates of each parent "
                                                           "(DARTree) or over the full vocabulary")
    dtype: DtypeName = Field("auto", description="head dtype; auto = the target's")
    device: str = Field("auto", description="head device; auto = the target's")


class ARCorrectorConfig(CheckpointHeadConfig):
    """Domino's GRU correction head from a Domino checkpoint."""

    type: Literal["ar"] = "ar"
    pure_prefix_len: int | None = Field(None, ge=0, description="leading uncorrected slots; default: the "
                                                                "checkpoint's dflash_config.pure_draft_prefix_len")
    low_rank: bool = Field(True, description="low-rank fast form (W_z z once per round, K rows of W2); "
                                             "False runs nn.GRU and embed_proj over the whole vocabulary")


class MarkovCorrectorConfig(CheckpointHeadConfig):
    """DSpark's Markov correction head (vanilla / gated / rnn, read from the checkpoint)."""

    type: Literal["markov"] = "markov"
    pure_prefix_len: int = Field(0, ge=0, description="leading uncorrected slots (DSpark corrects slot 0 "
                                                      "with the root as previous token)")


def open_head_checkpoint(config: CheckpointHeadConfig, ctx: BuildContext, family: str,
                         group: Group | None = None) -> CheckpointFiles:
    """The corrector's checkpoint (its own or the drafter's), checked for family, head ``group`` and slot count."""
    drafter_cfg = getattr(ctx.pipeline, "drafter", None)
    drafter_ckpt = getattr(drafter_cfg, "checkpoint", None)
    path = config.checkpoint or drafter_ckpt
    if not path:
        raise ConfigError(f"corrector '{config.type}' needs a checkpoint, and the drafter has none",
                          hint=f"set corrector.checkpoint to the {family} checkpoint directory")
    files = open_checkpoint(path)
    if files.config.family != family or (group is not None and not files.has_group(group)):
        raise CheckpointError(
            f"corrector '{config.type}': checkpoint {files.directory} is a {files.config.family} checkpoint "
            f"without the {family if group is None else config.type} head",
            hint="use corrector `ar` with Domino checkpoints, `markov` with DSpark checkpoints, `path_selector` with "
                 "DFlash2 checkpoints (selector_rank), `lilicorr` with LiLiCorr checkpoints, or `identity`",
        )
    if drafter_ckpt and config.checkpoint and drafter_ckpt != config.checkpoint:
        drafter_slots = DraftModelConfig.from_file(Path(drafter_ckpt) / CONFIG_FILE).num_slots
        if drafter_slots != files.config.num_slots:
            raise CheckpointError(
                f"corrector '{config.type}' was trained for {files.config.num_slots} slots per block, the "
                f"drafter drafts {drafter_slots}",
                hint="use the head and the backbone of the same checkpoint",
            )
    # A head-only export: the drafter must be the one it was trained on (taps in order; weights by hash).
    check_head_base(files.config, files.directory, drafter_ckpt if config.checkpoint else None,
                    component=f"corrector '{config.type}'")
    return files


def pipeline_draft_vocab(ctx: BuildContext) -> DraftVocab | None:
    """The draft vocabulary the pipeline's drafter drafts from (its ``draft_vocab`` file, ``full``, or its
    checkpoint's own mapping); None for the full vocabulary or a drafter without a checkpoint."""
    drafter_cfg = getattr(ctx.pipeline, "drafter", None)
    setting, checkpoint = getattr(drafter_cfg, "draft_vocab", None), getattr(drafter_cfg, "checkpoint", None)
    if setting == "full" or (setting is None and not checkpoint):
        return None
    return load_draft_vocab(setting) if setting is not None else open_checkpoint(checkpoint).draft_vocab()


def build_ar_corrector(config: ARCorrectorConfig, ctx: BuildContext) -> GRUCorrector:
    files = open_head_checkpoint(config, ctx, "domino")
    cfg = files.config
    parts = target_parts(ctx.target, component=f"corrector '{config.type}'")
    check_fits_target(cfg, parts, source=str(files.directory))
    dtype, device = resolve_dtype_device(config.dtype, config.device, parts)
    sizes = GRUHeadSizes(hidden_size=cfg.hidden_size, gru_hidden=cfg.gru_hidden_dim or 0,
                         emb_dim=cfg.emb_dim or 0, vocab_size=cfg.vocab_size)
    head = DominoGRUHead(sizes, device="meta")
    head.load_state_dict(files.group_state("domino_head", dtype=dtype, device=device), strict=True, assign=True)
    head.requires_grad_(False)
    embed_weight: torch.Tensor = parts.embed_tokens.weight.detach().to(device)  # [V, H], shared, not copied
    prefix = cfg.pure_draft_prefix_len if config.pure_prefix_len is None else config.pure_prefix_len
    return GRUCorrector(head, embed_weight, pure_prefix_len=prefix, normalize=config.normalize,
                        low_rank=config.low_rank, name=config.type)


def build_markov_corrector(config: MarkovCorrectorConfig, ctx: BuildContext) -> MarkovCorrector:
    files = open_head_checkpoint(config, ctx, "dspark")
    cfg = files.config
    parts = target_parts(ctx.target, component=f"corrector '{config.type}'")
    check_fits_target(cfg, parts, source=str(files.directory))
    dtype, device = resolve_dtype_device(config.dtype, config.device, parts)
    sizes = MarkovHeadSizes(vocab_size=cfg.vocab_size, rank=cfg.markov_rank or 0, hidden_size=cfg.hidden_size,
                            variant=cfg.markov_head_type or "vanilla")
    head = MarkovHead(sizes, device="meta")
    head.load_state_dict(files.group_state("markov_head", dtype=dtype, device=device), strict=True, assign=True)
    head.requires_grad_(False)
    return MarkovCorrector(head, pure_prefix_len=config.pure_prefix_len, normalize=config.normalize,
                           name=config.type)
