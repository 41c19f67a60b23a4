"""Turning what a builder selected into a `DraftTree`.

Batched builders (chain, dartree) record one :class:`Level` per depth: ``q`` slots per row, some of them
dead (a row that ran out of finite candidates, or kept fewer than the widest row). Slots are numbered
level by level after the root (uncompacted numbering), so parents always precede children.
:func:`tree_from_levels` concatenates the levels and drops dead slots with `DraftTree.subtree`, which keeps
topological order and re-indexes parents.

Heap builders work per row in Python and hand over plain lists (:func:`tree_from_rows`).

Example: root, level 1 = 2 slots (both alive), level 2 = 2 slots (second dead)::

    tokens = [r, a, b, c, _]  parent = [-1, 0, 0, 1, 2]  alive = [1, 1, 1, 1, 0]  ->  4 valid nodes
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specframe.tree import DraftTree


@dataclass
class Level:
    """The slots a batched builder selected at one depth."""

    tokens: torch.Tensor  # [B, q] int64
    parent: torch.Tensor  # [B, q] int64, parent slot in the uncompacted numbering
    logq: torch.Tensor  # [B, q] the node's own (corrected) log-prob given its parent
    score: torch.Tensor  # [B, q] path score
    alive: torch.Tensor  # [B, q] bool, False for slots that are not nodes


def tree_from_levels(root: torch.Tensor, levels: list[Level]) -> DraftTree:
    """Assemble the tree rooted at ``root`` ``[B]`` from per-depth levels (level ``i`` = depth ``i + 1``)."""
    b = root.shape[0]
    dev = root.device
    if not levels:
        return DraftTree.root_only(root)
    if all(int(lv.tokens.shape[1]) == 1 for lv in levels):  # a chain: its live slots are a prefix of each row
        return chain_tree(root, *(torch.cat([getattr(lv, f) for lv in levels], dim=1)
                                  for f in ("tokens", "logq", "score", "alive")))
    tokens = torch.cat([root.long().view(b, 1)] + [lv.tokens for lv in levels], dim=1)
    parent = torch.cat([torch.full((b, 1), -1, dtype=torch.long, device=dev)] + [lv.parent for lv in levels], dim=1)
    depth = torch.cat(
        [torch.zeros(b, 1, dtype=torch.long, device=dev)]
        + [torch.full_like(lv.tokens, d) for d, lv in enumerate(levels, start=1)],
        dim=1,
    )
    zero = torch.zeros(b, 1, dtype=torch.float32, device=dev)
    logq = torch.cat([zero] + [lv.logq.float() for lv in levels], dim=1)
    score = torch.cat([zero] + [lv.score.float() for lv in levels], dim=1)
    alive = torch.cat([torch.ones(b, 1, dtype=torch.bool, device=dev)] + [lv.alive for lv in levels], dim=1)
    tree = DraftTree(tokens=tokens, parent=parent, depth=depth, logq=logq, score=score,
                     valid=torch.ones_like(alive), depth_bound=len(levels),
                     width_bound=max(int(lv.tokens.shape[1]) for lv in levels))
    # Dead slots have only dead descendants, so ``alive`` is ancestor-closed; the capacity is the slot count (a
    # host fact), so nothing is read back: rows with dead slots carry them as padding.
    return tree.subtree(alive, capacity=int(alive.shape[1]))


def chain_tree(root: torch.Tensor, tokens: torch.Tensor, logq: torch.Tensor, score: torch.Tensor,
               alive: torch.Tensor) -> DraftTree:
    """The chain rooted at ``root`` ``[B]`` whose node at depth ``d`` is slot ``d`` (``tokens``, ``logq``, ``score``,
    ``alive``: ``[B, L]``, column ``d - 1`` for depth ``d``), built in a fixed number of operations.

    A dead slot's descendants are dead, so a row's live slots are a prefix: no re-indexing, dead slots become
    padding. Example: tokens ``[[7, 9]]``, alive ``[[True, False]]`` -> tokens ``[[r, 7, 0]]``, parent
    ``[[-1, 0, -1]]``, depth ``[[0, 1, 0]]``, valid ``[[True, True, False]]``.
    """
    b, length = tokens.shape
    dev = tokens.device
    dead = torch.cat([torch.zeros(b, 1, dtype=torch.bool, device=dev), ~alive], dim=1)  # [B, L + 1]
    slots = torch.arange(length + 1, device=dev).expand(b, length + 1)  # [B, L + 1] slot d is depth d
    zero = torch.zeros(b, 1, dtype=torch.float32, device=dev)
    return DraftTree(
        tokens=torch.cat([root.long().view(b, 1), tokens.long()], dim=1).masked_fill(dead, 0),
        parent=(slots - 1).masked_fill(dead, -1),
        depth=slots.masked_fill(dead, 0),
        logq=torch.cat([zero, logq.float()], dim=1).masked_fill(dead, float("-inf")),
        score=torch.cat([zero, score.float()], dim=1).masked_fill(dead, float("-inf")),
        valid=~dead, depth_bound=length, width_bound=1)


@dataclass
class RowNodes:
    """One row's nodes in topological order, as Python lists (node 0 = root)."""

    tokens: list[int]
    parents: list[int]
    logq: list[float]
    scores: list[float]

    @classmethod
    def start(cls, root_token: int) -> RowNodes:
        return cls(tokens=[root_token], parents=[-1], logq=[0.0], scores=[0.0])

    def add(self, token: int, parent: int, logq: float, score: float) -> int:
        """Append a node and return its index."""
        self.tokens.append(token)
        self.parents.append(parent)
        self.logq.append(logq)
        self.scores.append(score)
        return len(self.tokens) - 1

    @property
    def num_draft_nodes(self) -> int:
        return len(self.tokens) - 1


def tree_from_rows(rows: list[RowNodes], device: torch.device) -> DraftTree:
    """Stack per-row node lists into one padded batch tree."""
    trees = [DraftTree.from_lists(r.tokens, r.parents, logq=r.logq, score=r.scores, device=device) for r in rows]
    return trees[0] if len(trees) == 1 else DraftTree.stack(trees)
