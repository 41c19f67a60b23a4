"""The `heap` builder (DDTree, docs/concepts/tree-construction.md): the B most likely prefixes under per-depth
marginals.

A prefix ``u = (r_1 .. r_d)`` names the ``r_i``-th candidate at each depth ``i`` (candidates are sorted by
log-prob, so rank 0 is the best) and scores ``σ(u) = Σ_i logq[i][r_i]``. The builder ignores the corrector
and uses the proposal's base log-probs; ``chain_then_heap`` feeds it corrected marginals instead.

Best-first search over the implicit K-ary tree in left-child/right-sibling form::

    push (logq[1][0], prefix (0,), parent root)
    repeat B times:
        pop the best entry; materialise the node (token, parent)
        push its next sibling (same parent, rank + 1)   if that candidate is finite
        push its first child  (rank 0 at depth + 1)     if depth < L and that candidate is finite

Every left-child/right-sibling edge keeps or lowers the score (candidates are sorted; log-probs are <= 0),
so the heap pops prefixes in globally non-increasing score order: the first B pops are exactly the top-B
prefixes (DDTree Prop. 3), they are prefix-closed, and pop order is a topological order.

Ties: heap entries are keyed ``(-score, rank path)`` and rank paths compare lexicographically, so among
equal scores an ancestor comes first (a prefix sorts before its extensions) and then the lower candidate
ranks. The result is the first B prefixes of the total order ``(-score, rank path)``, whatever the backend.

Example (L = 2, K = 2, logq = [[-0.1, -2.5], [-0.2, -1.9]], B = 3): pops ``(0,)`` -0.1, ``(0, 0)`` -0.3,
``(0, 1)`` -2.0.
"""

from __future__ import annotations

import heapq
import math
from typing import Literal

import torch

from specframe.building import BudgetedTreeBuilder, TreeShapeConfig
from specframe.interfaces import BuildContext, Corrector
from specframe.tree import DraftTree
from specframe.tree.assembly import RowNodes, tree_from_rows
from specframe.types import DraftProposal


class HeapConfig(TreeShapeConfig):
    """DDTree's best-first heap over the proposal's per-depth marginals (the corrector is not used)."""

    type: Literal["heap"] = "heap"


def best_first_prefixes(
    root_token: int,
    tokens: list[list[int]],  # [L][K] candidate ids per depth
    logq: list[list[float]],  # [L][K] log-probs, sorted descending along K
    budget: int,
) -> RowNodes:
    """The top-``budget`` prefixes of one row, in pop (= topological) order. See the module docstring."""
    nodes = RowNodes.start(root_token)
    depth_limit = len(tokens)
    heap: list[tuple[float, tuple[int, ...], int, float]] = []  # (-score, rank path, parent, parent score)
    if depth_limit > 0 and budget > 0 and logq[0][0] > -math.inf:
        heap.append((-logq[0][0], (0,), 0, 0.0))
    while heap and nodes.num_draft_nodes < budget:
        neg_score, path, parent, parent_score = heapq.heappop(heap)
        d, rank = len(path), path[-1]
        score = -neg_score
        node = nodes.add(tokens[d - 1][rank], parent, logq[d - 1][rank], score)
        row = logq[d - 1]
        if rank + 1 < len(row) and row[rank + 1] > -math.inf:
            heapq.heappush(heap, (-(parent_score + row[rank + 1]), (*path[:-1], rank + 1), parent, parent_score))
        if d < depth_limit and logq[d][0] > -math.inf:
            heapq.heappush(heap, (-(score + logq[d][0]), (*path, 0), node, score))
    return nodes


def heap_tree(root: torch.Tensor, tokens: torch.Tensor, logq: torch.Tensor, budget: int) -> DraftTree:
    """Run :func:`best_first_prefixes` on every row. ``tokens``/``logq`` are ``[B, L, K]``, sorted along K.

    The heap is a host algorithm (DDTree's reference pops a Python heap), so the proposal comes to the host in
    one read: roots, candidate ids and log-probs packed into one float64 tensor (ids below 2^53 are exact). Its
    device-side equivalent is the ``dartree`` builder with the ``identity`` corrector and ``width`` = the budget
    followed by ``deferred_topb`` with ``beta: 0`` (Lemma 1): the same node set, no read.
    """
    b, depth, k = tokens.shape
    packed = torch.cat([root.double().view(b, 1), tokens.double().reshape(b, depth * k),
                        logq.double().reshape(b, depth * k)], dim=1).tolist()  # [B, 1 + 2 L K]: one read
    rows = []
    for row in packed:
        token_rows = [[int(t) for t in row[1 + d * k : 1 + (d + 1) * k]] for d in range(depth)]
        logq_rows = [row[1 + depth * k + d * k : 1 + depth * k + (d + 1) * k] for d in range(depth)]
        rows.append(best_first_prefixes(int(row[0]), token_rows, logq_rows, budget))
    return tree_from_rows(rows, root.device)


class HeapBuilder(BudgetedTreeBuilder):
    """DDTree's heap on the proposal's base log-probs; see the module docstring."""

    def grow(self, p: DraftProposal, corrector: Corrector, budget: int) -> DraftTree:
        return heap_tree(p.root, p.tokens, p.logprobs, budget)


def build_heap(config: HeapConfig, ctx: BuildContext | None = None) -> HeapBuilder:
    return HeapBuilder(config)
