"""`HFRaggedBatch`: many requests in one KV cache, each row with its own committed length.

Layout: one ``DynamicCache`` of width ``W`` (the longest row); row ``b`` holds its committed entries in slots
``[0, lengths[b])`` and unused slots after them, which no query ever sees. One round::

    forward_tree(tree [B, N])    appends N entries per row at slots [W, W + N); row b's queries see
                                 slots [0, lengths[b]) and their own tree ancestors, at positions
                                 lengths[b] + depth (per-row position ids)
    commit(tree, accepted)       row b gathers its own L_b accepted entries from W + path into
                                 slots [lengths[b], lengths[b] + L_b); the cache is cut to the new longest row

Worked example (two rows, lengths [3, 1], W = 3, a tree of N = 2 nodes per row)::

    slots:      0  1  2 | 3  4
    row 0 root [0  0  0 | 0  m]      row 1 root [0  m  m | 0  m]      (m = finfo.min: hidden)
    row 0 a    [0  0  0 | 0  0]      row 1 pad  [0  m  m | m  0]
    accepted: row 0 [0, 1] -> slots 3, 4; row 1 [0] -> slot 1; new lengths [5, 2], W = 5

Every gather source ``W + path[k]`` is at or after its destination ``lengths[b] + k`` (``lengths[b] <= W``,
``path[k] >= k``), and each row's destinations are distinct, so a gather followed by a scatter is exact.

A request joins with :meth:`add_row`: it is prefilled alone (the same forward as a single request's
prefill) and its entries are spliced in as a new last row; :meth:`keep_rows` drops finished rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from transformers.cache_utils import DynamicCache

from specframe.errors import GenerationError
from specframe.tree import DraftTree
from specframe.types import TargetOutput

if TYPE_CHECKING:
    from specframe_hf.target import HFTarget


class HFRaggedBatch:
    """The ragged batched view of an :class:`~specframe_hf.target.HFTarget` (see the module docstring)."""

    def __init__(self, target: HFTarget) -> None:
        self.target = target
        self.vocab_size = target.vocab_size
        self.max_length = target.max_length
        self._cache: DynamicCache | None = None
        self._lengths: list[int] = []
        self._pending = 0

    # ----------------------------------------------------------------------------------------- state
    @property
    def lengths(self) -> list[int]:
        """Committed positions per row."""
        return list(self._lengths)

    @property
    def batch_size(self) -> int:
        return len(self._lengths)

    def _layers(self) -> list[Any]:
        return [] if self._cache is None else list(self._cache.layers)

    @property
    def _width(self) -> int:
        layers = self._layers()
        return int(layers[0].keys.shape[2]) if layers else 0

    def _call(self, input_ids: torch.Tensor, cache: DynamicCache, keep: int, **kwargs: Any) -> torch.Tensor:
        t = self.target
        if t._logits_to_keep:
            kwargs["logits_to_keep"] = keep
        out = t.model(input_ids=input_ids, use_cache=True, **{t._cache_kwarg: cache}, **kwargs)
        return out.logits[:, -keep:]  # [B, keep, V]

    # ---------------------------------------------------------------------------------- rows in / out
    def add_row(self, input_ids: torch.Tensor) -> TargetOutput:
        """Prefill one request ``[1, P]`` alone and append it as the last row; logits ``[1, 1, V]``."""
        if input_ids.dim() != 2 or input_ids.shape[0] != 1 or input_ids.shape[1] == 0:
            raise GenerationError(f"add_row expects token ids [1, P], got shape {tuple(input_ids.shape)}")
        self._discard_pending()
        t = self.target
        cache = DynamicCache(config=t.model.config)
        with torch.inference_mode():
            logits = self._call(input_ids.to(t.device), cache, keep=1)
            hidden = t._taps.collect()  # [1, P, n_taps * H]
            self._splice(cache)
        self._lengths.append(int(input_ids.shape[1]))
        return TargetOutput(logits=logits.float(), hidden=hidden)

    def _splice(self, row_cache: DynamicCache) -> None:
        """Append a one-row cache as a new batch row, padding the shorter side's slots with zeros."""
        if self._cache is None:
            self._cache = row_cache
            return
        width, extra = self._width, int(row_cache.layers[0].keys.shape[2])
        full = max(width, extra)
        for layer, new in zip(self._cache.layers, row_cache.layers, strict=True):
            for name in ("keys", "values"):
                old, add = getattr(layer, name), getattr(new, name)  # [B, H, W, D], [1, H, P, D]
                old = _pad_slots(old, full)
                add = _pad_slots(add, full)
                setattr(layer, name, torch.cat([old, add], dim=0))

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in this order); the others leave the batch."""
        self._discard_pending()
        rows = list(rows)
        if not rows:
            self._cache, self._lengths = None, []
            return
        self._lengths = [self._lengths[r] for r in rows]
        if self._cache is None:
            return
        width = max(self._lengths)
        with torch.inference_mode():
            for layer in self._cache.layers:
                index = torch.tensor(rows, dtype=torch.long, device=layer.keys.device)
                layer.keys = layer.keys.index_select(0, index)[:, :, :width]
                layer.values = layer.values.index_select(0, index)[:, :, :width]

    # ------------------------------------------------------------------------------------- rounds
    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` float32 after each node of each row's own tree (padding nodes masked)."""
        if self._cache is None or tree.batch_size != self.batch_size:
            raise GenerationError(f"the tree has {tree.batch_size} rows but the batch holds {self.batch_size}",
                                  hint="add a row per request before forward_tree")
        t = self.target
        with torch.inference_mode():
            self._discard_pending()
            tree = tree.to(t.device)
            b, n = tree.batch_size, tree.capacity
            width = self._width
            lengths = torch.tensor(self._lengths, dtype=torch.long, device=t.device)  # [B]
            past_visible = torch.arange(width, device=t.device)[None, :] < lengths[:, None]  # [B, W]
            eye = torch.eye(n, dtype=torch.bool, device=t.device)
            tree_visible = tree.ancestor_mask() | eye  # [B, N, N]
            visible = torch.cat([past_visible[:, None, :].expand(b, n, width), tree_visible], dim=2)
            mask = torch.full((b, 1, n, width + n), torch.finfo(t.dtype).min, dtype=t.dtype, device=t.device)
            mask.masked_fill_(visible[:, None], 0.0)  # [B, 1, N, W + N]
            positions = tree.positions(lengths[:, None])  # [B, N]
            logits = self._call(tree.tokens, self._cache, keep=n, attention_mask=mask, position_ids=positions)
            hidden = t._taps.collect()  # [B, N, n_taps * H]
        self._pending = n
        return TargetOutput(logits=logits.float(), hidden=hidden)

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        """Per row, keep the entries of ``accepted_nodes`` ``[B, D + 1]`` (root first, -1 padded)."""
        if self._pending == 0 or self._cache is None:
            raise GenerationError("commit was called without a pending forward_tree")
        counts = (accepted_nodes >= 0).sum(dim=1).tolist()  # [B] accepted path lengths
        if min(counts) < 1 or bool((accepted_nodes[:, 0] != 0).any()):
            raise GenerationError(f"accepted_nodes {accepted_nodes.tolist()} is not a root-first path per row")
        width = self._width - self._pending
        longest = max(counts)
        dev = self._layers()[0].keys.device
        path = accepted_nodes[:, :longest].to(dev)  # [B, M]
        k = torch.arange(longest, device=dev)[None, :]  # [1, M]
        lengths = torch.tensor(self._lengths, dtype=torch.long, device=dev)[:, None]  # [B, 1]
        dst = lengths + k  # [B, M]
        # Padding entries copy a row's own slot onto itself (distinct from the row's real destinations).
        src = torch.where(path >= 0, width + path, dst)  # [B, M]
        new_lengths = [n + c for n, c in zip(self._lengths, counts, strict=True)]
        keep = max(new_lengths)
        with torch.inference_mode():
            for layer in self._cache.layers:
                for name in ("keys", "values"):
                    kv: torch.Tensor = getattr(layer, name)  # [B, H, W + N, D]
                    h, d = kv.shape[1], kv.shape[3]
                    gather_at = src[:, None, :, None].expand(-1, h, -1, d)
                    moved = torch.gather(kv, 2, gather_at)  # [B, H, M, D]
                    kv.scatter_(2, dst[:, None, :, None].expand(-1, h, -1, d), moved)
                    setattr(layer, name, kv[:, :, :keep])
        self._lengths = new_lengths
        self._pending = 0

    def _discard_pending(self) -> None:
        if self._pending and self._cache is not None:
            width = self._width - self._pending
            for layer in self._cache.layers:
                layer.keys = layer.keys[:, :, :width]
                layer.values = layer.values[:, :, :width]
        self._pending = 0


def _pad_slots(kv: torch.Tensor, width: int) -> torch.Tensor:  # [B, H, width, D]
    extra = width - kv.shape[2]
    if extra <= 0:
        return kv
    return torch.cat([kv, kv.new_zeros(kv.shape[0], kv.shape[1], extra, kv.shape[3])], dim=2)
