"""The `dartree` builder (docs/concepts/tree-construction.md): depth-wise batched expansion with a corrector.

At every depth the whole frontier is expanded at once::

    frontier = [root], S_root = 0, state = corrector.init_state(p)
    for d in 1 .. L:
        quota  = W                                           (mode pruned)
               | ceil(remaining_budget / remaining_depths)   (mode fixed)
        lp     = corrector.child_logprobs(p, d, frontier tokens, frontier states)   # [B, M, K], ONE call
        path   = S_parent + lp                                                      # [B, M, K]
        keep the global top-`quota` (parent, candidate) pairs of `path`             # one stable sort
        state  = corrector.advance(p, d, kept parents' states, kept tokens)          # ONE call (d < L)
        frontier = kept children

The output is the supertree of every kept node with ``score`` = cumulative corrected path score (no depth
bonus) and ``logq`` = the node's corrected log-prob. Mode ``pruned`` (W = 12) builds up to W x L nodes and
is meant to be followed by the ``deferred_topb`` pruner; mode ``fixed`` stays within the budget (B = 64,
L = 16 -> 4 nodes per depth) and needs no pruner. Scores are accumulated in float64 (stored as float32).

Ties: the frontier is kept in node-index order and a pair's flat index is ``parent_slot * K + candidate``;
the stable sort keeps the lower flat index among equal scores, i.e. the child of the lower-index parent,
then the lower candidate index. Within a depth, nodes are numbered in selection order.

Example (W = 2, K = 2): depth 1 keeps both candidates ``a`` (-0.1) and ``b`` (-2.4); depth 2 scores the
4 pairs ``aa -0.3, ab -2.9, ba -2.5, bb -4.0`` and keeps ``aa`` and ``ba``.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from specframe.building import TreeShapeConfig
from specframe.config.bounds import MAX_TREE_NODES, StageShape, capped_min, tree_nodes
from specframe.interfaces import BuildContext, Corrector, RoundContext, TreeBuilder
from specframe.tree import DraftTree
from specframe.tree.assembly import Level, tree_from_levels
from specframe.tree.ops import NEG_INF, stable_topk
from specframe.types import DraftProposal


class DARTreeConfig(TreeShapeConfig):
    """Depth-wise batched expansion; mode pruned (width W per depth) or fixed (budget spread over depths)."""

    type: Literal["dartree"] = "dartree"
    mode: Literal["pruned", "fixed"] = Field(
        "pruned", description="pruned: keep `width` nodes per depth (then prune); fixed: ceil(remaining/depths)"
    )
    width: int = Field(12, ge=1, le=MAX_TREE_NODES, description="W: nodes kept per depth in pruned mode")

    def output_shape(self, upstream: StageShape) -> StageShape:
        """Pruned mode keeps up to ``width`` nodes per depth (before the pruner); fixed mode fills the budget."""
        shape = self.clamped_shape(upstream)
        nodes = tree_nodes(shape.depth, shape.candidates)
        if self.mode == "pruned" and shape.depth is not None:
            nodes = capped_min(nodes, shape.depth * self.width)
        return StageShape(shape.depth, shape.candidates, capped_min(nodes, self.budget))


class DARTreeBuilder(TreeBuilder):
    """DARTree's depth-wise construction; see the module docstring."""

    def __init__(self, config: DARTreeConfig) -> None:
        self.config = config

    def build(self, proposal: DraftProposal, corrector: Corrector, ctx: RoundContext) -> DraftTree:
        p = self.config.clamp(proposal)
        budget = self.config.resolve_budget(ctx)
        if p.depth == 0 or (self.config.mode == "fixed" and budget <= 0):
            return DraftTree.root_only(p.root)
        with torch.inference_mode():
            return tree_from_levels(p.root, self._expand(p, corrector, budget))

    def _quota(self, remaining: torch.Tensor, depth: int, depth_limit: int) -> torch.Tensor:  # [B] int64
        if self.config.mode == "pruned":
            return torch.full_like(remaining, self.config.width)
        depths_left = depth_limit - depth + 1
        return torch.div(remaining + depths_left - 1, depths_left, rounding_mode="floor")  # ceil division

    def _expand(self, p: DraftProposal, corrector: Corrector, budget: int) -> list[Level]:
        b, depth_limit, k = p.batch_size, p.depth, p.num_candidates
        dev = p.tokens.device
        state = corrector.init_state(p)  # [B, 1, S]
        front_tok = p.root.long().view(b, 1)  # [B, M]
        front_score = torch.zeros(b, 1, dtype=torch.float64, device=dev)  # [B, M]
        front_alive = torch.ones(b, 1, dtype=torch.bool, device=dev)  # [B, M]
        front_slot = torch.zeros(b, 1, dtype=torch.long, device=dev)  # [B, M] uncompacted node slots
        remaining = torch.full((b,), budget, dtype=torch.long, device=dev)  # [B]
        # Fixed mode: when every candidate is finite every row keeps its whole quota, so the quotas follow one
        # schedule the host computes (one read to check, instead of one per depth).
        schedule = self.config.mode == "fixed" and bool(torch.isfinite(p.logprobs).all())
        host_remaining = budget
        next_slot = 1
        levels: list[Level] = []
        for d in range(1, depth_limit + 1):
            quota = self._quota(remaining, d, depth_limit)  # [B]
            m = front_tok.shape[1]
            # Pruned mode's quota is the width on every row, fixed mode's the schedule's: no read either way.
            if self.config.mode == "pruned":
                widest = self.config.width
            elif schedule:
                depths_left = depth_limit - d + 1
                widest = min(-(-host_remaining // depths_left), m * k)
                host_remaining -= widest
            else:
                widest = int(quota.max())
            q = min(widest, m * k)
            if q <= 0:
                break
            # Step 1: score every (frontier node, candidate) pair with one corrector call.
            lp = corrector.child_logprobs(p, d, front_tok, state)  # [B, M, K]
            path = front_score[:, :, None] + lp.double()  # [B, M, K]
            path = path.masked_fill(~front_alive[:, :, None], NEG_INF).view(b, m * k)
            # Step 2: keep the global top-q pairs per row (stable: ties -> lower flat index).
            top_score, top_idx = stable_topk(path, q)  # [B, q]
            ranks = torch.arange(q, device=dev)[None, :]
            kept = torch.isfinite(top_score) & (ranks < quota[:, None])  # [B, q] (dead depths stay dead: no read)
            parent_pos = torch.div(top_idx, k, rounding_mode="floor")  # [B, q] position in the frontier
            cand = top_idx - parent_pos * k  # [B, q]
            child_tok = p.tokens[:, d - 1].gather(1, cand)  # [B, q]
            levels.append(Level(
                tokens=child_tok,
                parent=front_slot.gather(1, parent_pos),
                logq=lp.reshape(b, m * k).gather(1, top_idx),
                score=top_score,
                alive=kept,
            ))
            # Step 3: the kept children's states, one batched call (not needed after the last depth).
            if d < depth_limit:
                parent_state = state.gather(1, parent_pos[:, :, None].expand(-1, -1, state.shape[-1]))
                state = corrector.advance(p, d, parent_state, child_tok)  # [B, q, S]
            front_tok, front_score, front_alive = child_tok, top_score, kept
            front_slot = next_slot + ranks.expand(b, q)
            next_slot += q
            remaining = remaining - kept.sum(dim=1)
        return levels


def build_dartree(config: DARTreeConfig, ctx: BuildContext | None = None) -> DARTreeBuilder:
    return DARTreeBuilder(config)
