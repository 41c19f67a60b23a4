"""`DecoderForward`: the lean forward of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3) over slot KV buffers.

transformers' ``model(...)`` builds masks, a cache object and keyword plumbing on every call; for a decode round
that is a fixed cost of a millisecond or more on CPU, as large as a small model's whole forward, and on a GPU it is
launch overhead that cannot be captured. This module runs the same model with the same modules (its embedding,
rotary embedding, norms, projections, MLPs and LM head, including specframe's prepacked ``PackedLinear``
replacements and ``Float32Head``) in a straight loop, reading and writing keys and values in preallocated
buffers (:class:`specframe_hf.slot_cache.SlotCache`) instead of a growing ``DynamicCache``. One layer::

    x = input_layernorm(h)
    q, k, v = q_proj(x), k_proj(x), v_proj(x)          # per head; Qwen3: q_norm / k_norm on each head
    q, k = rope(q, k, positions)                       # the model's own rotary tables
    K[slots], V[slots] = k, v                          # the round's entries, written in place
    h = h + o_proj(attention(q, K[:width], V[:width], mask))
    h = h + mlp(post_attention_layernorm(h))

and ``logits = lm_head(norm(h[:, -keep:]))``. The attention call follows transformers' own dispatch exactly, so
plain decoding through it reproduces ``generate()``: sdpa without a mask uses ``enable_gqa`` (and ``is_causal``
for a prompt), sdpa with a mask repeats the key/value heads (or, for one query token, folds the query heads onto
the key/value heads as transformers' ``pack_gqa`` does), and eager attention is the explicit
``softmax(q k^T * scale + mask) v`` with the softmax in float32.

:func:`lean_supported` says why a model cannot take this path (a sliding window, another attention backend, a
model split across devices or sharded by tensor parallelism, an unknown family); such models keep
transformers' forward (:class:`specframe_hf.rows.HFRows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn import functional as F

#: Families whose layer layout this forward reproduces (checked against transformers' forward in the tests).
LEAN_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")


def lean_supported(model: Any) -> str | None:
    """None when :class:`DecoderForward` can run ``model``; otherwise why not (for logs and tests)."""
    config = model.config
    if config.model_type not in LEAN_FAMILIES:
        return f"model type {config.model_type!r} has no lean forward"
    attn = getattr(config, "_attn_implementation", None) or "sdpa"
    if attn not in ("sdpa", "eager"):
        return f"attention backend {attn!r}"
    if getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True):
        return "sliding-window attention"
    if any(t != "full_attention" for t in (getattr(config, "layer_types", None) or ())):
        return "layers other than full attention"
    if int(getattr(config, "pretraining_tp", 1) or 1) != 1:
        return "pretraining_tp > 1"
    if getattr(model, "hf_device_map", None) and len(set(model.hf_device_map.values())) > 1:
        return "the model is split across devices"
    if any(type(p) not in (torch.Tensor, torch.nn.Parameter) for p in model.parameters()):
        return "sharded (tensor-parallel) parameters"
    if any(hasattr(m, "_hf_hook") for m in model.modules()):
        return "accelerate offload hooks"
    return None


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class SlotWrite:
    """Where a forward's ``N`` new entries per row go in a ``[B, H, C, D]`` buffer: the slots ``[start, start + N)`` of
    every row (``start`` an int), or per row ``slots`` ``[B, N]`` (rows of different lengths)."""

    def __init__(self, start: int | None = None, slots: torch.Tensor | None = None) -> None:
        self.start = start
        self.slots = slots  # [B, N] int64

    def store(self, buffer: torch.Tensor, new: torch.Tensor) -> None:  # buffer [B, H, C, D], new [B, H, N, D]
        if self.start is not None:
            buffer[:, :, self.start : self.start + new.shape[2]] = new
        else:
            assert self.slots is not None
            buffer.scatter_(2, self.slots[:, None, :, None].expand_as(new), new)


class DecoderForward:
    """The lean forward of one Llama-family model; see the module docstring."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.inner = model.model
        self.layers = list(self.inner.layers)
        config = model.config
        first = self.layers[0].self_attn
        self.head_dim = int(first.head_dim)
        self.groups = int(first.num_key_value_groups)
        self.scaling = float(first.scaling)
        self.num_kv_heads = int(config.num_key_value_heads)
        self.qk_norm = hasattr(first, "q_norm")
        self.eager = (getattr(config, "_attn_implementation", None) or "sdpa") == "eager"

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, kv: Sequence[tuple[torch.Tensor, torch.Tensor]],
                write: SlotWrite, width: int, mask: torch.Tensor | None, keep: int,
                taps: Sequence[int] = (), packed: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run ``ids`` ``[B, N]`` at ``positions`` ``[B, N]``; return float32 logits of the last ``keep`` positions
        ``[B, keep, V]`` and the tapped layer outputs ``[B, N, len(taps) * H]`` (None without taps).

        ``kv[i]`` holds layer ``i``'s key and value buffers ``[B, H_kv, C, D]`` (views of the rows this forward
        runs), ``write`` where the new entries go, ``width`` how many slots each query attends over (the new
        entries included), ``mask`` the additive ``[B, 1, N, width]`` mask (None: a causal prompt when ``N`` > 1,
        or one token that sees every slot below ``width``). ``packed`` ``[T]``: the flat indices (into
        ``B * N``) of the only positions that matter (see :meth:`forward_packed`)."""
        if packed is not None:
            return self.forward_packed(ids, positions, kv, write, width, mask, taps, packed)
        b, n = ids.shape
        h = self.inner.embed_tokens(ids)  # [B, N, H]
        cos, sin = self.inner.rotary_emb(h, position_ids=positions)  # [B, N, D]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, 1, N, D]
        tapped: dict[int, torch.Tensor] = {}
        tap_set = set(taps)
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            shape = (b, n, -1, self.head_dim)
            q, k, v = attn.q_proj(x).view(shape), attn.k_proj(x).view(shape), attn.v_proj(x).view(shape)
            if self.qk_norm:
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, N, D]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            keys, values = kv[i]
            write.store(keys, k)
            write.store(values, v)
            out = self.attend(q, keys[:, :, :width], values[:, :, :width], mask)  # [B, N, heads * D]
            h = h + attn.o_proj(out)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if i in tap_set:
                tapped[i] = h
        last = self.inner.norm(h[:, -keep:])
        logits = self.model.lm_head(last).float()  # [B, keep, V]
        hidden = torch.cat([tapped[i] for i in taps], dim=-1) if taps else None
        return logits, hidden

    def forward_packed(self, ids: torch.Tensor, positions: torch.Tensor,
                       kv: Sequence[tuple[torch.Tensor, torch.Tensor]], write: SlotWrite, width: int,
                       mask: torch.Tensor | None, taps: Sequence[int],
                       packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Selective batching: the token-wise work (embedding, norms, projections, MLPs, LM head) runs on the ``T``
        positions of ``packed`` only, and attention on the padded ``[B, N]`` layout. A row decoding plainly in a
        round where another row verifies a tree of ``N`` nodes then costs one token in the projections, not ``N``.
        Padding positions get zero queries, keys and values (their keys are never visible to a real node, and
        their logits are zeros, which no verifier reads). Logits ``[B, N, V]`` for every position."""
        b, n = ids.shape
        t = int(packed.shape[0])
        h = self.inner.embed_tokens(ids.reshape(-1)[packed])[None]  # [1, T, H]
        cos, sin = self.inner.rotary_emb(h, position_ids=positions.reshape(-1)[packed][None])  # [1, T, D]
        cos, sin = cos[0, :, None, :], sin[0, :, None, :]  # [T, 1, D]
        tapped: dict[int, torch.Tensor] = {}
        tap_set = set(taps)
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)  # [1, T, H]
            shape = (t, -1, self.head_dim)
            q, k, v = attn.q_proj(x).view(shape), attn.k_proj(x).view(shape), attn.v_proj(x).view(shape)
            if self.qk_norm:
                q, k = attn.q_norm(q), attn.k_norm(k)
            q = q * cos + rotate_half(q) * sin  # [T, heads, D]
            k = k * cos + rotate_half(k) * sin
            q, k, v = (_unpack(z, packed, b, n) for z in (q, k, v))  # [B, heads, N, D]
            keys, values = kv[i]
            write.store(keys, k)
            write.store(values, v)
            out = self.attend(q, keys[:, :, :width], values[:, :, :width], mask)  # [B, N, heads * D]
            h = h + attn.o_proj(out.reshape(b * n, -1)[packed][None])
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if i in tap_set:
                tapped[i] = h
        flat = self.model.lm_head(self.inner.norm(h)).float()[0]  # [T, V]
        logits = flat.new_zeros(b * n, flat.shape[-1]).index_copy_(0, packed, flat).view(b, n, -1)
        hidden = None
        if taps:
            joined = torch.cat([tapped[i] for i in taps], dim=-1)[0]  # [T, n_taps * H]
            hidden = joined.new_zeros(b * n, joined.shape[-1]).index_copy_(0, packed, joined).view(b, n, -1)
        return logits, hidden

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | None) -> torch.Tensor:  # [B, N, heads * D]
        """transformers' attention for these inputs (see the module docstring); q ``[B, Hq, N, D]``, k and v
        ``[B, Hkv, W, D]``."""
        b, _, n, d = q.shape
        if self.eager:
            k, v = _repeat_kv(k, self.groups), _repeat_kv(v, self.groups)
            weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling
            if mask is not None:
                weights = weights + mask
            elif n > 1:
                weights = weights + _causal(n, k.shape[2], weights.dtype, weights.device)
            weights = F.softmax(weights, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(weights, v)  # [B, Hq, N, D]
        elif mask is None:
            out = F.scaled_dot_product_attention(q, k, v, scale=self.scaling, is_causal=n > 1,
                                                 enable_gqa=self.groups > 1)
        elif n == 1 and self.groups > 1:  # transformers' pack_gqa: the query heads of a group become its rows
            packed = q.reshape(b, q.shape[1] // self.groups, self.groups, d)
            out = F.scaled_dot_product_attention(packed, k, v, attn_mask=mask, scale=self.scaling)
            out = out.reshape(b, -1, 1, d)
        else:
            out = F.scaled_dot_product_attention(q, _repeat_kv(k, self.groups), _repeat_kv(v, self.groups),
                                                 attn_mask=mask, scale=self.scaling)
        return out.transpose(1, 2).reshape(b, n, -1)


def _unpack(x: torch.Tensor, packed: torch.Tensor, b: int, n: int) -> torch.Tensor:  # [B, heads, N, D]
    """Per-position heads ``[T, heads, D]`` scattered into the padded layout (zeros at padding)."""
    out = x.new_zeros(b * n, x.shape[1], x.shape[2]).index_copy_(0, packed, x)
    return out.view(b, n, x.shape[1], x.shape[2]).transpose(1, 2)


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:  # [B, Hkv * groups, W, D]
    if groups == 1:
        return x
    b, h, w, d = x.shape
    return x[:, :, None].expand(b, h, groups, w, d).reshape(b, h * groups, w, d)


def _causal(n: int, width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:  # [N, W] additive
    """Query ``i`` (the last ``n`` of ``width`` positions) sees positions up to its own."""
    cols = torch.arange(width, device=device)[None, :]
    rows = torch.arange(width - n, width, device=device)[:, None]
    return torch.zeros(n, width, dtype=dtype, device=device).masked_fill_(cols > rows, torch.finfo(dtype).min)
