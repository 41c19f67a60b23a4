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

from dataclasses import dataclass, replace

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
    if all(int(lv.tokens.shape[1]) == 1 for lv in levels):
        # A chain: a dead slot's descendants are dead, so the live slots are a prefix already (no re-indexing).
        dead = ~alive
        return replace(tree, valid=alive, tokens=tokens.masked_fill(dead, 0), parent=parent.masked_fill(dead, -1),
                       depth=depth.masked_fill(dead, 0), logq=logq.masked_fill(dead, float("-inf")),
                       score=score.masked_fill(dead, float("-inf")))
    # Dead slots have only dead descendants, so ``alive`` is ancestor-closed; the capacity is the slot count (a
    # host fact), so nothing is read back: rows with dead slots carry them as padding.
    return tree.subtree(alive, capacity=int(alive.shape[1]))


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
