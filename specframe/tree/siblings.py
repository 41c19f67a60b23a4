"""Sibling ranks along an accepted path: which of its parent's children each accepted node was.

A node's **sibling rank** is its place among the valid children of its parent, ordered by the node's own draft
log-prob ``logq`` (highest first, ties to the lower node index)::

    rank(v) = #{ w valid, w != v, parent(w) = parent(v) : logq(w) > logq(v)  or  (logq(w) = logq(v) and w < v) }

Rank 0 is the drafter's top choice among the children the tree kept (``logq`` is the log-prob the builder ranked
the node by: the drafter's marginal, or the corrector's when there is one). For trees kept by path score
(heap, deferred top-B, DARTree) the parent's best child is always kept when any child is, so rank 0 is the
drafter's (or corrector's) first choice; in a chain every node has rank 0.

Worked example (one row, ``logq`` in brackets)::

    root ─┬─ 1 a (-0.2) ── 3 c (-0.1)       accepted path [0, 2, 4]
          └─ 2 b (-1.5) ─┬─ 4 d (-0.9)      ranks      = [0, 1, 1]   (root: rank 0 by convention)
                         └─ 5 e (-0.3)      has_child  = [1, 1, 0]

The computation is batched on the tree's device and compares each path node with every node of its row
(``O(B·P·N)``, no host read), so the decode loop can pack it into the round's one device-to-host transfer.
"""

from __future__ import annotations

import torch

from specframe.tree.draft_tree import DraftTree


def path_sibling_ranks(tree: DraftTree, path: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sibling rank and whether the node has a child in the tree, for every node of ``path``.

    ``path`` is ``[B, P]`` node indices (root first, -1 padded, as ``VerifyResult.accepted_nodes``); padding entries
    read node 0 and are meaningless. Returns ``rank [B, P] int64`` and ``has_child [B, P] bool``.
    """
    dev = path.device
    parent, logq, valid = tree.parent.to(dev), tree.logq.to(dev), tree.valid.to(dev)  # [B, N] each
    nodes = path.long().clamp(0, tree.capacity - 1)  # [B, P]
    index = torch.arange(tree.capacity, device=dev).view(1, 1, -1)  # [1, 1, N]
    # Step 1: the siblings of each path node: valid nodes with the same parent (the node itself included).
    own_parent = parent.gather(1, nodes)  # [B, P]
    sibling = valid[:, None, :] & (parent[:, None, :] == own_parent[:, :, None])  # [B, P, N]
    # Step 2: siblings ranked ahead of it: a higher log-prob, or the same one at a lower index.
    own_logq = logq.gather(1, nodes)[:, :, None]  # [B, P, 1]
    others = logq[:, None, :]  # [B, 1, N]
    ahead = (others > own_logq) | ((others == own_logq) & (index < nodes[:, :, None]))  # [B, P, N]
    rank = (sibling & ahead).sum(dim=2)  # [B, P]
    # Step 3: whether any valid node has it as parent (a leaf ends a path however the target answers).
    has_child = (valid[:, None, :] & (parent[:, None, :] == nodes[:, :, None])).any(dim=2)  # [B, P]
    return rank, has_child
