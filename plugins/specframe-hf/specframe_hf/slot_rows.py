"""`SlotRows`: the decode loop's rows over preallocated KV slots, run by the lean decoder forward.

The engine path of the ``hf`` adapter for the Llama family (:mod:`specframe_hf.decoder` says which models take it;
others use :class:`specframe_hf.rows.HFRows` over transformers' own forward). Per round, for ``B`` rows of lengths
``lengths[b]`` and a tree of ``N`` nodes per row::

    forward_tree(tree [B, N]):  node j of row b is written at slot lengths[b] + j, at position lengths[b] + depth
                                (the slot layout of `SlotCache`); queries attend over the slots [0, W),
                                W = max(lengths) + N, through ONE additive mask [B, 1, N, W] built from the
                                tree's ancestor relation and shared by every layer (:func:`slot_tree_mask`)
    commit(tree, accepted, paths): the accepted entries move within each row (a chain: none move); the host
                                paths come from the round's one device-to-host read, so commit reads nothing

A row's capacity is reserved when it joins (its prompt, the loop's token cap and one tree), so rounds never
allocate cache memory; ``cache.allocations`` counts (re)allocations. A single request is one row.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from specframe.errors import ContractError, GenerationError
from specframe.tree import DraftTree
from specframe.types import TargetOutput
from specframe_hf.decoder import DecoderForward, SlotWrite
from specframe_hf.runner import ModelRunner
from specframe_hf.slot_cache import SlotCache

#: Slots reserved beyond a prompt when the caller does not say how many tokens the row will decode.
DEFAULT_ROOM = 256


def slot_tree_mask(visible: torch.Tensor, lengths: torch.Tensor, width: int,
                   dtype: torch.dtype) -> torch.Tensor:  # [B, 1, N, W] additive
    """The round's additive mask in the slot layout: query ``i`` of row ``b`` sees the row's committed slots
    ``[0, lengths[b])`` and the tree nodes ``j`` with ``visible[b, i, j]`` (slot ``lengths[b] + j``).

    Args:
        visible: ``[B, N, N]`` bool (the ancestor-or-self relation).
        lengths: ``[B]`` int64 committed slots per row.
        width: the slots attended over, ``max(lengths) + N``.

    Example (one row of length 2, ``parents = [-1, 0, 0]``, m = finfo.min)::

        root [0 0 | 0 m m]     a [0 0 | 0 0 m]     b [0 0 | 0 m 0]
    """
    b, n, _ = visible.shape
    cols = torch.arange(width, device=visible.device)[None, :]  # [1, W]
    rel = cols - lengths[:, None]  # [B, W] node index of each slot (prefix < 0, past the tree >= N)
    in_tree = (rel >= 0) & (rel < n)  # [B, W]
    tree_part = visible.gather(2, rel.clamp(0, n - 1)[:, None, :].expand(b, n, width)) & in_tree[:, None, :]
    seen = tree_part | (rel < 0)[:, None, :]  # [B, N, W]
    mask = torch.full((b, 1, n, width), torch.finfo(dtype).min, dtype=dtype, device=visible.device)
    return mask.masked_fill_(seen[:, None], 0.0)


class SlotRows:
    """See the module docstring. ``taps`` are returned with every forward's output."""

    def __init__(self, runner: ModelRunner, taps: Sequence[int] = (), *,
                 compiled: DecoderForward | None = None) -> None:
        self.runner = runner
        self.decoder = compiled or DecoderForward(runner.model)  # a torch.compile'd forward when the target has one
        self.vocab_size = runner.vocab_size
        self.max_length = runner.max_length
        self.device = runner.device
        self.taps = runner.taps.check(taps)
        config = runner.model.config
        self.cache = SlotCache(int(config.num_hidden_layers), self.decoder.num_kv_heads, self.decoder.head_dim,
                               runner.dtype, runner.device)
        self._pending = 0  # nodes of the tree run but not yet committed
        #: Rows that decode plainly in a round with tree rows cost one token each (:func:`packing`).
        self.selective_batching = True
        self.forward_tokens = 0  # tokens the last forward_tree ran through the token-wise layers

    def close(self) -> None:
        self.cache.clear()
        self._pending = 0

    @property
    def lengths(self) -> list[int]:
        return list(self.cache.lengths)

    @property
    def batch_size(self) -> int:
        return self.cache.rows

    # ---------------------------------------------------------------------------------- rows in / out
    def add_row(self, input_ids: torch.Tensor, capacity: int | None = None) -> TargetOutput:
        """Prefill ``input_ids`` ``[R, P]`` (usually R = 1) alone and append the rows; ``capacity``: slots the row
        needs in all (prompt, decoded tokens and one tree; default: the prompt plus ``DEFAULT_ROOM``). Logits
        ``[R, 1, V]`` float32 at the last position, taps ``[R, P, n_taps * H]``."""
        length = self.runner.check_prompt_ids(input_ids)
        rows = int(input_ids.shape[0])
        self._pending = 0
        slots = max(length + 1, capacity if capacity is not None else length + DEFAULT_ROOM)
        if self.max_length is not None:
            slots = min(slots, self.max_length + 1)
        self.cache.reserve(self.cache.rows + rows, max(slots, self.cache.capacity))
        first = self.cache.rows
        views = self.cache.layer_views(slice(first, first + rows))
        ids = input_ids.to(self.device)
        positions = torch.arange(length, device=self.device)[None, :].expand(rows, length)
        with torch.inference_mode():
            logits, hidden = self.decoder.forward(ids, positions, views, SlotWrite(start=0), length, None, keep=1,
                                                  taps=self.taps)
        self.cache.add_rows([length] * rows)
        return TargetOutput(logits=logits, hidden=hidden)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` (in this order); the others leave."""
        self._pending = 0
        self.cache.keep_rows(rows)

    # ------------------------------------------------------------------------------------- rounds
    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        """Logits ``[B, N, V]`` float32 after each node of each row's tree; nothing is committed."""
        if not self.cache.rows:
            raise GenerationError("forward_tree was called before prefill", hint="prefill the prompt first")
        if tree.batch_size != self.cache.rows:
            raise GenerationError(f"the tree has {tree.batch_size} rows but the cache holds {self.cache.rows}",
                                  hint="keep one tree row per prefilled sequence")
        tree = tree.to(self.device)
        n = tree.capacity
        lengths = self.cache.lengths
        longest = max(lengths)
        if self.max_length is not None and longest + n - 1 >= self.max_length \
                and longest + tree.max_depth >= self.max_length:
            raise GenerationError(
                f"a tree of depth {tree.max_depth} on {longest} cached tokens runs past the "
                f"{self.runner.model_type} target's context of {self.max_length}",
                hint="trim the tree to the remaining context (the pipeline does this automatically)")
        if longest + n > self.cache.capacity:
            self.cache.reserve(self.cache.rows, longest + n)
        width = longest + n
        same = min(lengths) == longest
        length_t = torch.tensor(lengths, dtype=torch.long, device=self.device)  # [B]
        if same:
            write = SlotWrite(start=longest)
            positions = tree.depth + longest
        else:
            write = SlotWrite(slots=length_t[:, None] + torch.arange(n, device=self.device)[None, :])
            positions = tree.depth + length_t[:, None]
        mask = None if n == 1 and same else slot_tree_mask(tree.visibility(), length_t, width, self.runner.dtype)
        views = self.cache.layer_views(slice(0, self.cache.rows))
        packed = packing(tree.row_nodes, n, self.device)
        self.forward_tokens = tree.batch_size * n if packed is None else int(packed.shape[0])
        with torch.inference_mode():
            logits, hidden = self.decoder.forward(tree.tokens, positions, views, write, width, mask, keep=n,
                                                  taps=self.taps, packed=packed)
        self._pending = n
        return TargetOutput(logits=logits, hidden=hidden)

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor,
               paths: Sequence[Sequence[int]] | None = None) -> None:
        """Per row, keep the entries of the accepted path: ``paths[b]`` (host node indices, root first) when the
        caller read them already, else ``accepted_nodes`` ``[B, D + 1]`` (root first, increasing, -1 padded), read
        and checked here."""
        if self._pending == 0:
            raise GenerationError("commit was called without a pending forward_tree",
                                  hint="call forward_tree(tree) and then commit(tree, accepted_nodes)")
        if tree.capacity != self._pending:
            raise GenerationError(f"commit got a tree of {tree.capacity} nodes but the last forward_tree ran "
                                  f"{self._pending}", hint="commit the tree that was just verified")
        if paths is None:
            paths = read_paths(accepted_nodes, self.cache.rows, self._pending)
        elif len(paths) != self.cache.rows:
            raise ContractError(f"commit got {len(paths)} paths for {self.cache.rows} rows", stage="verifier")
        with torch.inference_mode():
            self.cache.commit(paths)
        self._pending = 0


#: Selective batching pays when at least this share of a round's [B, N] positions is padding.
PACK_WHEN_PADDING = 0.25


def packing(row_nodes: Sequence[int] | None, n: int, device: torch.device) -> torch.Tensor | None:  # [T] int64
    """The flat indices of the positions that can hold nodes, when skipping the rest saves enough
    (:meth:`specframe_hf.decoder.DecoderForward.forward_packed`); None: run the padded batch as it is.

    Example: ``row_nodes = (3, 1, 1)``, ``n = 3`` -> ``[0, 1, 2, 3, 6]`` (5 of 9 positions)."""
    if row_nodes is None or len(row_nodes) < 2:
        return None
    total = sum(min(max(c, 1), n) for c in row_nodes)
    if total > (1 - PACK_WHEN_PADDING) * len(row_nodes) * n:
        return None
    index = [b * n + j for b, c in enumerate(row_nodes) for j in range(min(max(c, 1), n))]
    return torch.tensor(index, dtype=torch.long, device=device)


def read_paths(accepted_nodes: torch.Tensor, rows: int, nodes: int) -> list[list[int]]:
    """Each row's accepted path as host lists (one read), checked: root first, increasing, inside the tree."""
    if accepted_nodes.dim() != 2 or accepted_nodes.shape[0] != rows:
        raise ContractError(f"accepted_nodes has shape {tuple(accepted_nodes.shape)}, expected [{rows}, D + 1]",
                            stage="verifier")
    paths = []
    for row in accepted_nodes.tolist():
        count = sum(1 for v in row if v >= 0)
        path = row[:count]
        if not check_path(path, row[count:], nodes):
            raise ContractError(f"accepted_nodes {accepted_nodes.tolist()} is not a root-first path of the tree "
                                "in every row (it must start with node 0, increase, stay inside the tree and be "
                                "padded with -1 at the end)", stage="verifier")
        paths.append(path)
    return paths


def check_path(path: Sequence[int], padding: Sequence[int], nodes: int) -> bool:
    """A root-first, increasing path of nodes below ``nodes``, followed by -1 padding only."""
    return bool(path) and path[0] == 0 and all(a < b for a, b in itertools.pairwise(path)) \
        and path[-1] < nodes and all(v == -1 for v in padding)
