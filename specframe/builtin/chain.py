"""The `chain` builder: one path, the best corrected candidate at every depth (Domino / DSpark greedy rollout).

Algorithm (batched over rows)::

    state = corrector.init_state(p); node = root
    for d in 1 .. min(L, B):
        lp   = corrector.child_logprobs(p, d, node, state)     # [B, 1, K]
        best = argmax_c lp   (ties -> lower candidate index)
        stop the row if lp[best] = -inf
        node = candidate best; score += lp[best]; state = corrector.advance(p, d, state, node)

:func:`greedy_chain` also returns every depth's full corrected row ``lp`` ``[B, L, K]``, which the
``chain_then_heap`` builder uses as per-depth marginals.

Example: K = 2, depth 1 corrected log-probs ``[-0.4, -1.1]`` -> candidate 0; depth 2 ``[-0.9, -0.9]`` (a tie)
-> candidate 0. Scores along the chain: ``-0.4, -1.3``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from specframe.builtin.shape import TreeShapeConfig
from specframe.config.bounds import StageShape, capped_min
from specframe.interfaces import BuildContext, Corrector, RoundContext, TreeBuilder
from specframe.tree import DraftTree
from specframe.tree.assembly import Level, tree_from_levels
from specframe.tree.ops import NEG_INF, first_argmax
from specframe.types import DraftProposal


class ChainConfig(TreeShapeConfig):
    """One greedy path of length at most min(max_depth, budget)."""

    type: Literal["chain"] = "chain"

    def output_shape(self, upstream: StageShape) -> StageShape:
        shape = self.clamped_shape(upstream)
        return StageShape(shape.depth, shape.candidates, capped_min(shape.depth, self.budget))


@dataclass
class ChainRollout:
    """The greedy path and the corrected rows met along it."""

    levels: list[Level]  # one single-slot level per depth reached
    rows: torch.Tensor  # [B, L, K] corrected log-probs of each depth's candidates (-inf past a row's end)


def greedy_chain(proposal: DraftProposal, corrector: Corrector, length: int) -> ChainRollout:
    """Roll out the corrected greedy chain for ``length`` depths (``length <= proposal.depth``)."""
    b, k = proposal.batch_size, proposal.num_candidates
    dev = proposal.tokens.device
    row_list: list[torch.Tensor] = []  # [B, K] per depth reached
    levels: list[Level] = []
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
        parent = torch.full((b, 1), d - 1, dtype=torch.long, device=dev)  # slot d - 1 is depth d - 1
        levels.append(Level(tokens=child_tok, parent=parent, logq=best_lp[:, None],
                            score=score[:, None], alive=alive[:, None]))
        if d < length:
            state = corrector.advance(proposal, d, state, child_tok)
        node_tok = child_tok
    dtype = row_list[0].dtype if row_list else torch.float32
    rows = torch.full((b, length, k), NEG_INF, dtype=dtype, device=dev)
    if row_list:
        rows[:, : len(row_list)] = torch.stack(row_list, dim=1)
    return ChainRollout(levels=levels, rows=rows)


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
            rollout = greedy_chain(p, corrector, length)
            return tree_from_levels(p.root, rollout.levels)


def build_chain(config: ChainConfig, ctx: BuildContext | None = None) -> ChainBuilder:
    return ChainBuilder(config)
