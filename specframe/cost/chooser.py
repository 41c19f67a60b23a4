"""How many of a pruned tree's nodes to verify: the expected-throughput rule of `budget: auto`.

A round that verifies the ``k`` best nodes commits ``1 + S_k`` tokens in expectation (``S_k`` = the sum of
their path-acceptance probabilities ``p``) and costs ``C + T(k + 1)`` milliseconds (``C`` = the round's
other stages, ``T`` = the target forward over the root and ``k`` nodes). The loop wants the most tokens per
second over the whole request, ``E[tokens] / E[time]``. With ``lam`` the rate it already achieves, a round
adds to that ratio exactly when ``tokens - lam * time`` is positive (Dinkelbach's rule for ratio
objectives), so the best ``k`` maximises

    value(k) = S_k - lam * T(k + 1)

(``1`` and ``C`` do not depend on ``k``). A node is worth verifying when its ``p`` exceeds ``lam`` times the
time it adds: on a flat (GPU-like) curve every node with ``p > 0`` pays, on a steep (CPU) curve only the
likely ones, and ``k = 0`` is a legal answer.

Ordering: nodes are taken by descending ``p`` with ties to the lower node index. Because ``p`` is capped by
the parent's (`AcceptanceEstimator`) and parents have lower indices, every prefix of that order is
ancestor-closed. When the verifier needs each node's kept children to be a prefix of its children in index
order (rejection over siblings sampled in that order), ``p`` is also capped by the previous sibling's.

Example (lam = 0.01 tokens/ms): p = [0.9, 0.6, 0.2], T = [50, 55, 60, 90] ms -> value = [-0.5, 0.35,
0.9, 0.8] for k = 0..3 -> verify 2 nodes.
"""

from __future__ import annotations

import torch

from specframe.tree import DraftTree


def best_verify_size(p_sorted: list[float], verify_ms: list[float], rate_per_ms: float) -> int:
    """The ``k`` maximising ``sum(p_sorted[:k]) - rate_per_ms * verify_ms[k]``; ties go to the smaller ``k``.

    Args:
        p_sorted: acceptance probabilities of the candidate nodes in verification order (descending).
        verify_ms: ``verify_ms[k]`` = target forward time over the root and ``k`` nodes,
            for ``k = 0 .. len(p_sorted)``.
        rate_per_ms: tokens per millisecond the loop already achieves (``lam``).
    """
    best_k, best_value, total = 0, -rate_per_ms * verify_ms[0], 0.0
    for k, p in enumerate(p_sorted, start=1):
        total += p
        value = total - rate_per_ms * verify_ms[k]
        if value > best_value + 1e-12:
            best_k, best_value = k, value
    return best_k


def verification_order(tree: DraftTree, p: torch.Tensor, *, sibling_prefix: bool,
                       row: int = 0) -> tuple[list[int], list[float]]:
    """Non-root nodes of one row in the order they are worth verifying, with their (capped) ``p``.

    Args:
        tree: the pruned tree.
        p: ``[N]`` path-acceptance estimates of the row's valid nodes, already capped by the parent's.
        sibling_prefix: also cap ``p`` by the previous sibling's, so kept children form an index prefix.
    """
    n = int(tree.num_nodes[row])
    values = p[:n].tolist()
    if sibling_prefix:
        parent = tree.parent[row, :n].tolist()
        last_child: dict[int, int] = {}
        for i in range(1, n):  # children of a node appear in increasing index
            cap = values[parent[i]]
            if parent[i] in last_child:
                cap = min(cap, values[last_child[parent[i]]])
            values[i] = min(values[i], cap)
            last_child[parent[i]] = i
    order = sorted(range(1, n), key=lambda i: (-values[i], i))
    return order, [values[i] for i in order]


def keep_mask(tree: DraftTree, nodes: list[int], row: int = 0) -> torch.Tensor:  # [B, N] bool
    """The root of every row plus ``nodes`` of ``row``."""
    keep = torch.zeros_like(tree.valid)
    keep[:, 0] = True
    if nodes:
        keep[row, torch.tensor(nodes, dtype=torch.long, device=keep.device)] = True
    return keep & tree.valid
