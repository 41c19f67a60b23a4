"""Batched tree navigation for verifiers and the accepted-path recorder that becomes a `VerifyResult`.

Verifiers walk one node per batch row at a time; these helpers answer "which child of ``node[b]``
carries token ``t[b]``" or "which is the ``j``-th child of ``node[b]``" for every row in one tensor operation.
Children are ordered by node index, which is the order a builder created (or sampled) them in.
"""

from __future__ import annotations

import torch

from specframe.tree import DraftTree
from specframe.types import VerifyResult


def _first_true(mask: torch.Tensor) -> torch.Tensor:  # [B] int64, -1 when a row has no True
    """Index of the first True per row of ``mask`` ``[B, N]``."""
    found = mask.any(dim=1)
    idx = mask.long().argmax(dim=1)
    return torch.where(found, idx, torch.full_like(idx, -1))


def children_mask(tree: DraftTree, node: torch.Tensor) -> torch.Tensor:  # [B, N] bool
    """Which nodes are valid children of ``node[b]`` (``node`` is ``[B]`` int64; -1 has no children)."""
    return tree.valid & (tree.parent == node[:, None]) & (node[:, None] >= 0)


def child_with_token(tree: DraftTree, node: torch.Tensor, token: torch.Tensor) -> torch.Tensor:  # [B] int64
    """The child of ``node[b]`` whose token is ``token[b]``, or -1 (siblings carry distinct tokens)."""
    return _first_true(children_mask(tree, node) & (tree.tokens == token[:, None]))


def child_at_rank(tree: DraftTree, rank: torch.Tensor, node: torch.Tensor, j: int) -> torch.Tensor:  # [B]
    """The ``j``-th child (0-based, creation order) of ``node[b]``, or -1 (``rank``: `DraftTree.sibling_rank`)."""
    return _first_true(children_mask(tree, node) & (rank == j))


def gather_rows(x: torch.Tensor, node: torch.Tensor) -> torch.Tensor:  # [B, ...]
    """``x[b, node[b]]`` for ``x`` ``[B, N, ...]`` and ``node`` ``[B]`` (-1 is read as node 0)."""
    idx = node.clamp(min=0).view(-1, *([1] * (x.dim() - 1))).expand(-1, 1, *x.shape[2:])
    return torch.gather(x, 1, idx).squeeze(1)


class AcceptedPath:
    """Records the accepted path of every row and turns it into a :class:`VerifyResult`.

    Every row starts at the root (node 0). :meth:`advance` moves the rows in ``moved`` to ``child``.
    """

    def __init__(self, tree: DraftTree, depth: int | None = None) -> None:
        b = tree.batch_size
        dev = tree.tokens.device
        depth = tree.max_depth if depth is None else depth  # pass it when the caller has read it already
        self.nodes = torch.full((b, depth + 1), -1, dtype=torch.long, device=dev)  # [B, D + 1]
        self.nodes[:, 0] = 0
        self.count = torch.zeros(b, dtype=torch.long, device=dev)  # [B] accepted draft tokens
        self.current = torch.zeros(b, dtype=torch.long, device=dev)  # [B] node each row stands on

    def advance(self, moved: torch.Tensor, child: torch.Tensor) -> None:
        """Accept ``child[b]`` for the rows where ``moved[b]`` (``[B]`` bool) is True (no host synchronisation)."""
        slot = (self.count + 1).clamp(max=self.nodes.shape[1] - 1).unsqueeze(1)  # [B, 1]
        self.nodes.scatter_(1, slot, torch.where(moved, child, self.nodes.gather(1, slot).squeeze(1)).unsqueeze(1))
        self.count = self.count + moved.long()
        self.current = torch.where(moved, child, self.current)

    def result(self, bonus: torch.Tensor) -> VerifyResult:
        """The verifier's decision, with ``bonus`` ``[B]`` as each row's bonus token."""
        return VerifyResult(accepted_nodes=self.nodes, num_accepted=self.count, bonus_token=bonus.long())
