"""`HFRows`: the decode loop's rows over one KV cache, each row with its own committed length.

Layout: one ``DynamicCache`` of width ``W`` (the longest row); row ``b`` holds its committed entries in slots
``[0, lengths[b])`` and unused slots after them, which no query ever sees. One round::

    forward_tree(tree [B, N])    appends N entries per row at slots [W, W + N); row b's queries see
                                 slots [0, lengths[b]) and their own tree ancestors, at positions
                                 lengths[b] + depth (per-row position ids)
    commit(tree, accepted)       row b's L_b accepted entries go to slots [lengths[b], lengths[b] + L_b);
                                 the cache is cut to the new longest row

Commit has one fast path: when every row is as long as the cache (one row, or rows of equal length) and every
accepted path is the block's first nodes (always for chains), the entries are already in place and the cache is
only cut. Otherwise each row gathers its entries from ``W + path`` into ``lengths[b] + k``. Every gather source
is at or after its destination (``lengths[b] <= W``, ``path[k] >= k``) and each row's destinations are distinct,
so a gather followed by a scatter is exact.

Worked example (two rows, lengths [3, 1], W = 3, a tree of N = 2 nodes per row)::

    slots:      0  1  2 | 3  4
    accepted: row 0 [0, 1] -> slots 3, 4 (in place); row 1 [0] -> slot 1; new lengths [5, 2], W = 5

Rows join with :meth:`add_row` (prefilled alone, the same forward as a single request's prefill, spliced in as
new last rows) and leave with :meth:`keep_rows`. A single request is one row; `HFTarget`'s own API runs on an
`HFRows` too, so there is one commit path with the full checks for every row count.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import DynamicCache

from specframe.errors import ContractError, GenerationError
from specframe.tree import DraftTree
from specframe.types import TargetOutput
from specframe_hf.runner import ModelRunner
from specframe_hf.tree_mask import TreeMaskBuffer


class HFRows:
    """See the module docstring. ``taps`` are tapped for this object's forwards only (until :meth:`close`)."""

    def __init__(self, runner: ModelRunner, taps: Sequence[int] = ()) -> None:
        self.runner = runner
        self.vocab_size = runner.vocab_size
        self.max_length = runner.max_length
        self.device = runner.device
        self.taps = tuple(taps)
        self._mask = TreeMaskBuffer(runner.dtype, runner.device)
        self._cache: DynamicCache | None = None
        self._lengths: list[int] = []
        self._pending = 0
        runner.taps.set(self.taps)

    def close(self) -> None:
        """Release the cache and the taps (the runner's layers carry no hooks afterwards)."""
        self._cache, self._lengths, self._pending = None, [], 0
        self.runner.taps.set(())

    # ----------------------------------------------------------------------------------------- state
    @property
    def lengths(self) -> list[int]:
        """Committed positions per row."""
        return list(self._lengths)

    @property
    def batch_size(self) -> int:
        return len(self._lengths)

    @property
    def cache(self) -> DynamicCache | None:
        """The KV cache (for inspection; None before the first row)."""
        return self._cache

    @property
    def mask(self) -> TreeMaskBuffer:
        """The reusable tree-mask buffer (for inspection)."""
        return self._mask

    @property
    def _width(self) -> int:
        return 0 if self._cache is None else int(self._cache.layers[0].keys.shape[2])

    # ---------------------------------------------------------------------------------- rows in / out
    def add_row(self, input_ids: torch.Tensor, capacity: int | None = None) -> TargetOutput:
        """Prefill ``input_ids`` ``[R, P]`` (rows of one length, usually R = 1) and append them as the last rows;
        logits ``[R, 1, V]`` float32 at the last position, taps ``[R, P, n_taps * H]``."""
        length = self.runner.check_prompt_ids(input_ids)
        self._discard_pending()
        cache = self.runner.new_cache()
        with torch.inference_mode():
            logits, hidden = self.runner.forward(input_ids.to(self.device), cache, keep=1)
            self._splice(cache)
        self._lengths += [length] * int(input_ids.shape[0])
        return TargetOutput(logits=logits, hidden=hidden)

    def _splice(self, rows_cache: DynamicCache) -> None:
        """Append a cache's rows as new batch rows, padding the shorter side's slots with zeros."""
        if self._cache is None:
            self._cache = rows_cache
            return
        width, extra = self._width, int(rows_cache.layers[0].keys.shape[2])
        full = max(width, extra)
        for layer, new in zip(self._cache.layers, rows_cache.layers, strict=True):
            for name in ("keys", "values"):
                old, add = getattr(layer, name), getattr(new, name)  # [B, H, W, D], [R, H, P, D]
                setattr(layer, name, torch.cat([_pad_slots(old, full), _pad_slots(add, full)], dim=0))

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in this order); the others leave."""
        self._discard_pending()
        rows = list(rows)
        if rows == list(range(self.batch_size)):
            return
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
        """Logits ``[B, N, V]`` float32 after each node of each row's tree (padding nodes see only themselves and
        their row's past, so no score row is all-hidden); nothing is committed."""
        if self._cache is None:
            raise GenerationError("forward_tree was called before prefill", hint="prefill the prompt first")
        if tree.batch_size != self.batch_size:
            raise GenerationError(f"the tree has {tree.batch_size} rows but the cache holds {self.batch_size}",
                                  hint="keep one tree row per prefilled sequence")
        with torch.inference_mode():
            self._discard_pending()
            tree = tree.to(self.device)
            n = tree.capacity
            longest = max(self._lengths)
            # A tree is never deeper than its capacity - 1, so the depth is read only near the context's end.
            if self.max_length is not None and longest + n - 1 >= self.max_length \
                    and longest + tree.max_depth >= self.max_length:
                raise GenerationError(
                    f"a tree of depth {tree.max_depth} on {longest} cached tokens runs past the "
                    f"{self.runner.model_type} target's context of {self.max_length}",
                    hint="trim the tree to the remaining context (the pipeline does this automatically)")
            width = self._width
            if n == 1 and min(self._lengths) == width:
                mask = None  # one token per row that sees its whole row: the model's own causal step (plain decoding)
            else:
                eye = torch.eye(n, dtype=torch.bool, device=self.device)
                mask = self._mask.build(tree.ancestor_mask() | eye, self._lengths, width)  # [B, 1, N, W + N]
            if len(self._lengths) == 1:
                positions = tree.positions(self._lengths[0])
            else:
                positions = tree.positions(torch.tensor(self._lengths, dtype=torch.long, device=self.device))
            logits, hidden = self.runner.forward(tree.tokens, self._cache, keep=n, attention_mask=mask,
                                                 position_ids=positions)
        self._pending = n
        return TargetOutput(logits=logits, hidden=hidden)

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor,
               paths: Sequence[Sequence[int]] | None = None) -> None:
        """Per row, keep the entries of ``accepted_nodes`` ``[B, D + 1]`` (root first, increasing, -1 padded);
        ``paths``: the same paths on the host, read and checked by the caller (then nothing is read here),
        otherwise one read checks them."""
        if self._pending == 0 or self._cache is None:
            raise GenerationError("commit was called without a pending forward_tree",
                                  hint="call forward_tree(tree) and then commit(tree, accepted_nodes)")
        if tree.capacity != self._pending:
            raise GenerationError(f"commit got a tree of {tree.capacity} nodes but the last forward_tree ran "
                                  f"{self._pending}", hint="commit the tree that was just verified")
        if accepted_nodes.dim() != 2 or accepted_nodes.shape[0] != self.batch_size:
            raise ContractError(f"accepted_nodes has shape {tuple(accepted_nodes.shape)}, expected "
                                f"[{self.batch_size}, D + 1]", stage="verifier")
        if paths is not None:  # read by the caller: nothing to read or check here
            facts = [[len(p), 1, int(list(p) == list(range(len(p))))] for p in paths]
        else:  # one transfer: each row's path length, whether it is a well-formed path and the block's first nodes
            cols = torch.arange(accepted_nodes.shape[1], device=accepted_nodes.device)  # [D + 1]
            counts_t = (accepted_nodes >= 0).sum(dim=1)  # [B]
            inside = cols < counts_t.unsqueeze(1)  # [B, D + 1]: the leading, non-padding entries
            increasing = torch.ones_like(inside)
            increasing[:, 1:] = accepted_nodes[:, 1:] > accepted_nodes[:, :-1]
            well_formed = (accepted_nodes[:, 0] == 0) \
                & ((accepted_nodes < self._pending) & increasing | ~inside).all(1) \
                & ((accepted_nodes >= 0) == inside).all(dim=1)  # [B]
            in_place = ((accepted_nodes == cols) | ~inside).all(dim=1)  # [B]
            facts = torch.stack([counts_t, well_formed.long(), in_place.long()], dim=1).tolist()  # [B, 3]
        if not all(row[1] for row in facts):
            raise ContractError(f"accepted_nodes {accepted_nodes.tolist()} is not a root-first path of the tree "
                                "in every row (it must start with node 0, increase, stay inside the tree and be "
                                "padded with -1 at the end)", stage="verifier")
        counts = [row[0] for row in facts]
        width = self._width - self._pending
        new_lengths = [n + c for n, c in zip(self._lengths, counts, strict=True)]
        keep = max(new_lengths)
        with torch.inference_mode():
            if all(row[2] for row in facts) and all(n == width for n in self._lengths):
                self._cut(keep)  # Step 1: every row's entries already sit at [width, width + count)
            else:  # Step 2: gather each row's entries to its own length, then cut
                self._gather(accepted_nodes[:, : max(counts)], width, keep)
        self._lengths = new_lengths
        self._pending = 0

    def _gather(self, path: torch.Tensor, width: int, keep: int) -> None:
        """Move row ``b``'s entries ``width + path[b, k]`` to ``lengths[b] + k`` and cut the cache to ``keep``."""
        dev = self._cache.layers[0].keys.device
        path = path.to(dev)  # [B, M]
        k = torch.arange(path.shape[1], device=dev)[None, :]  # [1, M]
        dst = torch.tensor(self._lengths, dtype=torch.long, device=dev)[:, None] + k  # [B, M]
        src = torch.where(path >= 0, width + path, dst)  # padding copies a row's own slot onto itself
        for layer in self._cache.layers:
            for name in ("keys", "values"):
                kv: torch.Tensor = getattr(layer, name)  # [B, H, W + N, D]
                h, d = kv.shape[1], kv.shape[3]
                moved = torch.gather(kv, 2, src[:, None, :, None].expand(-1, h, -1, d))  # [B, H, M, D]
                kv.scatter_(2, dst[:, None, :, None].expand(-1, h, -1, d), moved)
                setattr(layer, name, kv[:, :, :keep])

    def _cut(self, keep: int) -> None:
        for layer in self._cache.layers:
            layer.keys = layer.keys[:, :, :keep]
            layer.values = layer.values[:, :, :keep]

    def _discard_pending(self) -> None:
        """Drop the entries of a tree that was run but never committed."""
        if self._pending and self._cache is not None:
            self._cut(self._width - self._pending)
        self._pending = 0


def _pad_slots(kv: torch.Tensor, width: int) -> torch.Tensor:  # [B, H, width, D]
    extra = width - kv.shape[2]
    if extra <= 0:
        return kv
    return torch.cat([kv, kv.new_zeros(kv.shape[0], kv.shape[1], extra, kv.shape[3])], dim=2)
