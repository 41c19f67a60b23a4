"""Writing trained models in the published z-lab layouts through the diffusion plugin's ``save_checkpoint``.

* drafter -> DFlash config (``dflash_config.shift_label: true``), backbone keys only;
* ar_head -> Domino config (``projector_type: domino``, ``pure_draft_prefix_len: 1``), backbone + ``prefix_gru.*`` /
  ``embed_proj.*``;
* markov_head -> z-lab-compatible DSpark config (``projector_type: dspark``), backbone + ``markov_w1/w2``.
* path_selector -> the drafter's DFlash config plus ``selector_rank`` / ``selector_top_k`` (SGLang's switch for
  DFlash2's selector), ``candidate_selector.*``, and with a draft vocabulary its ``d2t`` / ``t2d`` and
  ``draft_vocab_size`` (the codebooks' rows);
* lattice_head -> ``projector_type: lilicorr`` with the ``lilicorr_*`` geometry (Model-Optimizer's fields, plus
  ``lilicorr_anchor`` / ``lilicorr_unary``), ``lilicorr.*``.

The two candidate heads are written without the frozen drafter they ride on (``dflash_config.head_only: true``):
pipelines load the drafter from the base drafter's directory and the corrector from this one, which keeps the
shipped checkpoints small.

Weights are stored in bfloat16. The tap normalisation is folded into ``fc.weight`` so the files take raw taps.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from specframe_diffusion.checkpoint import DraftCheckpoint, DraftModelConfig, checkpoint_layout, save_checkpoint
from specframe_diffusion.checkpoint.safetensors_dir import write_checkpoint_dir
from specframe_diffusion.draft_config import TRAINED_TAPS_KEY
from specframe_diffusion.models.backbone import DFlashBackbone
from torch import nn

from specframe.draft_vocab import DraftVocab
from specframe.files.outputs import MARKER_FILE, marker_text
from specframe_smollm2.training.draft_train_model import fold_tap_scale
from specframe_smollm2.training.recipe import HeadConfig


def drafter_config(target_cfg: Any, *, num_layers: int, block_size: int, mask_token_id: int,
                   taps: tuple[int, ...]) -> dict[str, Any]:
    """A z-lab DFlash ``config.json`` dict for a drafter of ``target_cfg`` (a transformers config)."""
    rope = getattr(target_cfg, "rope_parameters", None) or {}
    theta = float(rope.get("rope_theta", getattr(target_cfg, "rope_theta", 10000.0)))
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": target_cfg.hidden_size,
        "intermediate_size": target_cfg.intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": target_cfg.num_attention_heads,
        "num_key_value_heads": target_cfg.num_key_value_heads,
        "head_dim": target_cfg.hidden_size // target_cfg.num_attention_heads,
        "rms_norm_eps": float(target_cfg.rms_norm_eps),
        "rope_theta": theta,
        "max_position_embeddings": target_cfg.max_position_embeddings,
        "vocab_size": target_cfg.vocab_size,
        "attention_bias": False,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
        "layer_types": ["full_attention"] * num_layers,
        "use_sliding_window": False,
        "block_size": block_size,
        "num_target_layers": target_cfg.num_hidden_layers,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(taps), "shift_label": True},
        TRAINED_TAPS_KEY: list(taps),  # the loader refuses a config whose taps were reordered later
    }


#: The checkpoint group each head kind is stored under (:mod:`specframe_diffusion.checkpoint.key_layout`).
HEAD_GROUPS = {"ar_head": "domino_head", "markov_head": "markov_head", "path_selector": "path_selector",
               "lattice_head": "lilicorr_head"}


#: Head kinds exported without the backbone (``dflash_config.head_only``).
HEAD_ONLY_KINDS = ("path_selector", "lattice_head")


def head_config(base: DraftModelConfig, kind: str, head: HeadConfig,
                draft_vocab_size: int | None = None) -> dict[str, Any]:
    """The base drafter's config turned into the config of a checkpoint carrying the ``kind`` head
    (``draft_vocab_size``: the path selector's draft vocabulary, whose size sets its codebook rows)."""
    raw = copy.deepcopy(base.raw)
    raw.pop("torch_dtype", None)
    dflash = raw.setdefault("dflash_config", {})
    if kind == "ar_head":
        raw["architectures"] = ["DFlashDraftModel"]
        raw["emb_dim"] = head.emb_dim
        dflash.update(projector_type="domino", emb_dim=head.emb_dim, gru_hidden_dim=head.gru_hidden_dim,
                      pure_draft_prefix_len=1, shift_label=True)
    elif kind == "markov_head":
        raw["architectures"] = ["DSparkDraftModel"]
        dflash.update(projector_type="dspark", markov_rank=head.markov_rank, markov_head_type=head.markov_head_type,
                      shift_label=True)
    elif kind == "path_selector":
        raw["architectures"] = ["DFlashDraftModel"]
        dflash.update(selector_rank=head.selector_rank, selector_top_k=head.top_k, shift_label=True, head_only=True)
        if draft_vocab_size is not None:
            raw["draft_vocab_size"] = draft_vocab_size
    else:
        lat = head.lattice
        raw["architectures"] = ["DFlashDraftModel"]
        dflash.update(projector_type="lilicorr", shift_label=True, lilicorr_hidden_size=lat.hidden_size,
                      lilicorr_num_layers=lat.num_layers, lilicorr_num_heads=lat.num_heads,
                      lilicorr_mlp_ratio=lat.mlp_ratio, lilicorr_candidate_topk=head.top_k,
                      lilicorr_factor_dim=lat.factor_dim, lilicorr_vector_eps=lat.vector_eps,
                      lilicorr_logit_scale=lat.logit_scale, lilicorr_anchor=lat.anchor, lilicorr_unary=lat.unary,
                      head_only=True)
    return raw


def export_backbone(backbone: DFlashBackbone, tap_scale: torch.Tensor) -> DFlashBackbone:
    """A float32 copy of ``backbone`` whose ``fc`` takes raw taps."""
    out = copy.deepcopy(backbone).float()
    with torch.no_grad():
        out.fc.weight.copy_(fold_tap_scale(backbone.fc.weight.float(), tap_scale.float()))
    return out


def output_kind(kind: str) -> str:
    """The output marker's kind of a ``kind`` recipe's export (:mod:`specframe.files.outputs`): a training run
    replaces only the export of an earlier run of the same kind."""
    return f"train {kind}"


def write_export(directory: Path, config: dict[str, Any], backbone: DFlashBackbone, tap_scale: torch.Tensor,
                 head: nn.Module | None, kind: str, *, source: str) -> Path:
    """Save in the published layout (bf16), atomically, with the output marker (``source``: the recipe's name);
    returns the directory."""
    cfg = DraftModelConfig.from_dict(config, source=str(directory / "config.json"))
    marker = {MARKER_FILE: marker_text(output_kind(kind), source)}
    if kind in HEAD_ONLY_KINDS and head is not None:
        return _write_head_only(directory, cfg, head, kind, marker)
    others: dict = {}
    if head is not None:
        state = {k: v.detach().float() for k, v in head.state_dict().items()}
        others[HEAD_GROUPS[kind]] = state
    ckpt = DraftCheckpoint(cfg, export_backbone(backbone, tap_scale), others)
    return save_checkpoint(ckpt, directory, dtype=torch.bfloat16, extra_files=marker)


def _write_head_only(directory: Path, cfg: DraftModelConfig, head: nn.Module, kind: str,
                     marker: dict[str, str]) -> Path:
    """The head's tensors under their published keys (bf16), plus the path selector's draft vocabulary maps."""
    state = head.state_dict()
    tensors = {slot.key: state[slot.local].detach().to(torch.bfloat16) for slot in checkpoint_layout(cfg)}
    row_of = getattr(head, "row_of", None)
    if kind == "path_selector" and row_of is not None:
        size = int(row_of.max())  # the shared row's index = the draft vocabulary's size
        draft_ids = torch.empty(size, dtype=torch.long)
        inside = row_of < size
        draft_ids[row_of[inside].cpu()] = torch.nonzero(inside).view(-1).cpu()
        tensors |= DraftVocab.from_target_ids(draft_ids, cfg.vocab_size).tensors()
    config = dict(cfg.raw, torch_dtype="bfloat16")
    return write_checkpoint_dir(directory, config, tensors, extra_files=marker)
