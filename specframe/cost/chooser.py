"""Each row's draft nodes in the order `budget: auto` verifies them, and keeping a row's first ``k`` of them.

Ordering: each row's nodes are taken by descending ``p`` (the calibrated path-acceptance estimate) with ties to the
lower node index. Because ``p`` is capped by the parent's (`AcceptanceEstimator`) and parents have lower indices,
every prefix of that order is ancestor-closed. When the verifier needs each node's kept children to be a prefix of
its children in index order (rejection over siblings sampled in that order), ``p`` is also capped by the previous
sibling's.

Everything here runs on the device for all rows; the counts ``k`` come from the host
(`specframe.cost.planner`), so nothing is read back.

Example: ``p = [1, 0.9, 0.2, 0.6]`` (root first; node 3 a child of node 1) -> order ``[1, 3, 2]``; keeping 2
keeps nodes 1 and 3.
"""

from __future__ import annotations

import torch

from specframe.tree import DraftTree


def cap_by_previous_sibling(tree: DraftTree, p: torch.Tensor) -> torch.Tensor:  # [B, N]
    """``p`` capped along each child list, so a child is never worth more than its elder sibling (and parent)."""
    rank = tree.sibling_rank()  # [B, N]
    n = tree.capacity
    same_parent = (tree.parent[:, :, None] == tree.parent[:, None, :]) & tree.valid[:, None, :]  # [B, N, N]
    elder = same_parent & (rank[:, None, :] == (rank[:, :, None] - 1))  # [b, i, j]: j is i's elder sibling
    has_elder = elder.any(dim=2)
    elder_idx = elder.long().argmax(dim=2)  # [B, N]
    parent = tree.parent.clamp(min=0)
    for _ in range(n - 1):  # each pass carries caps one edge further; no chain is longer than the capacity
        p = torch.minimum(p, p.gather(1, parent))
        p = torch.where(has_elder, torch.minimum(p, p.gather(1, elder_idx)), p)
        p[:, 0] = 1.0
    return p


def verification_order(tree: DraftTree, p: torch.Tensor, *,
                       sibling_prefix: bool) -> tuple[torch.Tensor, torch.Tensor]:  # ([B, N-1], [B, N-1])
    """Each row's draft nodes in the order they are worth verifying, with their (capped) ``p``; padding last
    with ``p = 0`` (``order`` then names padding nodes, which the caller never keeps past ``n_b``)."""
    if sibling_prefix:
        p = cap_by_previous_sibling(tree, p)
    values = torch.where(tree.valid, p, torch.full_like(p, -1.0))[:, 1:]  # [B, N - 1]
    p_sorted, idx = torch.sort(values, dim=1, descending=True, stable=True)
    return idx + 1, p_sorted.clamp(min=0.0)


def keep_first(tree: DraftTree, order: torch.Tensor, k: torch.Tensor) -> torch.Tensor:  # [B, N] bool
    """The roots plus each row's first ``k[b]`` nodes of ``order`` ``[B, N - 1]`` (``k`` ``[B]`` on the device)."""
    keep = torch.zeros_like(tree.valid)
    keep[:, 0] = True
    take = torch.arange(order.shape[1], device=order.device)[None, :] < k[:, None]  # [B, N - 1]
    keep.scatter_(1, order, take)
    return keep & tree.valid
