"""The `chain_then_heap` builder (Domino-chain + DDTree, docs/concepts/tree-construction.md).

1. Roll out the corrected greedy chain once (:func:`~specframe.builtin.chain.greedy_chain`) over all
   L depths, keeping each depth's full corrected row (the corrector conditioned on that one path).
2. Use those rows as per-depth marginals: sort every depth's candidates by corrected log-prob (stable,
   ties -> lower candidate index).
3. Run DDTree's heap (:func:`~specframe_trees.builders.heap.heap_tree`) on them.

Every branch therefore shares the correction computed along the greedy chain; the tree's ``logq``/``score``
are those chain-conditioned log-probs. Depths past the point where the chain ran out of finite candidates
are all ``-inf`` and never used.

Example (K = 2): chain rows ``[[-0.2, -1.7], [-1.4, -0.3]]`` -> depth 2 re-sorted to candidates ``[1, 0]``
with ``[-0.3, -1.4]``; with B = 2 the heap returns ``c1_0`` (-0.2) and ``c1_0 -> c2_1`` (-0.5).
"""

from __future__ import annotations

from typing import Literal

import torch

from specframe.building import BudgetedTreeBuilder, TreeShapeConfig, greedy_chain
from specframe.interfaces import BuildContext, Corrector
from specframe.tree import DraftTree
from specframe.types import DraftProposal
from specframe_trees.builders.heap import heap_tree


class ChainThenHeapConfig(TreeShapeConfig):
    """DDTree's heap over the corrected distributions met along the greedy corrected chain."""

    type: Literal["chain_then_heap"] = "chain_then_heap"


class ChainThenHeapBuilder(BudgetedTreeBuilder):
    """Domino-chain + DDTree; see the module docstring."""

    def grow(self, p: DraftProposal, corrector: Corrector, budget: int) -> DraftTree:
        rows = greedy_chain(p, corrector, p.depth).rows  # [B, L, K]
        marginals, order = torch.sort(rows, dim=-1, descending=True, stable=True)  # [B, L, K]
        tokens = p.tokens.gather(-1, order)  # [B, L, K]
        return heap_tree(p.root, tokens, marginals, budget)


def build_chain_then_heap(config: ChainThenHeapConfig, ctx: BuildContext | None = None) -> ChainThenHeapBuilder:
    return ChainThenHeapBuilder(config)
