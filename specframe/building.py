"""What tree-builder plugins build on (public API): the shared shape fields, the budgeted builder frame and the
greedy corrected rollout.

* :class:`TreeShapeConfig`: the fields every tree builder shares (depth limit, candidate count, budget override)
  and their resolution. Defaults follow the papers: ``max_depth`` L = 16, ``candidates`` K = 64, budget B from the
  pipeline (64 in DDTree/DARTree). ``max_depth`` and ``candidates`` are clamped to what the proposal offers, so
  L = 16 on a 7-slot DSpark proposal builds trees of depth at most 7.
* :class:`BudgetedTreeBuilder`: the common frame of builders that fill a node budget.
* :func:`greedy_chain`: the corrected greedy rollout (Domino / DSpark), the ``chain`` builder's algorithm, also
  used by ``chain_then_heap`` for its per-depth marginals.

The built-in ``chain`` builder (:mod:`specframe.builtin.chain`) and the plugins' builders import these from here,
never from each other's modules.

Rollout, batched over rows::

    state = corrector.init_state(p); node = root
    for d in 1 .. min(L, B):
        lp   = corrector.child_logprobs(p, d, node, state)     # [B, 1, K]
        best = argmax_c lp   (ties -> lower candidate index)
        stop the row if lp[best] = -inf
        node = candidate best; score += lp[best]; state = corrector.advance(p, d, state, node)

Example: K = 2, depth 1 corrected log-probs ``[-0.4, -1.1]`` -> candidate 0; depth 2 ``[-0.9, -0.9]`` (a tie)
-> candidate 0. Scores along the chain: ``-0.4, -1.3``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

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
from specframe.tree.assembly import chain_tree
from specframe.tree.ops import NEG_INF, first_argmax
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


@dataclass
class ChainRollout:
    """The greedy path and the corrected rows met along it (``L`` depths reached, column ``d - 1`` for depth ``d``)."""

    tokens: torch.Tensor  # [B, L] int64 the chosen candidate's token at each depth
    logq: torch.Tensor  # [B, L] its corrected log-prob
    score: torch.Tensor  # [B, L] float64 the path score down to it
    alive: torch.Tensor  # [B, L] bool, False from the depth where a row ran out of finite candidates
    rows: torch.Tensor  # [B, L, K] corrected log-probs of each depth's candidates (-inf past a row's end)

    def tree(self, root: torch.Tensor) -> DraftTree:
        """The chain as a `DraftTree` rooted at ``root`` ``[B]``."""
        if self.tokens.shape[1] == 0:
            return DraftTree.root_only(root)
        return chain_tree(root, self.tokens, self.logq, self.score, self.alive)


def greedy_chain(proposal: DraftProposal, corrector: Corrector, length: int) -> ChainRollout:
    """Roll out the corrected greedy chain for ``length`` depths (``length <= proposal.depth``)."""
    if corrector.path_independent:
        return _independent_chain(proposal, corrector, length)
    b, k = proposal.batch_size, proposal.num_candidates
    dev = proposal.tokens.device
    row_list: list[torch.Tensor] = []  # [B, K] per depth reached
    chosen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []  # token, logq, score, alive
    state = corrector.init_state(proposal)  # [B, 1, S]
    node_tok = proposal.root.long().view(b, 1)  # [B, 1]
    score = torch.zeros(b, dtype=torch.float64, device=dev)  # [B]
    alive = torch.ones(b, dtype=torch.bool, device=dev)  # [B]
    for d in range(1, length + 1):
        lp = corrector.child_logprobs(proposal, d, node_tok, state)[:, 0]  # [B, K]
        # Rows that already stopped get -inf rows: their frontier is not a node.
        row_list.append(torch.where(alive[:, None], lp, torch.full_like(lp, NEG_INF)))
        best_lp, best_c = first_argmax(lp)  # [B], [B]
        alive = alive & torch.isfinite(best_lp)  # a dead row's later depths stay dead (no host read to stop early)
        child_tok = proposal.tokens[:, d - 1].gather(1, best_c[:, None])  # [B, 1]
        score = score + best_lp.double()
        chosen.append((child_tok[:, 0], best_lp, score, alive))
        if d < length:
            state = corrector.advance(proposal, d, state, child_tok)
        node_tok = child_tok
    dtype = row_list[0].dtype if row_list else torch.float32
    rows = torch.full((b, length, k), NEG_INF, dtype=dtype, device=dev)
    if not row_list:
        return ChainRollout(tokens=torch.zeros(b, 0, dtype=torch.long, device=dev), logq=rows[:, :, 0],
                            score=rows[:, :, 0].double(), alive=torch.zeros(b, 0, dtype=torch.bool, device=dev),
                            rows=rows)
    rows[:, : len(row_list)] = torch.stack(row_list, dim=1)
    tokens, logq, scores, alives = (torch.stack(column, dim=1) for column in zip(*chosen, strict=True))
    return ChainRollout(tokens=tokens, logq=logq, score=scores, alive=alives, rows=rows)


def _independent_chain(proposal: DraftProposal, corrector: Corrector, length: int) -> ChainRollout:
    """:func:`greedy_chain` for a corrector whose scores ignore the path (``path_independent``): every depth's best
    candidate at once, the same chain and scores as the depth-by-depth rollout in a fixed number of operations."""
    b = proposal.batch_size
    dev = proposal.tokens.device
    root = proposal.root.long().view(b, 1)
    state = corrector.init_state(proposal)
    if length == 0:
        empty = proposal.logprobs[:, :0, 0]  # [B, 0]
        return ChainRollout(tokens=proposal.tokens[:, :0, 0].long(), logq=empty, score=empty.double(),
                            alive=torch.zeros(b, 0, dtype=torch.bool, device=dev), rows=proposal.logprobs[:, :0])
    lp = torch.stack([corrector.child_logprobs(proposal, d, root, state)[:, 0] for d in range(1, length + 1)],
                     dim=1)  # [B, L, K]
    best_lp, best_c = first_argmax(lp)  # [B, L]
    alive = torch.cumprod(torch.isfinite(best_lp).long(), dim=1).bool()  # a dead depth kills the rest
    before = torch.cat([torch.ones(b, 1, dtype=torch.bool, device=dev), alive[:, :-1]], dim=1)  # [B, L]
    rows = torch.where(before[..., None], lp, torch.full_like(lp, NEG_INF))  # a stopped row's later depths: -inf
    tokens = proposal.tokens[:, :length].gather(2, best_c[..., None])[..., 0]  # [B, L]
    score = torch.cumsum(best_lp.double(), dim=1)  # [B, L]
    return ChainRollout(tokens=tokens, logq=best_lp, score=score, alive=alive, rows=rows)
