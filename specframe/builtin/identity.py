"""The `identity` corrector: the drafter's own per-depth marginals, the same for every frontier node.

``child_logprobs(depth)`` broadcasts ``proposal.logprobs[:, depth - 1]`` (full-vocabulary base log-probs of
the K candidates) over the frontier. It has no state and ignores the path, so it is what DDTree and plain
DFlash chains use.

Example: with base log-probs ``[-0.2, -1.9]`` at depth 1 and a frontier of 3 nodes, every row of the
``[B, 3, 2]`` result is ``[-0.2, -1.9]``.
"""

from __future__ import annotations

from typing import Literal

import torch

from specframe.config.base import ComponentConfig
from specframe.interfaces import BuildContext, Corrector
from specframe.types import DraftProposal


class IdentityConfig(ComponentConfig):
    """No correction: children are scored by the drafter's marginals."""

    type: Literal["identity"] = "identity"


class IdentityCorrector(Corrector):
    """Broadcasts the proposal's base log-probs over the frontier (a view, no copy)."""

    state_size = 0
    path_independent = True

    def child_logprobs(
        self,
        proposal: DraftProposal,
        depth: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, 0]
    ) -> torch.Tensor:  # [B, M, K]
        b, m = tokens.shape
        return proposal.logprobs[:, depth - 1, None, :].expand(b, m, -1)


def build_identity(config: IdentityConfig, ctx: BuildContext | None = None) -> IdentityCorrector:
    return IdentityCorrector()
