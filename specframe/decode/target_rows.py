"""`target_rows`: the decode loop's `TargetRows` for any target.

A target whose adapter batches requests (:meth:`TargetModel.ragged_batch` returns rows) is used as it is. Any
other `TargetModel` decodes one row at a time through `OneRowTarget`, which drives the target's own
``prefill`` / ``forward_tree`` / ``commit`` and sets the loop's layer taps for the loop's forwards only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specframe.errors import ConfigError
from specframe.interfaces import TargetModel, TargetRows
from specframe.tree import DraftTree
from specframe.types import TargetOutput


class OneRowTarget:
    """`TargetRows` of at most one row over a single-sequence `TargetModel`."""

    def __init__(self, target: TargetModel, taps: Sequence[int] = ()) -> None:
        self.target = target
        self.vocab_size = target.vocab_size
        self.max_length = target.max_length
        self.device = torch.device(target.device)
        self._active = False
        self._taps = tuple(taps)
        target.reset()
        target.set_taps(self._taps)

    @property
    def lengths(self) -> list[int]:
        return [self.target.cache_len] if self._active else []

    def add_row(self, input_ids: torch.Tensor, capacity: int | None = None) -> TargetOutput:
        if self._active:
            raise ConfigError(f"target {type(self.target).__name__} decodes one request at a time",
                              hint="its adapter needs ragged_batch() for --batch-size above 1")
        out = self.target.prefill(input_ids)
        self._active = True
        return out

    def keep_rows(self, rows: Sequence[int]) -> None:
        if not list(rows):
            self.target.reset()
            self._active = False

    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        return self.target.forward_tree(tree)

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor,
               paths: Sequence[Sequence[int]] | None = None) -> None:
        self.target.commit(tree, accepted_nodes)

    def close(self) -> None:
        self.target.reset()
        if self._taps:
            self.target.set_taps(())
        self._active = False


def target_rows(target: TargetModel, taps: Sequence[int]) -> TargetRows:
    """The rows the decode loop drives ``target`` through, tapping ``taps`` in their forwards."""
    rows = target.ragged_batch(taps)
    return rows if rows is not None else OneRowTarget(target, taps)
