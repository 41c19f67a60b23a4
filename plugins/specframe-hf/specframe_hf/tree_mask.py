"""`TreeMaskBuffer`: the additive 4-D attention mask for tree verification over ragged rows, in one reusable buffer.

A round runs ``N`` query tokens per row (root + draft nodes) on top of a cache of width ``W``; row ``b`` has
committed ``lengths[b] <= W`` positions in slots ``[0, lengths[b])``. Query ``i`` of row ``b`` may see the row's
committed slots and the tree nodes that are itself or its ancestors (their entries sit at ``W + j``). The mask is
additive (``0`` visible, ``finfo(dtype).min`` hidden), never bool: the eager backend adds the mask to the scores,
so a bool mask would be added as 0/1 and silently give wrong logits.

Worked example (two rows, lengths ``[2, 1]``, W = 2, tree ``parents = [-1, 0, 0]``, ``m = finfo.min``)::

    columns:   c0  c1 | root  a   b          columns:   c0  c1 | root  a   b
    row 0 root [ 0   0 |  0    m   m ]       row 1 root [ 0   m |  0    m   m ]
    row 0 a    [ 0   0 |  0    0   m ]       row 1 a    [ 0   m |  0    0   m ]
    row 0 b    [ 0   0 |  0    m   0 ]       row 1 b    [ 0   m |  0    m   0 ]

Instead of allocating ``[B, 1, N, W + N]`` every round, the buffer ``[B, 1, R, C]`` is allocated once (and grown
geometrically when a round needs more). Columns below the shortest row's length are zero in every row; per round
only columns ``[shortest, W + N)`` are written (the ragged part and the tree block). Columns an older round wrote
and that now lie below the shortest length are reset to zero lazily. With one row (or rows of equal length) the
work per round is O(N x N) plus the stale columns, independent of the context length.
"""

from __future__ import annotations

import torch


class TreeMaskBuffer:
    """Reusable additive tree-attention mask over ragged rows.

    Args:
        dtype: dtype of the attention scores (the model's dtype).
        device: where the mask lives (the model's device).
        min_columns: initial column capacity.
    """

    def __init__(self, dtype: torch.dtype, device: torch.device | str, *, min_columns: int = 256) -> None:
        self.dtype = dtype
        self.device = torch.device(device)
        self.min_columns = min_columns
        self.hidden_value = torch.finfo(dtype).min
        self.allocations = 0  # how many times a buffer was allocated (grows only when a round needs more)
        self._buf: torch.Tensor | None = None  # [Bcap, 1, R, C]
        self._dirty = 0  # columns >= _dirty may hold non-zero values; those below are zero everywhere

    @property
    def shape(self) -> tuple[int, ...]:
        return () if self._buf is None else tuple(self._buf.shape)

    def build(self, visible: torch.Tensor, lengths: list[int], width: int) -> torch.Tensor:
        """Return this round's mask, a view ``[B, 1, N, width + N]`` into the buffer, valid until the next call.

        Args:
            visible: ``[B, N, N]`` bool, ``visible[b, i, j]``: node ``i`` of row ``b`` may attend to node ``j``.
            lengths: committed positions per row (each ``<= width``).
            width: the cache slots before the tree block.
        """
        b, n, _ = visible.shape
        self._reserve(b, n, width + n)
        buf = self._buf
        assert buf is not None
        shortest = min(lengths)
        # Step 1: columns that older rounds wrote and that every row now sees become zero.
        if self._dirty < shortest:
            buf[:, :, :, self._dirty : shortest] = 0
        # Step 2: the ragged part: slot c of row b is visible iff c < lengths[b].
        if shortest < width:
            cols = torch.arange(shortest, width, device=self.device)  # [W - shortest]
            rows = torch.tensor(lengths, dtype=torch.long, device=self.device)  # [B]
            hidden = cols[None, :] >= rows[:, None]  # [B, W - shortest]
            part = buf[:b, 0, :n, shortest:width]  # [B, N, W - shortest]
            part.zero_()
            part.masked_fill_(hidden[:, None, :], self.hidden_value)
        # Step 3: the tree block.
        block = buf[:b, 0, :n, width : width + n]  # [B, N, N]
        block.fill_(self.hidden_value)
        block.masked_fill_(visible.to(self.device), 0)
        self._dirty = shortest
        return buf[:b, :, :n, : width + n]

    def reset(self) -> None:
        """Forget every round (start of new requests); the allocation is kept."""
        if self._buf is not None:
            self._buf[:, :, :, self._dirty :] = 0
        self._dirty = self._buf.shape[-1] if self._buf is not None else 0

    def _reserve(self, batch: int, rows: int, columns: int) -> None:
        """Make sure the buffer holds ``[batch, 1, rows, columns]``; grow geometrically if not."""
        if self._buf is not None:
            cap_b, _, cap_r, cap_c = self._buf.shape
            if batch <= cap_b and rows <= cap_r and columns <= cap_c:
                return
            new_r = max(rows, 2 * cap_r) if rows > cap_r else cap_r
            new_c = max(columns, 2 * cap_c) if columns > cap_c else cap_c
            new_b = max(batch, cap_b)
        else:
            new_b, new_r, new_c = batch, max(rows, 16), max(columns, self.min_columns)
        self._buf = torch.zeros(new_b, 1, new_r, new_c, dtype=self.dtype, device=self.device)
        self._dirty = new_c
        self.allocations += 1
