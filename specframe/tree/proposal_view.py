"""Views of a `DraftProposal`: clamp it to a builder's depth and candidate count, or take one batch row.

Builders restrict the proposal once per round and hand the *restricted* proposal to the corrector, so a
corrector that renormalises over the candidates (``normalize: candidates``) does so over exactly the K
candidates the builder may use. All views share storage with the original tensors (no copies).

Example: a proposal with L = 16 depths and K = 128 candidates clamped by ``max_depth=4, candidates=64`` has
``tokens[:, :4, :64]``; ``logits`` and ``features`` keep their first 4 depths.
"""

from __future__ import annotations

import torch

from specframe.types import DraftProposal


def clamp_proposal(proposal: DraftProposal, max_depth: int | None, candidates: int) -> DraftProposal:
    """The first ``min(max_depth, L)`` depths and the best ``min(candidates, K)`` candidates of each.

    ``max_depth=None`` keeps every depth. Candidates are sorted by base log-prob, so the first K are the
    top K.
    """
    depth = proposal.depth if max_depth is None else min(max_depth, proposal.depth)
    k = min(candidates, proposal.num_candidates)
    if depth == proposal.depth and k == proposal.num_candidates:
        return proposal
    return DraftProposal(
        root=proposal.root,
        tokens=proposal.tokens[:, :depth, :k],
        logprobs=proposal.logprobs[:, :depth, :k],
        logits=None if proposal.logits is None else proposal.logits[:, :depth],
        features=None if proposal.features is None else proposal.features[:, :depth],
        extras=proposal.extras,
    )


def proposal_row(proposal: DraftProposal, b: int) -> DraftProposal:
    """Batch row ``b`` as a one-row proposal. ``extras`` tensors with a leading batch axis are sliced too."""
    batch = proposal.batch_size

    def row(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t[b : b + 1]

    extras = {
        name: (t[b : b + 1] if t.dim() > 0 and t.shape[0] == batch else t)
        for name, t in proposal.extras.items()
    }
    return DraftProposal(
        root=proposal.root[b : b + 1],
        tokens=proposal.tokens[b : b + 1],
        logprobs=proposal.logprobs[b : b + 1],
        logits=row(proposal.logits),
        features=row(proposal.features),
        extras=extras,
    )
