"""The published tensor names and shapes of each drafter family and layout, grouped by the module that owns them.

One table is the single source of truth for loading (missing / unexpected / shape checks) and saving. Each tensor
belongs to a *group* (the module that consumes it) under a *local* name (its key inside that module):

============== ===================================== =====================================================
group          z-lab layout key                      DeepSeek layout key
============== ===================================== =====================================================
backbone       ``fc.weight``, ``layers.{i}.*``, ...   same
domino_head    ``prefix_gru.*``, ``embed_proj.*``     (Domino ships only in the z-lab layout)
markov_head    ``markov_w1.weight``, ``gate_proj.*``  ``markov_head.markov_w1.weight``, ...
path_selector  ``candidate_selector.*`` (DFlash2)      (z-lab layout only)
lilicorr_head  ``lilicorr.*`` (LiLiCorr)               (z-lab layout only)
confidence     ``confidence_proj.{weight,bias}``      ``confidence_head.proj.{weight,bias}``
embeddings     (shared with the target, not stored)   ``embed_tokens.weight``, ``lm_head.weight``
============== ===================================== =====================================================

Example: a 1-layer DFlash drafter with H = 64, 2 taps has ``fc.weight`` of shape ``[64, 128]`` in group
``backbone`` under the local name ``fc.weight``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specframe_diffusion.draft_config import DraftModelConfig

Group = Literal["backbone", "domino_head", "markov_head", "path_selector", "lilicorr_head", "confidence",
                "embeddings"]

#: Keys some writers add that carry no information (RoPE tables are recomputed); accepted and ignored.
IGNORED_SUFFIXES: tuple[str, ...] = ("rotary_emb.inv_freq",)

#: The optional EAGLE-3 reduced-vocabulary mapping (:mod:`specframe.draft_vocab`); its shapes depend on the
#: subset, so it is checked by :meth:`~specframe_diffusion.checkpoint.loader.CheckpointFiles.draft_vocab`.
VOCAB_MAP_KEYS: tuple[str, ...] = ("d2t", "t2d")


@dataclass(frozen=True)
class TensorSlot:
    """One expected tensor: its published key, owning group, name inside that group, and shape."""

    key: str
    group: Group
    local: str
    shape: tuple[int, ...]


def backbone_shapes(cfg: DraftModelConfig) -> dict[str, tuple[int, ...]]:
    """Local names and shapes of the DFlash backbone (docs/concepts/block-drafters.md)."""
    h, inter, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q_out, kv_out = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    shapes: dict[str, tuple[int, ...]] = {
        "fc.weight": (h, cfg.num_taps * h),
        "hidden_norm.weight": (h,),
        "norm.weight": (h,),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        for name, out_dim, in_dim in (("q_proj", q_out, h), ("k_proj", kv_out, h), ("v_proj", kv_out, h),
                                      ("o_proj", h, q_out)):
            shapes[f"{p}self_attn.{name}.weight"] = (out_dim, in_dim)
            if cfg.attention_bias:
                shapes[f"{p}self_attn.{name}.bias"] = (out_dim,)
        shapes[p + "self_attn.q_norm.weight"] = (hd,)
        shapes[p + "self_attn.k_norm.weight"] = (hd,)
        shapes[p + "mlp.gate_proj.weight"] = (inter, h)
        shapes[p + "mlp.up_proj.weight"] = (inter, h)
        shapes[p + "mlp.down_proj.weight"] = (h, inter)
    return shapes


def domino_head_shapes(cfg: DraftModelConfig) -> dict[str, tuple[int, ...]]:
    """Domino GRU correction head (docs/concepts/correction-heads.md): GRU without biases, then Linear-SiLU-Linear."""
    h, g, e, v = cfg.hidden_size, cfg.gru_hidden_dim or 0, cfg.emb_dim or 0, cfg.vocab_size
    return {
        "prefix_gru.weight_ih_l0": (3 * g, h),
        "prefix_gru.weight_hh_l0": (3 * g, g),
        "embed_proj.0.weight": (e, h + g),
        "embed_proj.2.weight": (v, e),
    }


def markov_head_shapes(cfg: DraftModelConfig) -> dict[str, tuple[int, ...]]:
    """DSpark Markov head (docs/concepts/correction-heads.md); gated and rnn projections carry biases."""
    h, r, v = cfg.hidden_size, cfg.markov_rank or 0, cfg.vocab_size
    shapes: dict[str, tuple[int, ...]] = {"markov_w1.weight": (v, r), "markov_w2.weight": (v, r)}
    if cfg.markov_head_type == "gated":
        shapes["gate_proj.weight"] = (r, h + r)
        shapes["gate_proj.bias"] = (r,)
    elif cfg.markov_head_type == "rnn":
        shapes["joint_proj.weight"] = (3 * r, 2 * r + h)
        shapes["joint_proj.bias"] = (3 * r,)
    return shapes


def path_selector_shapes(cfg: DraftModelConfig) -> dict[str, tuple[int, ...]]:
    """DFlash2's path selector (z-lab keys under ``candidate_selector.``): two codebooks and a projection.

    With a reduced draft vocabulary stored beside it (``draft_vocab_size``, d2t / t2d) the codebooks have one row
    per draft token plus one for every token outside it (:class:`specframe_trees.heads.PathSelectorHead`).
    """
    v = cfg.vocab_size if cfg.draft_vocab_size is None else cfg.draft_vocab_size + 1
    r, h = cfg.selector_rank or 0, cfg.hidden_size
    return {"predecessor_codebook": (v, r), "successor_codebook": (v, r), "hidden_projection.weight": (r, h)}


def lilicorr_head_shapes(cfg: DraftModelConfig) -> dict[str, tuple[int, ...]]:
    """LiLiCorr's lattice reranker (keys under ``lilicorr.``; :mod:`specframe_trees.heads.lattice` names them)."""
    geo = cfg.lilicorr
    if geo is None:
        return {}
    d, h, f, n, k = cfg.hidden_size, geo.hidden_size, geo.factor_dim, geo.num_heads, geo.candidate_topk
    inner = int(h * geo.mlp_ratio)
    shapes: dict[str, tuple[int, ...]] = {}
    if h != d:
        shapes |= {"token_proj.weight": (h, d), "token_proj.bias": (h,)}
    shapes |= {
        "pass_hidden_proj.weight": (h, d), "pass_hidden_proj.bias": (h,),
        "feature_mlp.0.weight": (5,), "feature_mlp.0.bias": (5,),
        "feature_mlp.1.weight": (h, 5), "feature_mlp.1.bias": (h,),
        "feature_mlp.3.weight": (h, h), "feature_mlp.3.bias": (h,),
        "slot_embedding": (1, 1, cfg.num_slots, 1, h), "rank_embedding": (1, 1, 1, k, h),
        "relative_slot_bias": (n, 2 * cfg.block_size - 1), "same_slot_bias": (n,),
        "context_proj.weight": (h, d), "context_proj.bias": (h,),
    }
    for i in range(geo.num_layers):
        p = f"layers.{i}."
        shapes |= {
            p + "attn_norm.weight": (h,), p + "attn.in_proj_weight": (3 * h, h), p + "attn.in_proj_bias": (3 * h,),
            p + "attn.out_proj.weight": (h, h), p + "attn.out_proj.bias": (h,), p + "mlp_norm.weight": (h,),
            p + "mlp.0.weight": (inner, h), p + "mlp.0.bias": (inner,), p + "mlp.2.weight": (h, inner),
            p + "mlp.2.bias": (h,),
        }
    shapes |= {"output_norm.weight": (h,), "anchor_norm.weight": (h,), "factor_input_proj.weight": (h, 3 * h),
               "factor_input_proj.bias": (h,)}
    for head in ("out_head", "in_head", "anchor_out_head"):
        shapes |= {f"{head}.weight": (f, h), f"{head}.bias": (f,)}
    return shapes


def confidence_shapes(cfg: DraftModelConfig) -> dict[str, tuple[int, ...]]:
    """DSpark confidence head: ``Linear(H [+ r] -> 1)``; kept so that saving reproduces the checkpoint."""
    in_dim = cfg.hidden_size + ((cfg.markov_rank or 0) if cfg.confidence_with_markov else 0)
    return {"weight": (1, in_dim), "bias": (1,)}


def checkpoint_layout(cfg: DraftModelConfig) -> list[TensorSlot]:
    """Every tensor a checkpoint of this config must hold, under its published key."""
    slots = [] if cfg.head_only else [TensorSlot(k, "backbone", k, s) for k, s in backbone_shapes(cfg).items()]
    if cfg.family == "domino":
        slots += [TensorSlot(k, "domino_head", k, s) for k, s in domino_head_shapes(cfg).items()]
    if cfg.family == "dspark":
        prefix = "markov_head." if cfg.layout == "deepseek" else ""
        slots += [TensorSlot(prefix + k, "markov_head", k, s) for k, s in markov_head_shapes(cfg).items()]
    if cfg.selector_rank is not None:
        slots += [TensorSlot("candidate_selector." + k, "path_selector", k, s)
                  for k, s in path_selector_shapes(cfg).items()]
    if cfg.lilicorr is not None:
        slots += [TensorSlot("lilicorr." + k, "lilicorr_head", k, s) for k, s in lilicorr_head_shapes(cfg).items()]
    if cfg.confidence_head:
        prefix = "confidence_head.proj." if cfg.layout == "deepseek" else "confidence_proj."
        slots += [TensorSlot(prefix + k, "confidence", k, s) for k, s in confidence_shapes(cfg).items()]
    if cfg.layout == "deepseek":
        v, h = cfg.vocab_size, cfg.hidden_size
        slots += [TensorSlot("embed_tokens.weight", "embeddings", "embed_tokens.weight", (v, h)),
                  TensorSlot("lm_head.weight", "embeddings", "lm_head.weight", (v, h))]
    return slots


def key_aliases(cfg: DraftModelConfig) -> dict[str, str]:
    """Alternative published spellings -> the layout's key (both DSpark head nestings occur in the wild)."""
    if cfg.family != "dspark":
        return {}
    aliases: dict[str, str] = {}
    for slot in checkpoint_layout(cfg):
        if slot.group == "markov_head":
            flat, nested = slot.local, "markov_head." + slot.local
            aliases[flat if cfg.layout == "deepseek" else nested] = slot.key
    return aliases
