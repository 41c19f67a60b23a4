"""The `pctree` builder: PCTree's parent-conditioned drafting tree (arXiv 2608.02123) over a path-dependent
corrector, DSpark's Markov head in the paper.

DSpark drafts one chain: each depth's token is the argmax of the backbone's slot logits plus a Markov bias from
the token before it. PCTree keeps the one backbone pass and the head, and branches: every node gets a fixed
number of children, the best candidates *under its own parent-conditioned law* (the head applied to that node's
token), so an alternative accepted at depth d still has a continuation drafted for it, not one drafted for the
sibling it replaced. With ``keep_spine: true`` the chain DSpark would draft (the *spine*: the argmax child of the
argmax child ...) is kept whole first and the rest of the budget goes to the best-scoring alternatives; with
``keep_spine: false`` (the default) every node is ranked by its path score::

    frontier = [root] (on the spine)
    for d in 1 .. L:
        lp   = corrector.child_logprobs(p, d, frontier tokens, states)   # [B, M, K]  ONE call per depth
        each frontier node keeps its top-c_d candidates (c_d = children[d - 1], the last entry repeats)
        a child is on the spine iff its parent is and it is the parent's first choice
        keep_spine: keep the spine child and the best (width - 1) others by path score     # the next frontier
        else:       keep the best width by path score
        state = corrector.advance(p, d, parents' states, kept tokens)    # ONE call (d < L)
    tree = (keep_spine: the spine, shallowest first, then) the nodes by path score, budget nodes in all

Path scores are sums of corrected log-probs, so a node never outscores its parent; with the spine first and
ties broken by node index the selection is ancestor-closed. The tree's ``logq`` is each node's corrected
log-prob given its parent and ``score`` the path score.

Choices made where the paper's summary leaves details open (``keep_spine`` and ``children`` make the
alternatives one-line settings): the per-parent child counts by depth, a frontier bound ``width`` per depth, and
whether the DSpark chain is kept whole (``keep_spine: true``) or ranked with the alternatives (``false``: the
whole tree by path score). The defaults (``children (4, 2, 1)``, ``width 8``, ``keep_spine: false``) are the
shape of highest τ in ``benchmarks/pctree_shapes.py``'s run on the tune split
(``docs/benchmarks/pctree-shapes/tune.json``, rendered in docs/benchmarks.md), not the paper's values (the design
notes give none). The builder is deterministic, so ``walk`` verifies it losslessly at any temperature; a sampled
parent-conditioned tree is ``sampled_tree`` over the same corrector.

Ties: per-parent choices keep the lower candidate index; the frontier and the final selection keep the lower
flat index (parent slot * c + choice), i.e. the child of the lower-index parent.

Example (children [2, 1], width 4, keep_spine true, budget 3, K = 2): depth 1 keeps ``a`` (-0.2, spine) and ``b``
(-1.8); depth 2 keeps ``a -> c`` (-0.5, spine) and ``b -> e`` (-2.0). The tree is the spine ``a, a->c``, then ``b``
(-1.8); with keep_spine false it is the same three nodes ranked by score: ``a`` (-0.2), ``a -> c`` (-0.5), ``b``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch
from pydantic import Field, field_validator

from specframe.building import BudgetedTreeBuilder, TreeShapeConfig
from specframe.config.bounds import MAX_DRAFT_DEPTH, MAX_TREE_NODES, StageShape, capped_min
from specframe.interfaces import BuildContext, Corrector
from specframe.tree import DraftTree
from specframe.tree.assembly import Level, tree_from_levels
from specframe.tree.ops import NEG_INF, stable_topk
from specframe.types import DraftProposal

#: Selection key of spine nodes: above every path score (scores are sums of log-probs, <= 0).
SPINE_KEY = 1.0


class PCTreeConfig(TreeShapeConfig):
    """Parent-conditioned tree: a fixed number of children per node, the nodes ranked by path score (or the DSpark
    chain kept whole first). The defaults are the best shape of the tune-split run (module docstring)."""

    type: Literal["pctree"] = "pctree"
    children: tuple[int, ...] = Field(
        (4, 2, 1), description="children of every node at depth 0, 1, ... (the best under the node's own "
                                  "parent-conditioned law); the last entry repeats for deeper nodes. The default "
                                  "is the highest-τ shape of benchmarks/pctree_shapes.py on the tune split (not "
                                  "the paper's value)")
    width: int = Field(8, ge=1, le=MAX_TREE_NODES, description="most nodes kept per depth (the best by path score; "
                                                               "with keep_spine, the spine node and the best others)")
    keep_spine: bool = Field(False, description="keep the chain DSpark drafts (argmax child of argmax child ...) "
                                                "whole before the alternatives; false (the measured default): rank "
                                                "every node by path score")

    @field_validator("children")
    @classmethod
    def _positive(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(c < 1 for c in value) or len(value) > MAX_DRAFT_DEPTH:
            raise ValueError(f"children must be a non-empty list of positive counts, got {list(value)}")
        return value

    def output_shape(self, upstream: StageShape) -> StageShape:
        """Up to ``width`` nodes per depth, at most the budget."""
        shape = self.clamped_shape(upstream)
        nodes = None if shape.depth is None else shape.depth * self.width
        return StageShape(shape.depth, shape.candidates, capped_min(nodes, self.budget))

    def children_at(self, depth: int) -> int:
        """Children per node at ``depth`` (1-based depth of the children)."""
        return self.children[min(depth, len(self.children)) - 1]


class PCTreeBuilder(BudgetedTreeBuilder):
    """PCTree's construction; see the module docstring."""

    config: PCTreeConfig

    def grow(self, p: DraftProposal, corrector: Corrector, budget: int) -> DraftTree:
        levels, keys = self._expand(p, corrector)
        # Every slot as a node first (dead ones included), then one ancestor-closed selection.
        whole = tree_from_levels(p.root, [replace(lv, alive=torch.ones_like(lv.alive)) for lv in levels])
        return whole.subtree(_top_nodes(torch.cat(keys, dim=1), budget))

    def _expand(self, p: DraftProposal, corrector: Corrector) -> tuple[list[Level], list[torch.Tensor]]:
        b, k = p.batch_size, p.num_candidates
        dev = p.tokens.device
        state = corrector.init_state(p)  # [B, 1, S]
        front_tok = p.root.long().view(b, 1)  # [B, M]
        front_score = torch.zeros(b, 1, dtype=torch.float64, device=dev)  # [B, M]
        front_alive = torch.ones(b, 1, dtype=torch.bool, device=dev)  # [B, M]
        front_spine = torch.ones(b, 1, dtype=torch.bool, device=dev)  # [B, M]
        front_slot = torch.zeros(b, 1, dtype=torch.long, device=dev)  # [B, M] uncompacted node slots
        next_slot = 1
        levels: list[Level] = []
        keys: list[torch.Tensor] = []  # per level [B, q] selection keys of the kept nodes
        for d in range(1, p.depth + 1):
            m = front_tok.shape[1]
            c = min(self.config.children_at(d), k)
            # Step 1: every frontier node's children under its own law, one corrector call.
            lp = corrector.child_logprobs(p, d, front_tok, state)  # [B, M, K]
            top_lp, top_cand = stable_topk(lp, c)  # [B, M, c] each parent's best c (ties: lower candidate)
            path = front_score[:, :, None] + top_lp.double()  # [B, M, c]
            alive = front_alive[:, :, None] & torch.isfinite(path)  # [B, M, c]
            first = torch.zeros(c, dtype=torch.bool, device=dev)
            first[0] = True
            spine = front_spine[:, :, None] & first & alive  # [B, M, c] the parent's first choice on the spine
            key = torch.where(spine, torch.full_like(path, SPINE_KEY), path) if self.config.keep_spine else path
            key = key.masked_fill(~alive, NEG_INF).reshape(b, m * c)
            # Step 2: the frontier: the spine child and the best others (stable: ties -> lower flat index).
            q = min(self.config.width, m * c)
            top_key, flat = stable_topk(key, q)  # [B, q]
            kept = torch.isfinite(top_key)
            parent_pos = torch.div(flat, c, rounding_mode="floor")  # [B, q]
            cand = top_cand.reshape(b, m * c).gather(1, flat)  # [B, q] candidate index in the slot
            child_tok = p.tokens[:, d - 1].gather(1, cand)  # [B, q]
            score = path.reshape(b, m * c).gather(1, flat)  # [B, q]
            levels.append(Level(tokens=child_tok, parent=front_slot.gather(1, parent_pos),
                                logq=top_lp.reshape(b, m * c).gather(1, flat), score=score, alive=kept))
            keys.append(top_key)
            # Step 3: the kept children's states (not needed after the last depth).
            if d < p.depth:
                parent_state = state.gather(1, parent_pos[:, :, None].expand(-1, -1, state.shape[-1]))
                state = corrector.advance(p, d, parent_state, child_tok)  # [B, q, S]
            front_tok, front_score, front_alive = child_tok, score, kept
            front_spine = spine.reshape(b, m * c).gather(1, flat)
            front_slot = next_slot + torch.arange(q, device=dev)[None, :].expand(b, q)
            next_slot += q
        return levels, keys


def _top_nodes(
    keys: torch.Tensor,  # [B, N] selection keys of the non-root slots in node order (-inf: not a node)
    budget: int,
) -> torch.Tensor:  # [B, N + 1] bool: the root and the ``budget`` slots of largest key
    """The kept nodes: largest keys first, stable (ties keep the lower node index), dead slots never."""
    b, n = keys.shape
    ranked, index = torch.sort(keys, dim=1, descending=True, stable=True)  # [B, N]
    chosen = torch.isfinite(ranked) & (torch.arange(n, device=keys.device)[None, :] < budget)
    keep = torch.ones(b, n + 1, dtype=torch.bool, device=keys.device)
    keep[:, 1:] = torch.zeros_like(chosen).scatter(1, index, chosen)
    return keep


def build_pctree(config: PCTreeConfig, ctx: BuildContext | None = None) -> PCTreeBuilder:
    return PCTreeBuilder(config)
