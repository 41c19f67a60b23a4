"""`DraftKVCache`: the draft backbone's key/value cache, which holds committed context only.

Each round the backbone computes K/V for the new context positions and for the block; attention reads the cached
context, the new context and the block, and then only the new *context* K/V are kept. This is DFlash's
"append context + block, then ``crop(start)``" (docs/concepts/block-drafters.md) without materialising the block
entries in the cache. After a round the cache covers positions ``[0, start)`` exactly.

Example: prompt of 5 tokens, first round -> 5 context entries appended (positions 0..4), block positions 5..20
discarded; 3 tokens accepted -> next round appends positions 5..7, so ``length == 8``.
"""

from __future__ import annotations

import torch


class DraftKVCache:
    """Per-layer rotated keys and values ``[B, kv_heads, T, head_dim]`` of committed context positions."""

    def __init__(self, num_layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers
        self.length = 0

    def past(self, layer: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        return self.keys[layer], self.values[layer]

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Add the new context entries ``[B, kv_heads, C, head_dim]`` of one layer."""
        old_k, old_v = self.keys[layer], self.values[layer]
        self.keys[layer] = keys if old_k is None else torch.cat([old_k, keys], dim=2)
        self.values[layer] = values if old_v is None else torch.cat([old_v, values], dim=2)

    def advance(self, count: int) -> None:
        """Record that every layer received ``count`` new positions."""
        self.length += count
