"""Training-time forward of the DFlash backbone over many anchor blocks at once, and its initialisation.

At inference the backbone (:class:`specframe_diffusion.models.DFlashBackbone`) runs one block over a cache of
context keys/values. Training runs ``K`` blocks per sequence in one pass with the *same modules* (so the state dict
keeps the published key layout):

    ctx = hidden_norm(fc(taps * tap_scale))                     # [S, T, H], positions 0..T-1
    blocks: K x bs block embeddings at positions a_k .. a_k+bs-1  # [S, K*bs, H]
    per layer: Q from the block stream, K/V from [ctx ; block stream] (KV injection), RoPE at true positions,
               block k sees context positions < a_k and its own bs positions (bidirectional), nothing else
    out = norm(h)                                                # [S, K*bs, H]

``tap_scale`` (1 / per-dimension RMS) is a fixed buffer; :func:`fold_tap_scale` folds it into ``fc`` for export,
so the exported drafter takes raw taps.
"""

from __future__ import annotations

import torch
from specframe_diffusion.models.backbone import DFlashBackbone
from specframe_diffusion.models.layers import apply_rotary
from torch import nn


def block_attention_mask(anchors: torch.Tensor, ctx_len: int, block_size: int) -> torch.Tensor:
    """Boolean visibility ``[S, 1, K*bs, T + K*bs]`` for anchors ``[S, K]`` (see the module docstring).

    Example: anchors ``[[2]]``, T = 4, bs = 2 -> each of the 2 block rows sees context columns 0, 1 and both block
    columns: ``[[1, 1, 0, 0, 1, 1], [1, 1, 0, 0, 1, 1]]``.
    """
    s, k = anchors.shape
    q = k * block_size
    ctx_cols = torch.arange(ctx_len, device=anchors.device)
    row_anchor = anchors.repeat_interleave(block_size, dim=1)  # [S, Q]
    ctx_vis = ctx_cols[None, None, :] < row_anchor[:, :, None]  # [S, Q, T]
    block_of = torch.arange(q, device=anchors.device) // block_size  # [Q]
    blk_vis = (block_of[:, None] == block_of[None, :]).expand(s, q, q)  # [S, Q, Q]
    return torch.cat([ctx_vis, blk_vis], dim=2)[:, None]


def multi_block_forward(backbone: DFlashBackbone, taps: torch.Tensor, tap_scale: torch.Tensor,
                        block_embeds: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """``taps [S, T, n*H]``, ``block_embeds [S, K*bs, H]``, ``anchors [S, K]`` -> block outputs ``[S, K*bs, H]``."""
    s, t, _ = taps.shape
    q = block_embeds.shape[1]
    bs = q // anchors.shape[1]
    device = taps.device
    ctx = backbone.hidden_norm(backbone.fc(taps * tap_scale))  # [S, T, H]
    block_pos = (anchors[:, :, None] + torch.arange(bs, device=device)).reshape(s, q)  # [S, Q]
    ctx_pos = torch.arange(t, device=device)[None].expand(s, t)
    all_pos = torch.cat([ctx_pos, block_pos], dim=1)  # [S, T + Q]
    cos, sin = backbone.rotary(all_pos.reshape(-1), block_embeds.dtype)
    cos = cos.view(s, 1, t + q, -1)
    sin = sin.view(s, 1, t + q, -1)
    mask = block_attention_mask(anchors, t, bs)  # [S, 1, Q, T + Q]
    h = block_embeds
    for layer in backbone.layers:
        attn_mod = layer.self_attn
        x = layer.input_layernorm(h)
        nh, kvh, d = attn_mod.num_heads, attn_mod.num_kv_heads, attn_mod.head_dim
        qh = attn_mod.q_norm(attn_mod.q_proj(x).view(s, q, nh, d)).transpose(1, 2)  # [S, nh, Q, D]
        kv_in = torch.cat([ctx, x], dim=1)  # [S, T + Q, H]
        kh = attn_mod.k_norm(attn_mod.k_proj(kv_in).view(s, t + q, kvh, d)).transpose(1, 2)
        vh = attn_mod.v_proj(kv_in).view(s, t + q, kvh, d).transpose(1, 2)
        qh = apply_rotary(qh, cos[:, :, t:], sin[:, :, t:])
        kh = apply_rotary(kh, cos, sin)
        if nh != kvh:
            kh = kh.repeat_interleave(nh // kvh, dim=1)
            vh = vh.repeat_interleave(nh // kvh, dim=1)
        out = nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=d**-0.5)
        h = h + attn_mod.o_proj(out.transpose(1, 2).reshape(s, q, nh * d))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return backbone.norm(h)


def anchor_block_features(backbone: DFlashBackbone, embed_weight: torch.Tensor, tap_scale: torch.Tensor,
                          taps: torch.Tensor, block_ids: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """The backbone's outputs ``[S*K, bs, H]`` for anchor blocks ``block_ids [S, K, bs]`` (slot 0 = the anchor's
    token, the rest masks), over ``taps [S, T, n*H]`` with anchors ``[S, K]`` (the inference block, in bulk)."""
    s, k, bs = block_ids.shape
    block = torch.full_like(block_ids, backbone.config.mask_token_id)
    block[..., 0] = block_ids[..., 0]
    embeds = nn.functional.embedding(block.view(s, k * bs), embed_weight)  # [S, K*bs, H]
    z = multi_block_forward(backbone, taps, tap_scale, embeds, anchors)
    return z.view(s * k, bs, -1)


def context_rows(backbone: DFlashBackbone, tap_scale: torch.Tensor, taps: torch.Tensor,
                 positions: torch.Tensor) -> torch.Tensor:  # [S, K, H]
    """``hidden_norm(fc(taps))`` at ``positions [S, K]`` of ``taps [S, T, n*H]``: the projected context rows."""
    rows = taps.gather(1, positions[..., None].expand(-1, -1, taps.shape[-1]))  # [S, K, n*H]
    return backbone.hidden_norm(backbone.fc(rows * tap_scale))


@torch.no_grad()
def init_from_target(backbone: DFlashBackbone, target: nn.Module, init_layers: tuple[int, ...] | None,
                     tap_rms: torch.Tensor, fc_init: str, num_taps: int, gen: torch.Generator) -> None:
    """Copy target layers into the draft layers; set ``fc`` to pass the last tap through (see the recipe)."""
    h = backbone.config.hidden_size
    for p in backbone.parameters():
        if p.dim() >= 2:
            p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    tlayers = target.model.layers
    if init_layers is not None:
        for draft, tid in zip(backbone.layers, init_layers, strict=True):
            src = tlayers[tid]
            draft.input_layernorm.weight.copy_(src.input_layernorm.weight)
            draft.post_attention_layernorm.weight.copy_(src.post_attention_layernorm.weight)
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(draft.self_attn, name).weight.copy_(getattr(src.self_attn, name).weight)
            for name in ("gate_proj", "up_proj", "down_proj"):
                getattr(draft.mlp, name).weight.copy_(getattr(src.mlp, name).weight)
        nxt = min(init_layers[0], len(tlayers) - 1)
        backbone.hidden_norm.weight.copy_(tlayers[nxt].input_layernorm.weight)
    backbone.norm.weight.copy_(target.model.norm.weight)
    if fc_init == "last_tap":
        fc = torch.zeros(h, num_taps * h)
        last = slice((num_taps - 1) * h, num_taps * h)
        fc[:, last] = torch.diag(tap_rms[last])  # undo the normalisation of the last tap
        backbone.fc.weight.copy_(fc + torch.randn(fc.shape, generator=gen) * 1e-3)


@torch.no_grad()
def fold_tap_scale(fc_weight: torch.Tensor, tap_scale: torch.Tensor) -> torch.Tensor:
    """``fc(x * scale) == (fc.weight * scale) x``: the exported ``fc.weight`` ``[H, n*H]``."""
    return fc_weight * tap_scale[None, :]
