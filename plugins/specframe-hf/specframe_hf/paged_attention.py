"""`paged_attention`: attention of a forward's ragged rows over the KV pool, each key and value read once.

A forward runs ``T`` query tokens, row after row (row ``b`` owns the flat tokens ``[first_b, first_b + c_b)``);
their keys and values have just been written into the pool (:class:`specframe_hf.kv_pool.KVPool`). Each row
attends over its own ``width_b = committed_b + c_b`` logical slots, not the batch's longest: rows are ragged, so
nothing is padded and no column of another row's length is masked. Per row (:class:`RowRead`):

* **keys and values** are a view of the pool when the row's blocks are one contiguous run (the pool allocates
  runs first), else one gather through the row's block table;
* **grouped-query attention without expansion**: the ``G = H_q / H_kv`` query heads that share a key/value head
  become ``G`` times as many query rows of that head (``q [H_q, c, D] -> [H_kv, G * c, D]``), so every key and value
  is read once per key/value head, never repeated ``G`` times (``_repeat_kv`` is gone). A row without a mask
  calls SDPA with ``enable_gqa`` as transformers does, so plain decoding stays bit-identical to ``generate()``;
* **the mask** is the round's tree block only: the committed prefix is visible to every node, so its columns are
  zeros, and the last ``c`` columns carry the ``[c, c]`` ancestor relation (repeated per group). One query token
  (plain decoding, a tree of one node) needs no mask at all; a prompt is causal (``is_causal``).

Worked example (one row, ``H_q = 4``, ``H_kv = 2`` so ``G = 2``, 3 committed slots, a tree ``parents = [-1, 0, 0]``,
``m = finfo.min``)::

    query rows (g, node):  (0,root) (0,a) (0,b) (1,root) (1,a) (1,b)        per key/value head
    mask [6, 6]:           prefix | root  a  b
                           0 0 0  |  0    m  m       (root)   rows repeat for g = 1
                           0 0 0  |  0    0  m       (a)
                           0 0 0  |  0    m  0       (b)

On CPU this per-row form was measured (a busy 2-core Xeon, batch 1/4/8, 200-600 committed slots) against one
padded gather of every row into ``[B, H, max width, D]`` with a dense mask: the gather copies every row's keys and
values per layer and lost at every batch size with a tree; the per-row views read the pool in place. The dense
mask over padded rows stays as the test oracle (``tests/test_hf_paged_attention.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass
class RowRead:
    """What one row of a forward attends over."""

    first: int  # index of the row's first query token in the forward's flat tokens
    count: int  # its query tokens c
    width: int  # logical slots it attends over: committed + c (a prompt: c)
    start: int | None  # physical slot of its logical slot 0 when its blocks are contiguous
    index: torch.Tensor | None  # [width] int64 physical slots otherwise
    mask: torch.Tensor | None  # [G * c, width] additive, query rows ordered (group, node); None: none or causal
    causal: bool = False  # a prompt on an empty row: query i sees slots [0, i]


def tree_mask(visible: torch.Tensor, committed: int, groups: int, dtype: torch.dtype) -> torch.Tensor:
    """The grouped additive mask ``[G * c, committed + c]`` of a row whose ``c`` nodes see each other by
    ``visible`` ``[c, c]`` bool (ancestor-or-self) and every committed slot."""
    c = int(visible.shape[0])
    mask = torch.zeros(groups * c, committed + c, dtype=dtype, device=visible.device)
    block = torch.zeros(c, c, dtype=dtype, device=visible.device).masked_fill_(~visible, torch.finfo(dtype).min)
    mask[:, committed:] = block.repeat(groups, 1)
    return mask


def paged_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, reads: Sequence[RowRead],
                    groups: int, scaling: float, eager: bool = False) -> torch.Tensor:  # [T, H_q * D]
    """Attention of the flat queries ``q`` ``[T, H_q, D]`` (rotary applied) over the pool's ``keys`` and ``values``
    ``[H_kv, slots, D]``, row by row (see the module docstring). ``eager``: transformers' eager formula (explicit
    scores, softmax in float32) instead of SDPA."""
    _, hq, d = q.shape
    hkv = hq // groups
    outs = []
    for r in reads:
        if r.start is not None:
            k = keys[:, r.start : r.start + r.width][None]  # [1, H_kv, W, D] (a view)
            v = values[:, r.start : r.start + r.width][None]
        else:
            assert r.index is not None
            k = keys.index_select(1, r.index)[None]
            v = values.index_select(1, r.index)[None]
        qr = q[r.first : r.first + r.count].transpose(0, 1)[None]  # [1, H_q, c, D]
        c = r.count
        if eager:
            grouped = qr.reshape(1, hkv, groups * c, d)
            scores = torch.matmul(grouped, k.transpose(2, 3)) * scaling  # [1, H_kv, G * c, W]
            if r.mask is not None:
                scores = scores + r.mask
            elif r.causal and c > 1:
                scores = scores + _causal(c, r.width, scores.dtype, scores.device).repeat(groups, 1)
            weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(weights, v).reshape(1, hq, c, d)
        elif r.mask is None:
            out = F.scaled_dot_product_attention(qr, k, v, scale=scaling, is_causal=r.causal and c > 1,
                                                 enable_gqa=groups > 1)
        else:
            grouped = qr.reshape(1, hkv, groups * c, d)
            out = F.scaled_dot_product_attention(grouped, k, v, attn_mask=r.mask, scale=scaling)
            out = out.reshape(1, hq, c, d)
        outs.append(out[0].transpose(0, 1).reshape(c, hq * d))  # [c, H_q * D]
    return outs[0] if len(outs) == 1 else torch.cat(outs)


def _causal(n: int, width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:  # [N, W] additive
    """Query ``i`` (the last ``n`` of ``width`` positions) sees positions up to its own."""
    cols = torch.arange(width, device=device)[None, :]
    rows = torch.arange(width - n, width, device=device)[:, None]
    return torch.zeros(n, width, dtype=dtype, device=device).masked_fill_(cols > rows, torch.finfo(dtype).min)
