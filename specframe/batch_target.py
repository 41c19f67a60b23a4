"""`RaggedBatchTarget`: what the batched decode loop needs from a target (see `specframe.batch_decode`).

A target supports batched decoding when :meth:`TargetModel.ragged_batch` returns an object with this
surface. Each row is one request with its own committed length; rows join with :meth:`add_row` (the
request's prompt prefilled alone) and leave with :meth:`keep_rows`. ``forward_tree`` takes one tree per row,
padded to the batch's largest tree with invalid nodes (`DraftTree.stack`), and scores each row on its own
prefix at its own positions; ``commit`` keeps a different number of accepted nodes per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

from specframe.tree import DraftTree
from specframe.types import TargetOutput


@runtime_checkable
class RaggedBatchTarget(Protocol):
    """Rows with their own lengths in one target forward per round."""

    vocab_size: int
    max_length: int | None

    @property
    def lengths(self) -> list[int]:
        """Committed positions per row."""
        ...

    def add_row(self, input_ids: torch.Tensor) -> TargetOutput:
        """Prefill ``input_ids`` ``[1, P]`` alone, append it as the last row; logits ``[1, 1, V]``."""
        ...

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows``, in this order."""
        ...

    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` after each node of each row's tree; nothing committed."""
        ...

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        """Keep each row's ``accepted_nodes`` ``[B, D + 1]`` (root first, -1 padded)."""
        ...
