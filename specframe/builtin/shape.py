"""Fields every tree builder shares (depth limit, candidate count, budget override), their resolution, and
the common frame of the budgeted heap builders.

Defaults follow the papers: ``max_depth`` L = 16, ``candidates`` K = 64, budget B from the pipeline (64 in
DDTree/DARTree). ``max_depth`` and ``candidates`` are clamped to what the proposal offers, so L = 16 on a
7-slot DSpark proposal builds trees of depth at most 7.
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from pydantic import Field

from specframe.config.base import ComponentConfig
from specframe.config.bounds import (
    MAX_CANDIDATES,
    MAX_DRAFT_DEPTH,
    MAX_TREE_NODES,
    StageShape,
    capped_min,
    tree_nodes,
)
from specframe.interfaces import Corrector, RoundContext, TreeBuilder
from specframe.tree import DraftTree
from specframe.tree.proposal_view import clamp_proposal
from specframe.types import DraftProposal


class TreeShapeConfig(ComponentConfig):
    """Shared builder fields; each builder's config adds its ``type`` literal and its own fields."""

    max_depth: int | None = Field(16, ge=1, le=MAX_DRAFT_DEPTH,
                                  description="L: deepest tree level (None: the proposal's depth)")
    candidates: int = Field(64, ge=1, le=MAX_CANDIDATES, description="K: candidates per depth (clamped to the "
                                                                     "proposal's)")
    budget: int | None = Field(None, ge=1, le=MAX_TREE_NODES,
                               description="node budget B (root excluded); None: the pipeline's")

    def clamped_shape(self, upstream: StageShape) -> StageShape:
        """``upstream`` limited by ``max_depth`` and ``candidates`` (nodes still unknown)."""
        return StageShape(depth=capped_min(upstream.depth, self.max_depth),
                          candidates=capped_min(upstream.candidates, self.candidates))

    def output_shape(self, upstream: StageShape) -> StageShape:
        """Best-first heaps: every prefix of the clamped proposal, at most ``budget`` when set."""
        shape = self.clamped_shape(upstream)
        return StageShape(shape.depth, shape.candidates,
                          capped_min(tree_nodes(shape.depth, shape.candidates), self.budget))

    def clamp(self, proposal: DraftProposal) -> DraftProposal:
        """The proposal restricted to this builder's depth and candidate limits."""
        return clamp_proposal(proposal, self.max_depth, self.candidates)

    def resolve_budget(self, ctx: RoundContext) -> int:
        """This builder's budget: its own override, else the round's."""
        return self.budget if self.budget is not None else ctx.budget


class BudgetedTreeBuilder(TreeBuilder):
    """Frame of the builders that fill a node budget: clamp the proposal, resolve the budget, return the bare
    root when there is nothing to build, otherwise :meth:`grow` under ``torch.inference_mode``."""

    def __init__(self, config: TreeShapeConfig) -> None:
        self.config = config

    def build(self, proposal: DraftProposal, corrector: Corrector, ctx: RoundContext) -> DraftTree:
        p = self.config.clamp(proposal)
        budget = self.config.resolve_budget(ctx)
        if p.depth == 0 or budget <= 0:
            return DraftTree.root_only(p.root)
        with torch.inference_mode():
            return self.grow(p, corrector, budget)

    @abstractmethod
    def grow(self, p: DraftProposal, corrector: Corrector, budget: int) -> DraftTree:
        """Build a tree of at most ``budget`` nodes from the clamped, non-empty proposal ``p``."""
