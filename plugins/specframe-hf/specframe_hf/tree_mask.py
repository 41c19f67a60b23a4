"""`TreeMaskBuffer`: the additive 4-D attention mask for tree verification, kept in one reusable buffer.

A tree forward runs N query tokens (root + draft nodes) on top of ``past`` cached positions. Query ``i`` may
see every cached position and the tree nodes that are itself or its ancestors. The mask is additive (``0``
visible, ``finfo(dtype).min`` hidden), never bool: the eager backend adds the mask to the scores, so a bool
mask would be added as 0/1 and silently give wrong logits.

Worked example (one row, past = 2, tree ``parents = [-1, 0, 0]``, ``m = finfo.min``)::

    columns:   c0  c1 | root  a   b
    root     [  0   0 |  0    m   m ]
    a        [  0   0 |  0    0   m ]
    b        [  0   0 |  0    m   0 ]

Instead of allocating ``[B, 1, N, past + N]`` every round, the buffer ``[B, 1, R, C]`` is allocated once (and
grown geometrically when a round needs more). Past columns are zero; only the ``N x N`` tree block is written
per round. The columns the previous tree block used become committed context in the next round, so they are
reset to zero lazily: the buffer remembers the column range that may hold stale tree values and clears only
the part of it that now lies in the past. Work per round is O(R x (stale width) + N x N), independent of the
context length.
"""

from __future__ import annotations

import torch


class TreeMaskBuffer:
    """Reusable additive tree-attention mask.

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
        self._stale = (0, 0)  # columns [lo, hi) that may still hold tree-block values

    @property
    def shape(self) -> tuple[int, ...]:
        return () if self._buf is None else tuple(self._buf.shape)

    def build(self, visible: torch.Tensor, past: int) -> torch.Tensor:
        """Return the mask for this round, a view ``[B, 1, N, past + N]`` into the buffer.

        Args:
            visible: ``[B, N, N]`` bool, ``visible[b, i, j]``: tree node ``i`` may attend to tree node ``j``.
            past: number of cached positions every node sees.

        The view stays valid until the next call.
        """
        b, n, _ = visible.shape
        self._reserve(b, n, past + n)
        buf = self._buf
        assert buf is not None
        # Step 1: columns that held an older tree block and now lie in the past become visible context.
        lo, hi = self._stale
        stale_end = min(hi, past)
        if lo < stale_end:
            buf[:, :, :, lo:stale_end] = 0
        # Step 2: write this round's tree block; everything else in rows :n and columns :past is zero.
        block = buf[:b, 0, :n, past : past + n]  # [B, N, N]
        block.fill_(self.hidden_value)
        block.masked_fill_(visible.to(self.device), 0)
        # Step 3: remember which columns now hold tree values (older stale columns >= past included).
        self._stale = (past, max(hi, past + n))
        return buf[:b, :, :n, : past + n]

    def reset(self) -> None:
        """Forget every tree block (start of a new request); the allocation is kept."""
        if self._buf is not None:
            lo, hi = self._stale
            if lo < hi:
                self._buf[:, :, :, lo:hi] = 0
        self._stale = (0, 0)

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
        self._stale = (0, 0)
        self.allocations += 1
