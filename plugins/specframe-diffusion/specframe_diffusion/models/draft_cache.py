"""`DraftKVCache`: the draft backbone's key/value cache for the rows of a batch; it holds committed context only.

Layout: per layer, rotated keys and values ``[B, kv_heads, capacity, head_dim]``. Row ``b`` holds its committed
context positions ``0 .. lengths[b] - 1`` in the slots of the same index (slot = position); the slots after them
are scratch. The capacity grows geometrically (zero-filled, so scratch is always finite), so a round writes its new
entries in place instead of concatenating the cache.

Each round the backbone computes K/V for the new context positions and for the block; attention reads the cached
context, the new context and the block, and then only the new *context* entries are kept. This is DFlash's
"append context + block, then ``crop(start)``" (docs/concepts/block-drafters.md). One round (a `RoundPlan`, made by
:meth:`DraftKVCache.plan`) of R drafting rows, row ``r`` with ``counts[r]`` new context positions (padded to C) and
a block of S positions::

    row r's C + S new entries go to the slots
        context i < counts[r]:    lengths[r] + i                   (= its position)
        block j:                  lengths[r] + counts[r] + j       (= its position)
        padding i >= counts[r]:   lengths[r] + S + i               (after the block: never seen)
    row r's block attends to its slots [0, lengths[r] + counts[r] + S) (a key mask when the rows differ)
    afterwards lengths[r] += counts[r]; the block's entries are scratch that the next round overwrites

Worked example: rows with lengths ``[5, 2]`` and counts ``[3, 1]``, S = 4, C = 3::

    row 0: context -> slots 5, 6, 7; block -> 8..11;                     sees slots [0, 12)
    row 1: context -> slot 2;        block -> 3..6; padding -> 7, 8;     sees slots [0, 7)
    lengths become [8, 3]

When every row of the cache drafts with one length and C new positions each (always for a single request), the new
entries are the one slice ``[length, length + C + S)`` of every row: no index, no mask and no copy of the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: The smallest capacity allocated (slots per row), so the first rounds do not regrow the cache.
MIN_CAPACITY = 64


@dataclass(frozen=True)
class RoundPlan:
    """Where one round's new entries go and which slots each drafting row sees (see the module docstring)."""

    rows: tuple[int, ...]  # [R] the drafting rows of the cache
    index: torch.Tensor | None  # [R] int64 the same rows on the cache's device; None: every row, in order
    counts: tuple[int, ...]  # [R] valid new context positions per row
    start: int | None  # every row writes the slots [start, start + C + S); None: per-row ``slots``
    slots: torch.Tensor | None  # [R, C + S] int64 destination slot of each new entry (ragged rows)
    positions: torch.Tensor  # [C + S] (shared) or [R, C + S] (per row) int64 RoPE positions of the new entries
    mask: torch.Tensor | None  # [R, 1, 1, W] bool: the keys each row sees; None when every row sees [0, W)
    width: int  # W: the slots the block attends over
    capacity: int  # slots the cache must have for this round's writes


class DraftKVCache:
    """Per-layer rotated keys and values of the committed context of ``B`` rows; see the module docstring."""

    def __init__(self, num_layers: int, rows: int = 1) -> None:
        self.keys: list[torch.Tensor | None] = [None] * num_layers  # [B, kv_heads, capacity, head_dim]
        self.values: list[torch.Tensor | None] = [None] * num_layers
        self.lengths: list[int] = [0] * rows  # committed positions per row

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    # ---------------------------------------------------------------------------------- rows in / out
    def add_rows(self, count: int) -> None:
        """Append ``count`` empty rows."""
        for store in (self.keys, self.values):
            for i, kv in enumerate(store):
                if kv is not None:
                    store[i] = torch.cat([kv, kv.new_zeros(count, *kv.shape[1:])], dim=0)
        self.lengths += [0] * count

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows``, in this order (a leading run of rows is kept as a view, without a copy)."""
        rows = list(rows)
        if rows == list(range(self.batch_size)):
            return
        self.lengths = [self.lengths[r] for r in rows]
        for store in (self.keys, self.values):
            for i, kv in enumerate(store):
                if kv is None:
                    continue
                if not rows:
                    store[i] = None
                elif rows == list(range(len(rows))):
                    store[i] = kv[: len(rows)]
                else:
                    store[i] = kv.index_select(0, torch.tensor(rows, dtype=torch.long, device=kv.device))

    # ------------------------------------------------------------------------------------------ rounds
    def plan(self, rows: Sequence[int] | None, counts: Sequence[int] | None, context: int, block: int,
             device: torch.device) -> RoundPlan:
        """The plan of a round for ``rows`` (None: every row) with ``counts`` valid new context positions each
        (None: ``context`` each) padded to ``context``, and a block of ``block`` positions."""
        every = rows is None or list(rows) == list(range(self.batch_size))
        chosen = tuple(range(self.batch_size)) if rows is None else tuple(rows)
        counts = (context,) * len(chosen) if counts is None else tuple(counts)
        if not chosen or len(counts) != len(chosen) or any(c < 0 or c > context for c in counts):
            raise ValueError(f"a draft round needs rows and new-context counts in [0, {context}] for each, got rows "
                             f"{list(chosen)} and counts {list(counts)}")
        lengths = [self.lengths[r] for r in chosen]
        total = context + block
        capacity = max(lengths) + total
        if every and len(set(lengths)) == 1 and all(c == context for c in counts):
            start = lengths[0]
            return RoundPlan(chosen, None, counts, start, None, torch.arange(start, start + total, device=device),
                             None, start + total, capacity)
        length = torch.tensor(lengths, dtype=torch.long, device=device)[:, None]  # [R, 1]
        count = torch.tensor(counts, dtype=torch.long, device=device)[:, None]  # [R, 1]
        i = torch.arange(context, device=device)[None, :]  # [1, C]
        context_slots = torch.where(i < count, length + i, length + block + i)  # [R, C]
        block_slots = length + count + torch.arange(block, device=device)[None, :]  # [R, S]
        slots = torch.cat([context_slots, block_slots], dim=1)  # [R, C + S]
        ends = [n + c + block for n, c in zip(lengths, counts, strict=True)]
        width = max(ends)
        mask = None
        if len(set(ends)) > 1:
            end = torch.tensor(ends, dtype=torch.long, device=device)[:, None]  # [R, 1]
            mask = (torch.arange(width, device=device)[None, :] < end)[:, None, None]  # [R, 1, 1, W]
        index = None if every else torch.tensor(chosen, dtype=torch.long, device=device)
        return RoundPlan(chosen, index, counts, None, slots, slots, mask, width, capacity)

    def store(self, layer: int, plan: RoundPlan, keys: torch.Tensor,
              values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write one layer's new entries ``[R, kv_heads, C + S, D]`` and return the keys and values the block
        attends to, ``[R, kv_heads, W, D]`` (a view of the cache when every row drafts)."""
        out = []
        for store, new in ((self.keys, keys), (self.values, values)):
            kv = self._reserve(store, layer, new, plan.capacity)
            if plan.start is not None:
                kv[:, :, plan.start : plan.start + new.shape[2]] = new
            elif plan.index is None:
                assert plan.slots is not None
                kv.scatter_(2, plan.slots[:, None, :, None].expand_as(new), new)
            else:
                assert plan.slots is not None
                kv[plan.index[:, None], :, plan.slots] = new.transpose(1, 2)  # [R, C + S, kv_heads, D]
            seen = kv[:, :, : plan.width]
            out.append(seen if plan.index is None else seen.index_select(0, plan.index))
        return out[0], out[1]

    def advance(self, plan: RoundPlan) -> None:
        """Record that every layer received the plan's new context positions."""
        for r, c in zip(plan.rows, plan.counts, strict=True):
            self.lengths[r] += c

    def _reserve(self, store: list[torch.Tensor | None], layer: int, like: torch.Tensor,
                 capacity: int) -> torch.Tensor:
        """The layer's buffer with at least ``capacity`` slots (allocated like ``like``, or doubled)."""
        kv = store[layer]
        if kv is None:
            kv = like.new_zeros(self.batch_size, like.shape[1], max(capacity, MIN_CAPACITY), like.shape[3])
        elif kv.shape[2] < capacity:
            grow = max(capacity, 2 * kv.shape[2]) - kv.shape[2]
            kv = torch.cat([kv, kv.new_zeros(kv.shape[0], kv.shape[1], grow, kv.shape[3])], dim=2)
        store[layer] = kv
        return kv
