"""The `chain` builder: one path, the best corrected candidate at every depth (Domino / DSpark greedy rollout).

The rollout itself is :func:`specframe.building.greedy_chain` (public, shared with ``chain_then_heap``); this
builder clamps the proposal to its limits and turns the rollout into a `DraftTree`.

Example: K = 2, depth 1 corrected log-probs ``[-0.4, -1.1]`` -> candidate 0; depth 2 ``[-0.9, -0.9]`` (a tie)
-> candidate 0. Scores along the chain: ``-0.4, -1.3``.
"""

from __future__ import annotations

from typing import Literal

import torch

from specframe.building import TreeShapeConfig, greedy_chain
from specframe.config.bounds import StageShape, capped_min
from specframe.interfaces import BuildContext, Corrector, RoundContext, TreeBuilder
from specframe.tree import DraftTree
from specframe.types import DraftProposal


class ChainConfig(TreeShapeConfig):
    """One greedy path of length at most min(max_depth, budget)."""

    type: Literal["chain"] = "chain"

    def output_shape(self, upstream: StageShape) -> StageShape:
        shape = self.clamped_shape(upstream)
        return StageShape(shape.depth, shape.candidates, capped_min(shape.depth, self.budget))


class ChainBuilder(TreeBuilder):
    """Builds the greedy corrected chain; see the module docstring."""

    def __init__(self, config: ChainConfig) -> None:
        self.config = config

    def build(self, proposal: DraftProposal, corrector: Corrector, ctx: RoundContext) -> DraftTree:
        p = self.config.clamp(proposal)
        length = min(p.depth, self.config.resolve_budget(ctx))
        if length <= 0:
            return DraftTree.root_only(p.root)
        with torch.inference_mode():
            return greedy_chain(p, corrector, length).tree(p.root)


def build_chain(config: ChainConfig, ctx: BuildContext | None = None) -> ChainBuilder:
    return ChainBuilder(config)
