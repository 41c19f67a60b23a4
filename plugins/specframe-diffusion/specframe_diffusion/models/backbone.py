"""The DFlash block-diffusion backbone shared by DFlash, Domino and DSpark (docs/concepts/block-drafters.md).

Per round, with ``C`` new context positions (target taps of freshly committed tokens) and a block of ``bs``
token embeddings ``[bonus, MASK, ..., MASK]``::

    ctx = hidden_norm(fc(taps))                              # [B, C, H], shared by every layer
    for each layer (pre-norm Qwen3 block on the block stream only):
        x = input_layernorm(h)
        Q = rope(q_norm(q_proj(x)))                           # block queries, positions start..start+bs-1
        K = rope(k_norm(k_proj([ctx ; x])))                   # "KV injection": context and block, same weights
        V = v_proj([ctx ; x])
        h = h + o_proj(attention(Q, [cached K ; K], [cached V ; V]))   # NON-causal, no mask
        h = h + mlp(post_attention_layernorm(h))
    return norm(h)                                            # [B, bs, H]

RoPE positions run over ``cache.length .. cache.length + C + bs - 1``: context keys first, then the block. The
module owns no embedding and no LM head (the target's are used, or the DeepSeek checkpoint's copies). Parameter
names equal the published keys (``fc.weight``, ``layers.0.self_attn.q_proj.weight``, ...).
"""

from __future__ import annotations

import torch
from torch import nn

from specframe_diffusion.draft_config import DraftModelConfig
from specframe_diffusion.models.draft_cache import DraftKVCache
from specframe_diffusion.models.layers import RMSNorm, RotaryEmbedding, SwiGLUMLP, apply_rotary


class InjectedKVAttention(nn.Module):
    """Attention whose keys/values are projections of ``[context ; block]`` and whose queries are the block."""

    def __init__(self, cfg: DraftModelConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        h, hd, bias = cfg.hidden_size, cfg.head_dim, cfg.attention_bias
        self.q_proj = nn.Linear(h, self.num_heads * hd, bias=bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * hd, bias=bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * hd, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * hd, h, bias=bias)
        self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,  # [B, S, H] normalised block stream
        ctx: torch.Tensor,  # [B, C, H] fused context features
        cos: torch.Tensor,  # [C + S, D] rotary tables of the new positions
        sin: torch.Tensor,  # [C + S, D]
        past_k: torch.Tensor | None,  # [B, kv_heads, T, D] cached context keys (already rotated)
        past_v: torch.Tensor | None,  # [B, kv_heads, T, D]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return the attention output ``[B, S, H]`` and the new context keys/values ``[B, kv_heads, C, D]``."""
        b, s, _ = x.shape
        c = ctx.shape[1]
        d = self.head_dim
        q = self.q_norm(self.q_proj(x).view(b, s, self.num_heads, d)).transpose(1, 2)  # [B, nh, S, D]
        kv_in = torch.cat([ctx, x], dim=1)  # [B, C + S, H]
        k = self.k_norm(self.k_proj(kv_in).view(b, c + s, self.num_kv_heads, d)).transpose(1, 2)
        v = self.v_proj(kv_in).view(b, c + s, self.num_kv_heads, d).transpose(1, 2)  # [B, kvh, C + S, D]
        q = apply_rotary(q, cos[c:], sin[c:])
        k = apply_rotary(k, cos, sin)
        keys = k if past_k is None else torch.cat([past_k, k], dim=2)
        values = v if past_v is None else torch.cat([past_v, v], dim=2)
        groups = self.num_heads // self.num_kv_heads
        if groups > 1:
            keys = keys.repeat_interleave(groups, dim=1)
            values = values.repeat_interleave(groups, dim=1)
        attn = nn.functional.scaled_dot_product_attention(q, keys, values, is_causal=False, scale=d**-0.5)
        out = self.o_proj(attn.transpose(1, 2).reshape(b, s, self.num_heads * d))
        return out, k[:, :, :c], v[:, :, :c]


class DraftDecoderLayer(nn.Module):
    """Pre-norm Qwen3 block on the block stream; the context only feeds the attention's keys and values."""

    def __init__(self, cfg: DraftModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = InjectedKVAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = SwiGLUMLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(
        self,
        h: torch.Tensor,  # [B, S, H]
        ctx: torch.Tensor,  # [B, C, H]
        cos: torch.Tensor,  # [C + S, D]
        sin: torch.Tensor,  # [C + S, D]
        past_k: torch.Tensor | None,
        past_v: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        attn, new_k, new_v = self.self_attn(self.input_layernorm(h), ctx, cos, sin, past_k, past_v)
        h = h + attn
        h = h + self.mlp(self.post_attention_layernorm(h))
        return h, new_k, new_v


class DFlashBackbone(nn.Module):
    """``fc`` + ``hidden_norm`` context fusion, ``num_hidden_layers`` decoder layers, final ``norm``."""

    def __init__(self, cfg: DraftModelConfig) -> None:
        super().__init__()
        self.config = cfg
        h = cfg.hidden_size
        self.fc = nn.Linear(cfg.num_taps * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DraftDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(h, cfg.rms_norm_eps)
        self.rotary = RotaryEmbedding(cfg.head_dim, cfg.rope_theta)

    def new_cache(self) -> DraftKVCache:
        return DraftKVCache(len(self.layers))

    def forward(
        self,
        taps: torch.Tensor,  # [B, C, n_taps * H] target hidden states of the new context positions (C >= 0)
        block_embeds: torch.Tensor,  # [B, S, H] embeddings of [bonus, MASK, ...]
        cache: DraftKVCache,
    ) -> torch.Tensor:  # [B, S, H] normalised block outputs
        """Run one block over the cache; afterwards the cache also holds the ``C`` new context positions."""
        c, s = taps.shape[1], block_embeds.shape[1]
        dtype = block_embeds.dtype
        positions = torch.arange(cache.length, cache.length + c + s, device=block_embeds.device)
        cos, sin = self.rotary(positions, dtype)
        ctx = self.hidden_norm(self.fc(taps.to(dtype)))
        h = block_embeds
        for i, layer in enumerate(self.layers):
            past_k, past_v = cache.past(i)
            h, new_k, new_v = layer(h, ctx, cos, sin, past_k, past_v)
            cache.append(i, new_k, new_v)
        cache.advance(c)
        return self.norm(h)
