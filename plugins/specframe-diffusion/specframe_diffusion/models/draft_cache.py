"""`DraftKVCache`: the draft backbone's key/value cache for the rows of a batch; it holds committed context only.

Layout: per layer, rotated keys and values ``[B, kv_heads, capacity, head_dim]``. Row ``b`` holds its committed
context positions ``0 .. lengths[b] - 1`` in the slots of the same index (slot = position); the slots after them
are scratch. The capacity grows geometrically (zero-filled, so scratch is always finite), so new entries are
written in place instead of concatenating the cache.

The backbone writes two kinds of entries (``models/backbone.py``), each a `SlotPlan` made by :meth:`plan` for the
rows concerned, ``T`` new entries per row, the first ``counts[r]`` of them valid::

    row r's T new entries go to the slots [lengths[r], lengths[r] + T)  (slot = position)
    context (kept):    counts[r] <= T valid entries; lengths[r] += counts[r]; the rest stays scratch
    block (dropped):   read back by the block's attention: row r sees its slots [0, lengths[r] + T) (a key mask
                       when the rows' lengths differ); lengths unchanged, so the next write overwrites the block

This is DFlash's "append context + block, then ``crop(start)``" (docs/concepts/block-drafters.md) without
materialising anything but the committed context. Worked example: rows with lengths ``[5, 2]``; a block of 4::

    row 0: block -> slots 5..8, sees slots [0, 9);   row 1: block -> slots 2..5, sees slots [0, 6) (mask)
    then 3 and 1 committed context positions (T = 3, counts [3, 1]):
    row 0: slots 5, 6, 7;   row 1: slot 2 (slots 3, 4 scratch);   lengths become [8, 3]

When every row of the cache writes at one length (always for a single request), the new entries are the one
slice ``[length, length + T)`` of every row: no index, no mask and no copy of the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: The smallest capacity allocated (slots per row), so the first rounds do not regrow the cache.
MIN_CAPACITY = 64


@dataclass(frozen=True)
class SlotPlan:
    """Where ``T`` new entries per row go and which slots a row's queries see (see the module docstring)."""

    rows: tuple[int, ...]  # [R] the cache rows written
    index: torch.Tensor | None  # [R] int64 the same rows on the cache's device; None: every row, in order
    counts: tuple[int, ...]  # [R] valid new entries per row (the committed ones, for context entries)
    start: int | None  # every row writes the slots [start, start + T); None: per-row ``slots``
    slots: torch.Tensor | None  # [R, T] int64 destination slot of each new entry (rows of different lengths)
    positions: torch.Tensor  # [T] (shared) or [R, T] (per row) int64 RoPE positions of the new entries
    mask: torch.Tensor | None  # [R, 1, 1, W] bool: the keys each row sees; None when every row sees [0, W)
    width: int  # W: the slots a query of the new entries attends over (the longest row's end)


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

    # ------------------------------------------------------------------------------------------ writes
    def plan(self, rows: Sequence[int] | None, new: int, counts: Sequence[int] | None,
             device: torch.device) -> SlotPlan:
        """The plan of ``new`` entries for each of ``rows`` (None: every row), ``counts`` of them valid per row
        (None: all)."""
        every = rows is None or list(rows) == list(range(self.batch_size))
        chosen = tuple(range(self.batch_size)) if rows is None else tuple(rows)
        counts = (new,) * len(chosen) if counts is None else tuple(counts)
        if not chosen or len(counts) != len(chosen) or any(not 0 <= c <= new for c in counts) \
                or any(not 0 <= r < self.batch_size for r in chosen):
            raise ValueError(f"a draft cache write needs rows of the cache's {self.batch_size} and counts in "
                             f"[0, {new}] for each, got rows {list(chosen)} and counts {list(counts)}")
        lengths = [self.lengths[r] for r in chosen]
        width = max(lengths) + new
        if every and len(set(lengths)) == 1:
            start = lengths[0]
            return SlotPlan(chosen, None, counts, start, None, torch.arange(start, start + new, device=device),
                            None, width)
        length = torch.tensor(lengths, dtype=torch.long, device=device)[:, None]  # [R, 1]
        slots = length + torch.arange(new, device=device)[None, :]  # [R, T]
        mask = None
        if len(set(lengths)) > 1:
            mask = (torch.arange(width, device=device)[None, :] < length + new)[:, None, None]  # [R, 1, 1, W]
        index = None if every else torch.tensor(chosen, dtype=torch.long, device=device)
        return SlotPlan(chosen, index, counts, None, slots, slots, mask, width)

    def write(self, layer: int, plan: SlotPlan, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Write one layer's new entries ``[R, kv_heads, T, D]`` into the plan's slots."""
        for store, new in ((self.keys, keys), (self.values, values)):
            kv = self._reserve(store, layer, new, plan.width)
            if plan.start is not None:
                kv[:, :, plan.start : plan.start + new.shape[2]] = new
            elif plan.index is None:
                assert plan.slots is not None
                kv.scatter_(2, plan.slots[:, None, :, None].expand_as(new), new)
            else:
                assert plan.slots is not None
                kv[plan.index[:, None], :, plan.slots] = new.transpose(1, 2)  # [R, T, kv_heads, D]

    def read(self, layer: int, plan: SlotPlan) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values ``[R, kv_heads, W, D]`` the plan's rows see (a view of the cache when every row
        is written; padding slots of shorter rows are hidden by ``plan.mask``)."""
        out = []
        for store in (self.keys, self.values):
            kv = store[layer]
            assert kv is not None, "read after write"
            seen = kv[:, :, : plan.width]
            out.append(seen if plan.index is None else seen.index_select(0, plan.index))
        return out[0], out[1]

    def advance(self, plan: SlotPlan) -> None:
        """Record that every layer received the plan's valid entries as committed context."""
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
