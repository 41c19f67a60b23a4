"""Score order along an accepted path: where each accepted node stands in its tree's ranking by path score.

A tree's draft nodes (root excluded) are ranked by the path ``score`` the builder gave them, highest first, ties to
the lower node index; a node's **score order** is its 0-based place in that ranking::

    order(v) = #{ w valid, w >= 1, w != v : score(w) > score(v)  or  (score(w) = score(v) and w < v) }

Path scores never increase along an edge (log-probs are at most 0; the contract the ``deferred_topb`` pruner checks),
and a parent has a lower index than its children, so every prefix of the ranking is ancestor-closed: the first ``k``
nodes of the ranking are the tree a top-``k`` pruner by path score would have kept. The trace-driven simulator
(:mod:`specframe.bench.simulate`) uses it to replay a recorded round at a smaller budget ``k``: under greedy
verification the accepted path inside the kept ``k`` nodes is the recorded path's prefix whose nodes all have an
order below ``k``.

Worked example (one row, ``score`` in brackets)::

    root ─┬─ 1 a (-0.2) ── 3 c (-0.9)       ranking        = [1, 2, 3, 4]  (a, b, c, d)
          └─ 2 b (-0.5) ── 4 d (-1.4)       accepted path  = [0, 1, 3]
                                            order          = [-, 0, 2]     (the root's entry is meaningless)

At budget 2 the kept tree is {a, b}: the path keeps a (order 0) and loses c (order 2), so one draft token is
accepted instead of two.

Batched on the tree's device (``O(B·P·N)`` comparisons, no host read), so the decode loop packs it into the
round's one device-to-host transfer.
"""

from __future__ import annotations

import torch

from specframe.tree.draft_tree import DraftTree


def path_score_order(tree: DraftTree, path: torch.Tensor) -> torch.Tensor:  # [B, P] int64
    """The score order of every node of ``path`` ``[B, P]`` (node indices, root first, -1 padded, as
    ``VerifyResult.accepted_nodes``); entries for the root and for padding are meaningless."""
    dev = path.device
    score, valid = tree.score.to(dev), tree.valid.to(dev)  # [B, N] each
    nodes = path.long().clamp(0, tree.capacity - 1)  # [B, P]
    index = torch.arange(tree.capacity, device=dev).view(1, 1, -1)  # [1, 1, N]
    # Step 1: the draft nodes that could rank ahead: valid, not the root.
    draft = (valid & (torch.arange(tree.capacity, device=dev) >= 1)[None, :])[:, None, :]  # [B, 1, N]
    # Step 2: those ranked ahead of each path node: a higher score, or the same one at a lower index.
    own = score.gather(1, nodes)[:, :, None]  # [B, P, 1]
    others = score[:, None, :]  # [B, 1, N]
    ahead = (others > own) | ((others == own) & (index < nodes[:, :, None]))  # [B, P, N]
    return (draft & ahead).sum(dim=2)  # [B, P]
