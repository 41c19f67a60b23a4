"""`BucketedVerify`: the lean engine's verify forward at a few fixed shapes, so it can be compiled or captured once
per shape (CUDA graphs on accelerators).

The per-row forward (:mod:`specframe_hf.paged_attention`) has shapes that change every round: each row's width
grows with its accepted tokens and the flat token count follows the trees. A captured graph replays one shape, so
this forward pads every round to a **bucket** ``(rows, nodes, blocks)``, each the smallest of a fixed ladder that
holds the round (:data:`LADDER`: 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, ...):

* rows beyond the batch are padding rows: their tokens write into the pool's scratch block and nobody reads them;
* nodes beyond the tree are padding nodes, written to the scratch block and hidden from every real node;
* every row reads ``blocks * S`` logical slots through its block table (padded with the scratch block), masked
  past its own length: one gather of ``[rows, H_kv, blocks * S, D]`` per layer and one grouped SDPA over a mask
  built on the device from the lengths and the ``[N, N]`` ancestor relation (no host data in the graph).

Everything that varies inside a bucket is a tensor (ids, positions, write slots, block tables, lengths, the
relation), so ``torch.compile(fullgraph=True, dynamic=False)`` traces the forward once per bucket without a graph
break, and ``mode="reduce-overhead"`` captures it as a CUDA graph on an accelerator
(``benchmarks/accelerator_check.py``, step ``captured``). On the CPUs measured the padded gather is slower than the
per-row views (:mod:`specframe_hf.paged_attention`), so this path is an option (``target: {capture: ...}``), off by
default. Its logits equal the per-row forward's up to float rounding (a padded, masked SDPA sums in another order),
as a batch-mate's can (docs/concepts/batched-decoding.md).

Example: 3 rows of lengths 30, 70, 5 verify trees of 6 nodes with 16-slot blocks: bucket (4, 8, 8): 4 rows
(one padding), 8 nodes (2 padding per row), 8 blocks (128 logical slots, enough for 70 + 6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from specframe_hf.decoder import DecoderForward, rotate_half


def bucket(size: int) -> int:
    """The smallest power of two that holds ``size`` (at least 1): the ladder of bucket sizes.

    Example: ``bucket(1) = 1``, ``bucket(5) = 8``, ``bucket(64) = 64``."""
    return 1 << max(0, int(size) - 1).bit_length()


#: The bucket ladder's first sizes, for documentation and tests.
LADDER = tuple(bucket(2**i) for i in range(10))


class BucketedVerify:
    """The verify forward at bucketed shapes over a pool of ``block_size``-slot blocks; ``compiler`` wraps the
    tensor function once (e.g. ``lambda f: torch.compile(f, fullgraph=True, dynamic=False)``), and every bucket
    is then one compiled graph."""

    def __init__(self, decoder: DecoderForward, block_size: int, taps: tuple[int, ...] = (),
                 compiler: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None) -> None:
        self.decoder = decoder
        self.block_size = block_size
        self.taps = taps
        self.step: Callable[..., tuple[torch.Tensor, torch.Tensor | None]] = \
            compiler(self.forward) if compiler is not None else self.forward
        self.shapes: set[tuple[int, int, int]] = set()  # buckets run so far

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, kv: list[tuple[torch.Tensor, torch.Tensor]],
                slots: torch.Tensor, tables: torch.Tensor, lengths: torch.Tensor,
                visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits ``[R, N, V]`` float32 of the bucket's tokens, and the tapped layer outputs ``[R, N, n_taps * H]``
        (None without taps).

        Args:
            ids, positions: ``[R, N]`` the bucket's tokens and positions (padding: any token, position 0).
            kv: per layer the pool's key and value storage ``[H_kv, slots, D]``.
            slots: ``[R, N]`` physical slots the entries are written to (padding: the scratch block).
            tables: ``[R, M]`` block ids, logical order (padding: the scratch block).
            lengths: ``[R]`` committed slots per row (padding rows: 0).
            visible: ``[R, N, N]`` bool ancestor-or-self relation (padding nodes see only themselves).
        """
        dec = self.decoder
        r, n = ids.shape
        s = self.block_size
        width = tables.shape[1] * s
        groups, hd = dec.groups, dec.head_dim
        # Step 1: the logical -> physical slot map of every row, and the mask, once for every layer.
        physical = (tables[:, :, None] * s + torch.arange(s, device=ids.device)).reshape(r, width)  # [R, W]
        rel = torch.arange(width, device=ids.device)[None, :] - lengths[:, None]  # [R, W] node index of a slot
        in_tree = (rel >= 0) & (rel < n)
        tree_part = visible.gather(2, rel.clamp(0, n - 1)[:, None, :].expand(r, n, width)) & in_tree[:, None, :]
        seen = tree_part | (rel < 0)[:, None, :]  # [R, N, W]
        mask = torch.zeros(r, 1, n, width, dtype=dec.model.dtype, device=ids.device)
        mask = mask.masked_fill(~seen[:, None], torch.finfo(mask.dtype).min)
        mask = mask.expand(r, groups, n, width).reshape(r, 1, groups * n, width)  # query rows (group, node)
        flat_slots = slots.reshape(-1)
        # Step 2: the layers.
        h = dec.inner.embed_tokens(ids)  # [R, N, H]
        cos, sin = dec.inner.rotary_emb(h, position_ids=positions)  # [R, N, D]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]  # [R, N, 1, D]
        tapped: dict[int, torch.Tensor] = {}
        for i, layer in enumerate(dec.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            shape = (r, n, -1, hd)
            q, k, v = attn.q_proj(x).view(shape), attn.k_proj(x).view(shape), attn.v_proj(x).view(shape)
            if dec.qk_norm:
                q, k = attn.q_norm(q), attn.k_norm(k)
            q = q * cos + rotate_half(q) * sin  # [R, N, H_q, D]
            k = k * cos + rotate_half(k) * sin  # [R, N, H_kv, D]
            keys, values = kv[i]
            hkv = keys.shape[0]
            keys.index_copy_(1, flat_slots, k.reshape(r * n, hkv, hd).transpose(0, 1))
            values.index_copy_(1, flat_slots, v.reshape(r * n, hkv, hd).transpose(0, 1))
            kr = keys[:, physical].transpose(0, 1)  # [R, H_kv, W, D]
            vr = values[:, physical].transpose(0, 1)
            grouped = q.permute(0, 2, 1, 3).reshape(r, hkv, groups * n, hd)  # [R, H_kv, G * N, D]
            out = F.scaled_dot_product_attention(grouped, kr, vr, attn_mask=mask, scale=dec.scaling)
            out = out.reshape(r, hkv * groups, n, hd).transpose(1, 2).reshape(r, n, -1)  # [R, N, H_q * D]
            h = h + attn.o_proj(out)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if i in self.taps:
                tapped[i] = h
        logits = dec.model.lm_head(dec.inner.norm(h)).float()  # [R, N, V]
        hidden = torch.cat([tapped[i] for i in self.taps], dim=-1) if self.taps else None
        return logits, hidden
