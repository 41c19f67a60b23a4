"""The `deferred_topb` pruner (DARTree; docs/concepts/draft-tree.md, Lemma 1): keep the global top-B nodes.

Every non-root node is ranked by ``s(v) = score(v) + beta * depth(v)`` (``score`` = the builder's path
score); the B best are kept in one stable sort and the tree is re-indexed with `DraftTree.subtree`.

Why the kept set is a valid tree (Lemma 1): path scores never increase along an edge, so with
``beta <= 0`` neither does ``s``; ranking by ``(-s, node index)`` puts every ancestor before its
descendants (topological order gives ancestors lower indices), so the top B are ancestor-closed, and they
are exactly the first B pops of a best-first heap over the tree. With ``beta > 0`` a child can outrank its
parent (``lp + beta > 0``) and the top-B set can drop a parent, so positive beta is refused when the
config is validated.

Ties: equal ``s`` -> lower node index first (ancestor first). A tree whose scores do increase along an
edge is rejected with an error rather than pruned into an invalid shape, when the pipeline checks contracts
(``metrics.check_trees``; the check reads the device, so a plain round skips it).

Example (beta = -0.2, B = 2): nodes a (depth 1, score -0.1), b (depth 1, -0.5), c (child of a, -0.2):
``s = -0.3, -0.7, -0.6`` -> keep a and c.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field, field_validator

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_TREE_NODES
from specframe.errors import ContractError
from specframe.interfaces import BuildContext, Pruner, RoundContext
from specframe.tree import DraftTree


class DeferredTopBConfig(ComponentConfig):
    """Global top-B by path score + beta * depth, after the builder over-expanded."""

    type: Literal["deferred_topb"] = "deferred_topb"
    budget: int | None = Field(None, ge=1, le=MAX_TREE_NODES,
                               description="B: nodes kept (root excluded); None: the pipeline's")
    beta: float = Field(-0.2, description="per-depth bonus, must be <= 0 (DARTree: -0.2)")

    @field_validator("beta")
    @classmethod
    def _beta_not_positive(cls, beta: float) -> float:
        if not math.isfinite(beta):
            raise ValueError(f"beta must be a finite number <= 0, got {beta}")
        if beta > 0:
            raise ValueError(
                f"beta = {beta} > 0 is refused: a positive depth bonus lets a child outrank its parent, so "
                "the global top-B set need not be prefix-closed and no longer equals a best-first heap "
                "(Lemma 1). Use beta <= 0 (DARTree uses -0.2; 0 ranks by path score alone)"
            )
        return beta


class DeferredTopBPruner(Pruner):
    """Keeps the global top-B nodes; see the module docstring."""

    def __init__(self, config: DeferredTopBConfig) -> None:
        self.config = config

    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        budget = self.config.budget if self.config.budget is not None else ctx.budget
        ranked = tree.score.double() + self.config.beta * tree.depth.double()  # [B, N]
        if ctx.check:  # the contract check reads the device: only in the pipeline's checking mode
            check_no_rise(tree, ranked, "deferred_topb", "score + beta * depth")
        if tree.capacity <= budget + 1:  # every row fits (a host fact: nothing to read)
            return tree
        with torch.inference_mode():
            n = tree.capacity
            index = torch.arange(n, device=tree.score.device)
            # The root ranks first (+inf) and is always kept; padding ranks last (-inf) and sits after every
            # valid node, so a stable sort over node index breaks ties ancestor-first.
            key = torch.where(tree.valid, ranked, torch.full_like(ranked, -math.inf))
            key[:, 0] = math.inf
            order = torch.sort(key, dim=1, descending=True, stable=True).indices  # [B, N]
            keep_count = torch.clamp(tree.num_nodes, max=budget + 1)  # [B] root included
            keep_sorted = index[None, :] < keep_count[:, None]  # [B, N] in sorted order
            keep = torch.zeros_like(tree.valid).scatter(1, order, keep_sorted)
            # No row keeps more than budget + 1 nodes: the capacity is known without reading the device.
            return tree.subtree(keep, capacity=min(budget + 1, n))


def check_no_rise(tree: DraftTree, ranked: torch.Tensor, pruner: str, what: str) -> None:
    """The contract of a pruner that keeps a top-B prefix by ``ranked`` ``[B, N]``: no node ranks above its parent
    (else the kept set may drop a parent); a `ContractError` naming the first such node. Reads the device: call it
    only in the pipeline's checking mode (``ctx.check``)."""
    parent_rank = ranked.gather(1, tree.parent.clamp(min=0))  # [B, N]
    rises = tree.valid & (tree.parent >= 0) & (ranked > parent_rank)  # [B, N]
    if not bool(rises.any()):
        return
    b, i = (int(x) for x in rises.nonzero()[0])
    raise ContractError(
        f"{pruner}: in row {b}, node {i} ranks above its parent ({what} {float(ranked[b, i]):.6g} > "
        f"{float(parent_rank[b, i]):.6g}); path scores must never increase along an edge (log-probs <= 0), or the "
        "global top-B is not a valid tree", stage="tree_builder")


def build_deferred_topb(config: DeferredTopBConfig, ctx: BuildContext | None = None) -> DeferredTopBPruner:
    return DeferredTopBPruner(config)
