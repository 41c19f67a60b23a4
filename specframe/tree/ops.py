"""Small tensor helpers with deterministic tie-breaking, shared by correctors, builders and pruners.

Every selection in this package breaks ties by the lower index (candidate index, flat frontier index or node
index), never by whatever order a backend's ``topk`` happens to return. ``stable_topk`` sorts with
``stable=True``; ``first_argmax`` picks the smallest index among the maxima explicitly.

Example::

    >>> x = torch.tensor([[0.5, 1.0, 1.0, -inf]])
    >>> stable_topk(x, 2)        # values [[1.0, 1.0]], indices [[1, 2]]: equal values keep index order
    >>> first_argmax(x)          # values [1.0], indices [1]
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def stable_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest entries along the last dim, ties broken by the lower index.

    Args:
        x: ``[..., N]`` scores.
        k: how many to keep (``0 <= k <= N``).

    Returns:
        ``(values, indices)``, each ``[..., k]``, in descending value order.
    """
    values, indices = torch.sort(x, dim=-1, descending=True, stable=True)
    return values[..., :k], indices[..., :k]


def first_argmax(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Maximum along the last dim and the smallest index attaining it. ``x`` is ``[..., N]``."""
    best = x.max(dim=-1, keepdim=True).values  # [..., 1]
    n = x.shape[-1]
    positions = torch.arange(n, device=x.device).expand_as(x)
    index = torch.where(x == best, positions, torch.full_like(positions, n)).min(dim=-1).values  # [...]
    # An all-NaN row has no index equal to its max; fall back to 0 so the result stays in range.
    index = torch.where(index == n, torch.zeros_like(index), index)
    return best.squeeze(-1), index


def masked_log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``log_softmax`` that maps an all ``-inf`` slice to all ``-inf`` instead of NaN."""
    lse = torch.logsumexp(x, dim=dim, keepdim=True)
    return torch.where(torch.isfinite(lse), x - lse, torch.full_like(x, NEG_INF))
