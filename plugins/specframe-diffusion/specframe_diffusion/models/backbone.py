"""The DFlash block-diffusion backbone shared by DFlash, Domino and DSpark (docs/concepts/block-drafters.md).

Per round, for each drafting row: ``C`` new context positions (target taps of freshly committed tokens) and a block
of ``bs`` token embeddings ``[bonus, MASK, ..., MASK]``::

    ctx = hidden_norm(fc(taps))                              # [R, C, H], shared by every layer
    for each layer (pre-norm Qwen3 block on the block stream only):
        x = input_layernorm(h)
        Q = rope(q_norm(q_proj(x)))                           # block queries, positions start..start+bs-1
        K = rope(k_norm(k_proj([ctx ; x])))                   # "KV injection": context and block, same weights
        V = v_proj([ctx ; x])
        h = h + o_proj(attention(Q, [cached K ; K], [cached V ; V]))   # NON-causal within the row
        h = h + mlp(post_attention_layernorm(h))
    return norm(h)                                            # [R, bs, H]

The context never goes through a layer's norm, attention or MLP, so its keys and values depend on its taps alone:
:meth:`DFlashBackbone.extend` writes them into the cache as soon as the taps are known (the prompt's when a row
joins, the accepted nodes' after each verification), and a round's forward is the block alone over the cache.
A row's RoPE positions run over ``length .. length + C + bs - 1`` (its cached length): context keys first, then
the block. Rows of one call may differ in cached length and in new context positions (padded to the most; the
`DraftKVCache` plans where each row's entries go and masks what each row's block sees), so the rows of a batch draft
in ONE forward and each row's block equals what it would be alone. The module owns no embedding and no LM head (the
target's are used, or the DeepSeek checkpoint's copies). Parameter names equal the published keys (``fc.weight``,
``layers.0.self_attn.q_proj.weight``, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from specframe_diffusion.draft_config import DraftModelConfig
from specframe_diffusion.models.draft_cache import DraftKVCache, SlotPlan
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

    def key_values(
        self,
        inputs: torch.Tensor,  # [R, T, H] fused context features or the normalised block stream
        cos: torch.Tensor,  # [T, D] rotary tables of the entries' positions, or per row [R, 1, T, D]
        sin: torch.Tensor,  # like cos
    ) -> tuple[torch.Tensor, torch.Tensor]:  # ([R, kv_heads, T, D] rotated keys, values)
        b, t, _ = inputs.shape
        k = self.k_norm(self.k_proj(inputs).view(b, t, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(inputs).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return apply_rotary(k, cos, sin), v

    def forward(
        self,
        x: torch.Tensor,  # [R, S, H] normalised block stream
        cos: torch.Tensor,  # [S, D] rotary tables of the block's positions, or per row [R, 1, S, D]
        sin: torch.Tensor,  # like cos
        cache: DraftKVCache,
        layer: int,
        plan: SlotPlan,  # where the block's entries go (scratch: never committed)
    ) -> torch.Tensor:  # [R, S, H]
        """Attention of the block over its row's cached context and the whole block (non-causal)."""
        b, s, _ = x.shape
        d = self.head_dim
        q = self.q_norm(self.q_proj(x).view(b, s, self.num_heads, d)).transpose(1, 2)  # [R, nh, S, D]
        q = apply_rotary(q, cos, sin)
        cache.write(layer, plan, *self.key_values(x, cos, sin))
        keys, values = cache.read(layer, plan)  # [R, kvh, W, D]: cached context, then the block
        groups = self.num_heads // self.num_kv_heads
        if groups > 1:
            keys = keys.repeat_interleave(groups, dim=1)
            values = values.repeat_interleave(groups, dim=1)
        attn = nn.functional.scaled_dot_product_attention(q, keys, values, attn_mask=plan.mask, is_causal=False,
                                                          scale=d**-0.5)
        return self.o_proj(attn.transpose(1, 2).reshape(b, s, self.num_heads * d))


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
        h: torch.Tensor,  # [R, S, H]
        cos: torch.Tensor,  # [S, D] or [R, 1, S, D]
        sin: torch.Tensor,
        cache: DraftKVCache,
        layer: int,
        plan: SlotPlan,
    ) -> torch.Tensor:  # [R, S, H]
        h = h + self.self_attn(self.input_layernorm(h), cos, sin, cache, layer, plan)
        return h + self.mlp(self.post_attention_layernorm(h))


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

    def new_cache(self, rows: int = 1) -> DraftKVCache:
        """An empty cache of ``rows`` rows."""
        return DraftKVCache(len(self.layers), rows)

    def extend(
        self,
        taps: torch.Tensor,  # [R, C, n_taps * H] target hidden states of new context positions
        cache: DraftKVCache,
        rows: Sequence[int] | None = None,  # the cache rows extended (None: every row, in order)
        counts: Sequence[int] | None = None,  # valid positions per row (None: C each); padding after them
    ) -> None:
        """Append each row's ``counts[r]`` new context positions to its cache (their keys and values only)."""
        _check_rows(taps, cache, rows)
        plan = cache.plan(rows, taps.shape[1], counts, taps.device)
        dtype = next(self.parameters()).dtype
        cos, sin = self._rope(plan, dtype)
        ctx = self.hidden_norm(self.fc(taps.to(dtype)))  # [R, C, H]
        for i, layer in enumerate(self.layers):
            cache.write(i, plan, *layer.self_attn.key_values(ctx, cos, sin))
        cache.advance(plan)

    def forward(
        self,
        taps: torch.Tensor,  # [R, C, n_taps * H] new context positions (C >= 0), as for ``extend``
        block_embeds: torch.Tensor,  # [R, S, H] embeddings of [bonus, MASK, ...]
        cache: DraftKVCache,
        rows: Sequence[int] | None = None,  # the cache rows that draft (None: every row, in order)
        counts: Sequence[int] | None = None,  # valid new context positions per row (None: C each)
    ) -> torch.Tensor:  # [R, S, H] normalised block outputs
        """Extend the rows' caches by their new context (if any), then run one block per row over its cache."""
        if taps.shape[1]:
            self.extend(taps, cache, rows, counts)
        return self.run_block(block_embeds, cache, rows)

    def run_block(
        self,
        block_embeds: torch.Tensor,  # [R, S, H] embeddings of [bonus, MASK, ...]
        cache: DraftKVCache,
        rows: Sequence[int] | None = None,  # the cache rows that draft (None: every row, in order)
    ) -> torch.Tensor:  # [R, S, H] normalised block outputs
        """One block per row at the positions after its cached context, over that context and the whole block;
        the cache's committed context is unchanged."""
        _check_rows(block_embeds, cache, rows)
        plan = cache.plan(rows, block_embeds.shape[1], None, block_embeds.device)
        cos, sin = self._rope(plan, block_embeds.dtype)
        h = block_embeds
        for i, layer in enumerate(self.layers):
            h = layer(h, cos, sin, cache, i, plan)
        return self.norm(h)

    def _rope(self, plan: SlotPlan, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotary tables of the plan's positions: ``[T, D]`` shared, or ``[R, 1, T, D]`` per row."""
        cos, sin = self.rotary(plan.positions, dtype)
        if cos.dim() == 3:
            return cos[:, None], sin[:, None]
        return cos, sin


def _check_rows(inputs: torch.Tensor, cache: DraftKVCache, rows: Sequence[int] | None) -> None:
    """One input row per cache row written."""
    want = cache.batch_size if rows is None else len(rows)
    if inputs.shape[0] != want:
        raise ValueError(f"the draft backbone got {inputs.shape[0]} input row(s) for {want} cache row(s) "
                         f"(rows {'all' if rows is None else list(rows)} of a cache of {cache.batch_size})")
