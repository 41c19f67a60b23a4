"""`SlotCache`: preallocated key/value buffers for the rows of a decode loop; rounds write and move in place.

Storage: one tensor ``[L, 2, B_cap, H_kv, C, D]`` (layer, key/value, row, head, slot, head dim). Row ``b`` holds its
committed positions in slots ``[0, lengths[b])`` (slot = position). A round writes its ``N`` tree entries into the
slots right after each row's own length, ``[lengths[b], lengths[b] + N)``, so nothing is appended or concatenated,
and committing a path moves only the accepted entries that are not already where they belong::

    row b accepts the nodes path = [0, p_1, ..., p_k] (root first):
        entry lengths[b] + p_i  ->  slot lengths[b] + i     for every i with p_i != i  (a chain: no move at all)
        lengths[b] += k + 1

One indexed copy moves every layer's keys and values for every row at once. Every source slot is at or after its
destination (``p_i >= i``), and sources are read before anything is written (advanced indexing copies), so the
move is exact.

Worked example (one row, length 5, a tree of 4 nodes ``parents = [-1, 0, 0, 2]``, accepted path ``[0, 2, 3]``)::

    round writes slots 5 6 7 8 for nodes 0 1 2 3
    commit: node 2 (slot 7) -> slot 6, node 3 (slot 8) -> slot 7; node 0 stays at 5; length 8

Capacity is reserved when rows join (:meth:`reserve`: every row's prompt, its token cap and one tree), so the
buffer is not reallocated while requests decode; ``allocations`` counts every (re)allocation, for tests. Rows
leave by compaction into the leading rows (:meth:`keep_rows`), again without reallocating.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class SlotCache:
    """See the module docstring."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device) -> None:
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.dtype, self.device = dtype, device
        self.buffer: torch.Tensor | None = None  # [L, 2, B_cap, H_kv, C, D]
        self.lengths: list[int] = []  # committed positions per row
        self.allocations = 0

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @property
    def capacity(self) -> int:
        """Slots per row."""
        return 0 if self.buffer is None else int(self.buffer.shape[4])

    def reserve(self, rows: int, slots: int) -> None:
        """Make room for ``rows`` rows of ``slots`` slots each (existing rows and lengths kept). Grows
        geometrically, so a series of joining rows reallocates O(log) times."""
        buf = self.buffer
        if buf is not None and rows <= buf.shape[2] and slots <= buf.shape[4]:
            return
        if buf is None:
            new_rows, new_slots = rows, slots
        else:
            cap_rows, cap_slots = int(buf.shape[2]), int(buf.shape[4])
            new_rows = max(rows, 2 * cap_rows) if rows > cap_rows else cap_rows
            new_slots = max(slots, cap_slots + cap_slots // 2) if slots > cap_slots else cap_slots
        fresh = torch.zeros(self.layers, 2, new_rows, self.kv_heads, new_slots, self.head_dim, dtype=self.dtype,
                            device=self.device)
        if buf is not None and self.rows:
            width = max(self.lengths, default=0)
            fresh[:, :, : self.rows, :, :width] = buf[:, :, : self.rows, :, :width]
        self.buffer = fresh
        self.allocations += 1

    def layer_views(self, rows: slice) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the key and value buffers ``[R, H_kv, C, D]`` of the rows ``rows`` (views)."""
        assert self.buffer is not None, "reserve() before use"
        buf = self.buffer
        return [(buf[i, 0, rows], buf[i, 1, rows]) for i in range(self.layers)]

    def add_rows(self, lengths: Sequence[int]) -> slice:
        """Append rows whose first ``lengths`` slots a forward has just filled (call :meth:`reserve` first);
        returns their row slice."""
        first = self.rows
        self.lengths += [int(n) for n in lengths]
        return slice(first, self.rows)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows``, in this order, as the leading rows of the buffer (no reallocation)."""
        rows = list(rows)
        if rows == list(range(self.rows)):
            return
        lengths = [self.lengths[r] for r in rows]
        if rows and self.buffer is not None and rows != list(range(len(rows))):
            width = max(lengths)
            index = torch.tensor(rows, dtype=torch.long, device=self.device)
            self.buffer[:, :, : len(rows), :, :width] = self.buffer[:, :, index, :, :width]
        self.lengths = lengths

    def commit(self, paths: Sequence[Sequence[int]]) -> None:
        """Keep each row's accepted path ``paths[b]`` (node indices, root first) of the round just written."""
        rows: list[int] = []
        src: list[int] = []
        dst: list[int] = []
        for b, path in enumerate(paths):
            base = self.lengths[b]
            for i, node in enumerate(path):
                if node != i:
                    rows.append(b)
                    src.append(base + node)
                    dst.append(base + i)
        if rows:
            assert self.buffer is not None
            r = torch.tensor(rows, dtype=torch.long, device=self.device)
            s = torch.tensor(src, dtype=torch.long, device=self.device)
            d = torch.tensor(dst, dtype=torch.long, device=self.device)
            self.buffer[:, :, r, :, d] = self.buffer[:, :, r, :, s]
        self.lengths = [n + len(p) for n, p in zip(self.lengths, paths, strict=True)]

    def clear(self) -> None:
        """Forget every row (the allocation is kept for the next requests)."""
        self.lengths = []
