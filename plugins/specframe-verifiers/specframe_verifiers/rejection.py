"""Pieces shared by the rejection-sampling verifiers: the acceptance test, the residual law, and input checks.

Vocabulary: a draft token is **accepted** with probability ``min(1, p(x) / q(x))``; after a rejection the
verifier emits a **residual** token drawn from ``normalize(max(p - q, 0))``; after an accepted leaf it emits a
**bonus** token drawn from ``p``.
"""

from __future__ import annotations

import torch

from specframe.errors import GenerationError
from specframe.tree import DraftTree


def require_child_law(tree: DraftTree, verifier: str) -> tuple[torch.Tensor, torch.Tensor]:  # [B, N, K] twice
    """The draft laws stored by a sampled tree builder, as candidate ids and their probabilities, or a
    :class:`GenerationError` naming the fix."""
    if tree.child_ids is None or tree.child_probs is None:
        raise GenerationError(
            f"verifier '{verifier}' needs the draft law of each node's children (DraftTree.child_q), "
            "but the tree has none",
            hint="use a sampled tree builder (sampled_chain, sampled_tree), or verifier 'walk' for "
            "deterministic trees",
        )
    return tree.child_ids, tree.child_probs


def dense_law(like: torch.Tensor, ids: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:  # [B, V]
    """One node's draft law over the vocabulary, on the fly from its candidate law (``ids``, ``probs`` ``[B, K]``):
    zeros shaped and typed as ``like`` (the target's law there), each candidate's probability added at its id."""
    return torch.zeros_like(like).scatter_add_(1, ids, probs.to(like.dtype))


def accepts(u: torch.Tensor, p_tok: torch.Tensor, q_tok: torch.Tensor) -> torch.Tensor:  # [B] bool
    """Accept with probability ``min(1, p / q)``: ``u * q < p`` for a uniform ``u`` in ``[0, 1)``.

    A token the target cannot emit (``p = 0``) is never accepted.
    """
    return u * q_tok < p_tok


def residual_law(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:  # [..., V]
    """``normalize(max(p - q, 0))``; falls back to ``p`` where the residual mass is ~0 (then ``p == q``).

    After a rejection the residual mass equals the rejection probability, so the fallback is reached only
    through rounding, when rejecting was (almost) impossible.
    """
    r = (p - q).clamp(min=0.0)
    mass = r.sum(dim=-1, keepdim=True)
    tiny = 16 * torch.finfo(r.dtype).eps
    return torch.where(mass > tiny, r / mass.clamp(min=tiny), p)


def common_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any input is float64, else float32."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32
