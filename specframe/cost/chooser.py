"""How many of a round's draft nodes to verify: the expected-throughput rule of `budget: auto`, for all rows.

A round in which ``R`` of its ``B`` rows verify their ``k`` best nodes commits ``sum_b (1 + S_b(k))`` tokens in
expectation (``S_b(k)`` = the sum of row ``b``'s ``k`` largest path-acceptance probabilities ``p``) and costs
``C + T(tokens(k))`` milliseconds (``C`` = the round's other stages), priced on what the target forward really runs
(:func:`forward_tokens`): the trees are padded to the widest, and the ``B - R`` rows that decode plainly this round
run their root alone when the target skips padding in its token-wise work (selective batching), or are padded to
``k + 1`` positions like the others when it does not. So ``tokens(k) = R (k + 1) + (B - R)`` or ``B (k + 1)``.
The loop wants the most tokens per second over the whole run,
``E[tokens] / E[time]``. With ``lam`` the rate it already achieves, a round adds to that ratio exactly when
``tokens - lam * time`` is positive (Dinkelbach's rule for ratio objectives), so the best ``k`` maximises

    value(k) = sum_b S_b(min(k, n_b)) - lam * T(tokens(k))

(``n_b`` = row ``b``'s draft nodes; the constants drop out). A node is worth verifying when its ``p`` exceeds
``lam`` times the time it adds: on a flat (GPU-like) curve every node with ``p > 0`` pays, on a steep (CPU) curve
only the likely ones, and ``k = 0`` (the roots alone) is a legal answer. One row is the case ``B = 1``.

Ordering: each row's nodes are taken by descending ``p`` with ties to the lower node index. Because ``p`` is
capped by the parent's (`AcceptanceEstimator`) and parents have lower indices, every prefix of that order is
ancestor-closed. When the verifier needs each node's kept children to be a prefix of its children in index
order (rejection over siblings sampled in that order), ``p`` is also capped by the previous sibling's.

Everything up to the choice of ``k`` runs on the device for all rows; the choice reads one ``[B, K + 1]`` table
of sums back to the host, the round's one read for the controller.

Example (B = 1, lam = 0.01 tokens/ms): p = [0.9, 0.6, 0.2], T = [50, 55, 60, 90] ms -> value = [-0.5, 0.35,
0.9, 0.8] for k = 0..3 -> verify 2 nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def forward_tokens(k: int, drafting: int, rows: int, packs: bool) -> int:
    """Tokens of a round's target forward when ``drafting`` of its ``rows`` rows verify ``k`` nodes each (plus their
    roots) and the others their roots alone; ``packs``: the target skips padding positions (selective batching).

    Example: 1 of 4 rows verifies 7 nodes: 8 + 3 = 11 tokens with selective batching, 4 x 8 = 32 without."""
    plain = rows - drafting
    return drafting * (k + 1) + plain * (1 if packs else k + 1)


def best_width(sums: Sequence[Sequence[float]], verify_ms: Sequence[float], rate_per_ms: float, *,
               rows: int | None = None, packs: bool = False) -> int:
    """The common width ``k`` maximising ``sum_b sums[b][k] - rate * verify_ms[tokens(k) - 1]``.

    Args:
        sums: ``sums[b][k]`` = ``S_b(min(k, n_b))`` for ``k = 0 .. K``, one row per drafting row.
        verify_ms: ``verify_ms[t - 1]`` = target forward time over ``t`` tokens, up to ``tokens(K)``.
        rate_per_ms: tokens per millisecond the loop already achieves (``lam``).
        rows: rows in the round's forward (None: the drafting rows alone).
        packs: whether the target skips padding (:func:`forward_tokens`).

    Ties go to the smaller ``k``.
    """
    drafting = len(sums)
    total = drafting if rows is None else rows
    width = len(sums[0]) - 1
    best_k, best_value = 0, None
    for k in range(width + 1):
        value = sum(row[k] for row in sums) - rate_per_ms * verify_ms[forward_tokens(k, drafting, total, packs) - 1]
        if best_value is None or value > best_value + 1e-12:
            best_k, best_value = k, value
    return best_k


def keep_first(tree: DraftTree, order: torch.Tensor, k: torch.Tensor) -> torch.Tensor:  # [B, N] bool
    """The roots plus each row's first ``k[b]`` nodes of ``order`` ``[B, N - 1]`` (``k`` ``[B]`` on the device)."""
    keep = torch.zeros_like(tree.valid)
    keep[:, 0] = True
    take = torch.arange(order.shape[1], device=order.device)[None, :] < k[:, None]  # [B, N - 1]
    keep.scatter_(1, order, take)
    return keep & tree.valid
