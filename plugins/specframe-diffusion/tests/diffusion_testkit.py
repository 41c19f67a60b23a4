"""Test kit: tiny random drafter checkpoints written in the *published* layouts, and a from-scratch reference.

The checkpoint writer below spells every key and config field out by hand from the published descriptions
(docs/concepts/block-drafters.md, docs/concepts/correction-heads.md; z-lab ``config.json``; DeepSpec
``Qwen3DSparkModel`` state dicts; Model-Optimizer
DSpark exports). It deliberately does not use ``specframe_diffusion.checkpoint``, so loader tests check the
package against the layouts, not against itself.

The reference forward recomputes a block from the full committed context with explicit per-head loops in float64
and no cache, straight from the forward semantics (docs/concepts/block-drafters.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

# Tiny sizes shared with the specframe_hf tiny Qwen3 target: vocab 512, hidden 64, 4 heads, 2 KV heads, head_dim 16.
VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER = 512, 64, 4, 2, 16, 96
MASK_TOKEN = 511  # in the "padded" top of the vocabulary, like Qwen3's 151669
TARGET_LAYERS = 4
TAPS = [0, 2]
EMB_DIM, GRU_DIM, MARKOV_RANK = 16, 24, 12
SELECTOR_RANK, SELECTOR_TOP_K = 8, 4  # DFlash2 path selector (z-lab: 256, 16)
#: LiLiCorr geometry of the tiny checkpoints (dflash_config.lilicorr_*; lilicorr_hidden_size differs from HIDDEN).
LILICORR = {"lilicorr_hidden_size": 32, "lilicorr_num_layers": 2, "lilicorr_num_heads": 2, "lilicorr_mlp_ratio": 2.0,
            "lilicorr_candidate_topk": 4, "lilicorr_factor_dim": 8, "lilicorr_vector_eps": 1e-6,
            "lilicorr_logit_scale": 10.0}


def qwen3_fields(*, layers: int = 2, hidden: int = HIDDEN, vocab: int = VOCAB) -> dict[str, Any]:
    """The Qwen3 part of a drafter config.json, shaped like the published ones (plain RoPE, no sliding window)."""
    return {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": INTER,
        "layer_types": ["full_attention"] * layers,
        "max_position_embeddings": 512,
        "max_window_layers": layers,
        "model_type": "qwen3",
        "num_attention_heads": HEADS,
        "num_hidden_layers": layers,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "torch_dtype": "float32",
        "transformers_version": "4.57.1",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": vocab,
    }


def published_config(kind: str, *, layers: int = 2, block_size: int | None = None, head_type: str = "vanilla",
                     confidence: bool = True, taps: list[int] | None = None, hidden: int = HIDDEN,
                     vocab: int = VOCAB, mask: int = MASK_TOKEN, lilicorr_anchor: str | None = None) -> dict[str, Any]:
    """config.json of ``kind`` in {"dflash", "domino", "dspark_deepseek", "dspark_zlab", "dflash_deepseek",
    "dflash_selector", "dflash_lilicorr"}.

    ``dflash_selector`` is a DFlash checkpoint with DFlash2's path selector switched on the way SGLang reads it
    (``selector_rank`` / ``selector_top_k``); ``dflash_lilicorr`` a Model-Optimizer LiLiCorr export
    (``projector_type: lilicorr`` and the ``lilicorr_*`` geometry; no ``lilicorr_anchor``, which only specframe's
    exports write, unless ``lilicorr_anchor`` is given: the published head anchors on the projected target row).

    ``dflash_deepseek`` is DeepSpec's retrained DFlash: the DSpark model class with ``markov_rank: 0`` and no
    confidence head (``config/dflash/dflash_qwen3_4b.py``).
    """
    taps = list(TAPS if taps is None else taps)
    cfg = qwen3_fields(layers=layers, hidden=hidden, vocab=vocab)
    if kind in ("dspark_deepseek", "dflash_deepseek"):
        cfg.update({
            "architectures": ["Qwen3DSparkModel"],
            "block_size": block_size or 7,
            "enable_confidence_head": confidence and kind == "dspark_deepseek",
            "mask_token_id": mask,
            "num_anchors": 512,
            "num_target_layers": TARGET_LAYERS,
            "target_layer_ids": taps,
            "tie_word_embeddings": False,
        })
        if kind == "dspark_deepseek":
            cfg |= {"confidence_head_with_markov": True, "markov_head_type": head_type, "markov_rank": MARKOV_RANK}
        else:
            cfg["markov_rank"] = 0
        return cfg
    dflash: dict[str, Any] = {"mask_token_id": mask, "target_layer_ids": taps}
    cfg.update({
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "block_size": block_size or 16,
        "num_target_layers": TARGET_LAYERS,
        "tie_word_embeddings": False,
    })
    if kind == "domino":
        cfg["emb_dim"] = EMB_DIM
        dflash.update({"projector_type": "domino", "emb_dim": EMB_DIM, "gru_hidden_dim": GRU_DIM,
                       "pure_draft_prefix_len": 1, "shift_label": True})
    elif kind == "dflash_selector":
        dflash.update({"selector_rank": SELECTOR_RANK, "selector_top_k": SELECTOR_TOP_K, "shift_label": True})
    elif kind == "dflash_lilicorr":
        dflash.update({"projector_type": "lilicorr", "shift_label": True, **LILICORR})
        if lilicorr_anchor is not None:
            dflash["lilicorr_anchor"] = lilicorr_anchor
    elif kind == "dspark_zlab":
        cfg["architectures"] = ["DSparkDraftModel"]
        dflash.update({"projector_type": "dspark", "shift_label": True, "markov_rank": MARKOV_RANK,
                       "markov_head_type": head_type, "use_confidence_head": confidence})
    cfg["dflash_config"] = dflash
    return cfg


def published_keys(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Published key -> shape for a config made by :func:`published_config` (written out by hand)."""
    h, layers, v = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    taps = cfg.get("target_layer_ids") or cfg["dflash_config"]["target_layer_ids"]
    keys: dict[str, tuple[int, ...]] = {
        "fc.weight": (h, len(taps) * h),
        "hidden_norm.weight": (h,),
        "norm.weight": (h,),
    }
    for i in range(layers):
        keys |= {
            f"layers.{i}.input_layernorm.weight": (h,),
            f"layers.{i}.post_attention_layernorm.weight": (h,),
            f"layers.{i}.self_attn.q_proj.weight": (HEADS * HEAD_DIM, h),
            f"layers.{i}.self_attn.k_proj.weight": (KV_HEADS * HEAD_DIM, h),
            f"layers.{i}.self_attn.v_proj.weight": (KV_HEADS * HEAD_DIM, h),
            f"layers.{i}.self_attn.o_proj.weight": (h, HEADS * HEAD_DIM),
            f"layers.{i}.self_attn.q_norm.weight": (HEAD_DIM,),
            f"layers.{i}.self_attn.k_norm.weight": (HEAD_DIM,),
            f"layers.{i}.mlp.gate_proj.weight": (INTER, h),
            f"layers.{i}.mlp.up_proj.weight": (INTER, h),
            f"layers.{i}.mlp.down_proj.weight": (h, INTER),
        }
    dflash = cfg.get("dflash_config", {})
    if dflash.get("projector_type") == "domino":
        keys |= {
            "prefix_gru.weight_ih_l0": (3 * GRU_DIM, h),
            "prefix_gru.weight_hh_l0": (3 * GRU_DIM, GRU_DIM),
            "embed_proj.0.weight": (EMB_DIM, h + GRU_DIM),
            "embed_proj.2.weight": (v, EMB_DIM),
        }
    if dflash.get("selector_rank"):
        r = dflash["selector_rank"]
        keys |= {"candidate_selector.predecessor_codebook": (v, r), "candidate_selector.successor_codebook": (v, r),
                 "candidate_selector.hidden_projection.weight": (r, h)}
    if dflash.get("projector_type") == "lilicorr":
        keys |= lilicorr_keys(cfg)
    deepseek = "Qwen3DSparkModel" in cfg["architectures"]
    if deepseek:
        keys |= {"embed_tokens.weight": (v, h), "lm_head.weight": (v, h)}
    if (deepseek and cfg["markov_rank"] > 0) or dflash.get("projector_type") == "dspark":
        holder = cfg if deepseek else dflash
        prefix = "markov_head." if deepseek else ""
        r = holder["markov_rank"]
        keys |= {prefix + "markov_w1.weight": (v, r), prefix + "markov_w2.weight": (v, r)}
        if holder["markov_head_type"] == "gated":
            keys |= {prefix + "gate_proj.weight": (r, h + r), prefix + "gate_proj.bias": (r,)}
        if holder["markov_head_type"] == "rnn":
            keys |= {prefix + "joint_proj.weight": (3 * r, 2 * r + h), prefix + "joint_proj.bias": (3 * r,)}
        if deepseek and cfg["enable_confidence_head"]:
            keys |= {"confidence_head.proj.weight": (1, h + r), "confidence_head.proj.bias": (1,)}
        if not deepseek and dflash["use_confidence_head"]:
            keys |= {"confidence_proj.weight": (1, h + r), "confidence_proj.bias": (1,)}
    return keys


def lilicorr_keys(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """LiLiCorr's ``lilicorr.*`` keys, spelled from the public module (Model-Optimizer ``LiLiCorrHead``)."""
    d, dfc = cfg["hidden_size"], cfg["dflash_config"]
    h, n, k, f = dfc["lilicorr_hidden_size"], dfc["lilicorr_num_heads"], dfc["lilicorr_candidate_topk"], \
        dfc["lilicorr_factor_dim"]
    inner, bs = int(h * dfc["lilicorr_mlp_ratio"]), cfg["block_size"]
    slots = bs if dfc.get("shift_label") else bs - 1
    keys = {"token_proj.weight": (h, d), "token_proj.bias": (h,), "pass_hidden_proj.weight": (h, d),
            "pass_hidden_proj.bias": (h,), "feature_mlp.0.weight": (5,), "feature_mlp.0.bias": (5,),
            "feature_mlp.1.weight": (h, 5), "feature_mlp.1.bias": (h,), "feature_mlp.3.weight": (h, h),
            "feature_mlp.3.bias": (h,), "slot_embedding": (1, 1, slots, 1, h), "rank_embedding": (1, 1, 1, k, h),
            "relative_slot_bias": (n, 2 * bs - 1), "same_slot_bias": (n,), "context_proj.weight": (h, d),
            "context_proj.bias": (h,), "output_norm.weight": (h,), "anchor_norm.weight": (h,),
            "factor_input_proj.weight": (h, 3 * h), "factor_input_proj.bias": (h,)}
    for i in range(dfc["lilicorr_num_layers"]):
        keys |= {f"layers.{i}.attn_norm.weight": (h,), f"layers.{i}.attn.in_proj_weight": (3 * h, h),
                 f"layers.{i}.attn.in_proj_bias": (3 * h,), f"layers.{i}.attn.out_proj.weight": (h, h),
                 f"layers.{i}.attn.out_proj.bias": (h,), f"layers.{i}.mlp_norm.weight": (h,),
                 f"layers.{i}.mlp.0.weight": (inner, h), f"layers.{i}.mlp.0.bias": (inner,),
                 f"layers.{i}.mlp.2.weight": (h, inner), f"layers.{i}.mlp.2.bias": (h,)}
    for name in ("out_head", "in_head", "anchor_out_head"):
        keys |= {f"{name}.weight": (f, h), f"{name}.bias": (f,)}
    return {"lilicorr." + key: shape for key, shape in keys.items()}


def random_tensors(keys: dict[str, tuple[int, ...]], seed: int, scale: float = 0.2) -> dict[str, torch.Tensor]:
    """Norm weights near one, everything else Gaussian with std ``scale`` (drawn from a private generator)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, shape in sorted(keys.items()):
        noise = torch.randn(shape, generator=gen)
        out[key] = 1.0 + 0.1 * noise if key.endswith("norm.weight") else scale * noise
    return out


def write_published_checkpoint(directory: Path, kind: str, *, seed: int = 0, target: Any = None,
                               copy_embeddings: bool = True,
                               **config_kwargs: Any) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Write config.json + model.safetensors of ``kind``.

    DeepSeek-layout embeddings copy ``target``'s (as DeepSpec training does) unless ``copy_embeddings`` is False.
    """
    cfg = published_config(kind, **config_kwargs)
    tensors = random_tensors(published_keys(cfg), seed)
    if target is not None and copy_embeddings and "embed_tokens.weight" in tensors:
        tensors["embed_tokens.weight"] = target.get_input_embeddings().weight.detach().clone()
        tensors["lm_head.weight"] = target.get_output_embeddings().weight.detach().clone()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return cfg, tensors


# ------------------------------------------------------------------------------------ reference forward
def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def _rope(x: torch.Tensor, position: int, theta: float) -> torch.Tensor:
    """Rotate one head vector ``[D]``: pairs (i, i + D/2) by angle ``position * theta^(-2i/D)``."""
    d = x.shape[-1]
    out = x.clone()
    for i in range(d // 2):
        angle = position * theta ** (-2.0 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        a, b = x[i].item(), x[i + d // 2].item()
        out[i] = a * c - b * s
        out[i + d // 2] = b * c + a * s
    return out


def reference_block(weights: dict[str, torch.Tensor], cfg: dict[str, Any], context_taps: torch.Tensor,
                    block_embeds: torch.Tensor) -> torch.Tensor:
    """Backbone outputs ``[bs, H]`` for a block after ``start = len(context_taps)`` committed positions.

    No cache: every context position's keys/values are recomputed from its taps. float64 throughout.
    """
    w = {k: t.double() for k, t in weights.items()}
    theta = float(cfg["rope_theta"])
    start, bs = context_taps.shape[0], block_embeds.shape[0]
    groups = HEADS // KV_HEADS
    ctx = _rms(context_taps.double() @ w["fc.weight"].T, w["hidden_norm.weight"])  # [start, H]
    h = block_embeds.double()
    for layer in range(cfg["num_hidden_layers"]):
        p = f"layers.{layer}."
        x = _rms(h, w[p + "input_layernorm.weight"])
        seq = torch.cat([ctx, x])  # keys/values come from context and block alike
        q = (x @ w[p + "self_attn.q_proj.weight"].T).view(bs, HEADS, HEAD_DIM)
        k = (seq @ w[p + "self_attn.k_proj.weight"].T).view(start + bs, KV_HEADS, HEAD_DIM)
        v = (seq @ w[p + "self_attn.v_proj.weight"].T).view(start + bs, KV_HEADS, HEAD_DIM)
        q = _rms(q, w[p + "self_attn.q_norm.weight"])
        k = _rms(k, w[p + "self_attn.k_norm.weight"])
        heads_out = torch.zeros(bs, HEADS, HEAD_DIM, dtype=torch.float64)
        for head in range(HEADS):
            kv = head // groups
            keys = torch.stack([_rope(k[j, kv], j, theta) for j in range(start + bs)])
            for i in range(bs):
                query = _rope(q[i, head], start + i, theta)
                scores = keys @ query / math.sqrt(HEAD_DIM)  # non-causal: every key is visible
                heads_out[i, head] = torch.softmax(scores, dim=0) @ v[:, kv]
        h = h + heads_out.reshape(bs, HEADS * HEAD_DIM) @ w[p + "self_attn.o_proj.weight"].T
        y = _rms(h, w[p + "post_attention_layernorm.weight"])
        gate = y @ w[p + "mlp.gate_proj.weight"].T
        h = h + (gate * torch.sigmoid(gate) * (y @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    return _rms(h, w["norm.weight"])


def plain_greedy(model: Any, prompt: torch.Tensor, n: int) -> list[int]:
    """``n`` greedy tokens of a transformers LM after ``prompt`` ``[1, P]``, by full forwards (the reference)."""
    ids, out = prompt, []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(ids).logits[0, -1].argmax())
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return out
