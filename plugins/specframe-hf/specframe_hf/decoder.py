"""`DecoderForward`: the lean forward of a Llama-family decoder (Llama, Mistral, Qwen2, Qwen3) over the paged KV pool.

transformers' ``model(...)`` builds masks, a cache object and keyword plumbing on every call; for a decode round
that is a fixed cost of a millisecond or more on CPU, as large as a small model's whole forward, and on a GPU it is
launch overhead that cannot be captured. This module runs the same model with the same modules (its embedding,
rotary embedding, norms, projections, MLPs and LM head, including specframe's prepacked ``PackedLinear``
replacements and ``Float32Head``) in a straight loop over a forward's flat tokens (rows one after the other, no
padding), reading and writing keys and values in the block pool (:class:`specframe_hf.kv_pool.KVPool`) instead of
a growing ``DynamicCache``. One layer::

    x = input_layernorm(h)                             # h [1, T, H]: every row's tokens, back to back
    q, k, v = q_proj(x), k_proj(x), v_proj(x)          # per head; Qwen3: q_norm / k_norm on each head
    q, k = rope(q, k, positions)                       # the model's own rotary tables
    K[slots], V[slots] = k, v                          # the round's entries, written in place in the pool
    h = h + o_proj(paged_attention(q, K, V, reads))    # each row over its own blocks (specframe_hf.paged_attention)
    h = h + mlp(post_attention_layernorm(h))

and ``logits = lm_head(norm(h[logits_at]))``. Where a row needs no mask (a prompt, one query token) the attention
call is transformers' own (SDPA with ``enable_gqa`` and ``is_causal`` for a prompt, or the eager formula with the
softmax in float32), so plain decoding through it reproduces ``generate()``; tree rows fold the query heads of a
key/value group onto that head and mask only the tree block (no key or value is repeated).

Example: rows of lengths 5 and 9 verify trees of 3 and 1 nodes: ``T = 4`` tokens ``[r0n0, r0n1, r0n2, r1n0]``,
written at row 0's logical slots 5-7 and row 1's slot 9 (physical slots through each row's block table); row 0
attends over 8 slots with a ``[G * 3, 8]`` mask, row 1 over 10 slots with none.

:func:`lean_supported` says why a model cannot take this path (a sliding window, another attention backend, a
model split across devices or sharded by tensor parallelism, an unknown family); such models keep
transformers' forward (:class:`specframe_hf.rows.HFRows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from specframe_hf.paged_attention import RowRead, paged_attention

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
                slots: torch.Tensor, reads: Sequence[RowRead], logits_at: torch.Tensor | None,
                taps: Sequence[int] = ()) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the flat tokens ``ids`` ``[T]`` (row after row) at ``positions`` ``[T]``; return float32 logits
        ``[K, V]`` of the tokens ``logits_at`` ``[K]`` (None: every token, ``K = T``) and the tapped layer outputs
        ``[T, len(taps) * H]`` (None without taps).

        ``kv[i]`` holds layer ``i``'s key and value storage ``[H_kv, slots, D]`` (the pool's), ``slots`` ``[T]`` the
        physical slots the tokens' entries are written to, ``reads`` what each row attends over
        (:func:`specframe_hf.paged_attention.paged_attention`). Every token-wise module (embedding, norms,
        projections, MLPs, LM head) runs on the ``T`` tokens as one ``[1, T, H]`` batch, so a row that decodes
        plainly in a round where another row verifies a tree costs one token, not the tree's width."""
        t = int(ids.shape[0])
        h = self.inner.embed_tokens(ids)[None]  # [1, T, H]
        cos, sin = self.inner.rotary_emb(h, position_ids=positions[None])  # [1, T, D]
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
            q = q * cos + rotate_half(q) * sin  # [T, H_q, D]
            k = k * cos + rotate_half(k) * sin  # [T, H_kv, D]
            keys, values = kv[i]
            keys.index_copy_(1, slots, k.transpose(0, 1))  # the round's entries, written in place
            values.index_copy_(1, slots, v.transpose(0, 1))
            out = paged_attention(q, keys, values, reads, self.groups, self.scaling, self.eager)  # [T, H_q * D]
            h = h + attn.o_proj(out[None])
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if i in tap_set:
                tapped[i] = h
        last = h if logits_at is None else h[:, logits_at]
        logits = self.model.lm_head(self.inner.norm(last)).float()[0]  # [K, V]
        hidden = torch.cat([tapped[i] for i in taps], dim=-1)[0] if taps else None
        return logits, hidden
