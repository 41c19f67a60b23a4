"""KV-cache compaction after tree verification: keep the accepted path, drop the other tree nodes.

A tree forward appends one KV entry per tree node after the ``past`` committed positions. The accepted path
(root first) is a list of increasing node indices; its entries must end up at ``[past, past + L)`` in path
order. Only those L entries are copied and the tail is cut off, so the work is proportional to the accepted
path, never to the context. RoPE needs no fix-up: node positions were ``past + depth``, and an accepted node's
depth equals its final offset.

Worked example (past = 5, a tree of 6 nodes, accepted path ``[0, 2, 5]``)::

    before:  p0 p1 p2 p3 p4 | n0 n1 n2 n3 n4 n5      (11 entries per layer)
    copy:    slots 5, 6, 7  <-  n0, n2, n5
    crop:    p0 p1 p2 p3 p4 | n0 n2 n5               (8 entries)

When the path is a prefix of the block (``[0, 1, 2]``, always the case for chains) no copy is needed.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache


def compact_tree_entries(cache: Cache, past: int, accepted: torch.Tensor, appended: int, *,
                         in_place: bool | None = None) -> None:
    """Move the accepted tree entries to ``[past, past + L)`` and drop the rest of the appended block.

    Args:
        cache: a cache of ``DynamicLayer``s holding ``past + appended`` positions per layer.
        past: committed positions before the tree block.
        accepted: ``[B, L]`` int64 node indices of the accepted path (root first, increasing, no padding).
        appended: number of tree entries the last forward appended (N).
        in_place: whether ``accepted`` is ``0 .. L - 1`` in every row, when the caller already knows (saves
            reading the device); None: compare here.
    """
    b, length = accepted.shape
    if length > appended:
        raise ValueError(f"cannot keep {length} entries of a block of {appended}")
    # Step 1: the common case (chains, or a tree whose accepted path is its first nodes) is already in place.
    if in_place is None:
        in_place = torch.equal(accepted, torch.arange(length, device=accepted.device).expand(b, length))
    if not in_place:
        # Step 2: gather the accepted entries of every layer and write them right after the past.
        source = accepted + past  # [B, L] absolute cache positions
        for layer in cache.layers:
            for name in ("keys", "values"):
                kv: torch.Tensor = getattr(layer, name)  # [B, H_kv, T, D]
                index = source.to(kv.device)[:, None, :, None].expand(b, kv.shape[1], length, kv.shape[3])
                moved = torch.gather(kv, 2, index)  # [B, H_kv, L, D]
                kv.narrow(2, past, length).copy_(moved)
    # Step 3: cut the rest of the tree block off (a view; no copy).
    dropped = appended - length
    if dropped > 0:
        cache.crop(-dropped)
