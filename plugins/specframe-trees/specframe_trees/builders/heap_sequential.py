"""The `heap_sequential` builder: best-first search that calls the corrector once per popped node.

This is the "sequential correction + heap" baseline (docs/concepts/tree-construction.md): a DDTree-style heap over the
*corrected*, path-conditioned scores. Popping a node runs the corrector on that node alone (``M = 1``): one
``advance`` for its state and one ``child_logprobs`` for its children, which are then sorted (descending,
ties -> lower candidate index). The heap holds at most one entry per parent, its next unexpanded child::

    root's children sorted -> push child rank 0 of the root
    repeat B times:
        pop the best entry (parent p, sorted rank j); materialise the node
        push p's child rank j + 1                      if it is finite
        if depth < L: state = advance(p's state, token); sort this node's children; push its rank-0 child

B pops cost about B sequential corrector calls, which is what depth-wise construction (``dartree``) avoids.

Ties: entries are keyed ``(-score, sorted-rank path)``; among equal scores an ancestor comes first, then
the lower sorted rank, which for equal scores is the lower candidate index.

Example: if the corrected scores of the root's children are ``[-1.2, -0.3]`` (candidates 0, 1), the sorted
order is ``[1, 0]`` and the first pop is candidate 1 with score -0.3.
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
from specframe.tree.proposal_view import proposal_row
from specframe.types import DraftProposal


class HeapSequentialConfig(TreeShapeConfig):
    """Best-first heap with one corrector call per popped node (the slow, exact baseline)."""

    type: Literal["heap_sequential"] = "heap_sequential"


def _sorted_children(lp: torch.Tensor) -> tuple[list[int], list[float]]:
    """Candidate indices with finite log-prob, best first (ties -> lower index), and all log-probs.

    ``lp`` is ``[K]``.
    """
    values = lp.double().tolist()
    order = sorted((c for c, v in enumerate(values) if v > -math.inf), key=lambda c: (-values[c], c))
    return order, values


def sequential_row(proposal: DraftProposal, corrector: Corrector, budget: int) -> RowNodes:
    """Build one row's tree (``proposal`` has batch size 1). See the module docstring."""
    depth_limit = proposal.depth
    tokens = proposal.tokens[0].tolist()  # [L][K]
    nodes = RowNodes.start(int(proposal.root[0]))
    states = [corrector.init_state(proposal)]  # node index -> [1, 1, S]
    children: list[tuple[list[int], list[float]]] = []  # node index -> (sorted candidates, log-probs)

    def expand(node: int, depth: int, token: torch.Tensor) -> None:
        """Score the children of ``node`` (at ``depth``) and push its best child."""
        lp = corrector.child_logprobs(proposal, depth + 1, token, states[node])[0, 0]  # [K]
        order, values = _sorted_children(lp)
        children.append((order, values))
        if order:
            score = nodes.scores[node]
            heapq.heappush(heap, (-(score + values[order[0]]), (*paths[node], 0), node, 0))

    heap: list[tuple[float, tuple[int, ...], int, int]] = []  # (-score, rank path, parent, sorted rank)
    paths: list[tuple[int, ...]] = [()]
    expand(0, 0, proposal.root[:, None].long())
    while heap and nodes.num_draft_nodes < budget:
        neg_score, path, parent, rank = heapq.heappop(heap)
        order, values = children[parent]
        cand = order[rank]
        depth = len(path)
        node = nodes.add(tokens[depth - 1][cand], parent, values[cand], -neg_score)
        paths.append(path)
        if rank + 1 < len(order):
            sibling = order[rank + 1]
            heapq.heappush(heap, (-(nodes.scores[parent] + values[sibling]), (*path[:-1], rank + 1), parent, rank + 1))
        token = proposal.tokens[:, depth - 1, cand : cand + 1]  # [1, 1]
        if depth < depth_limit and nodes.num_draft_nodes < budget:
            states.append(corrector.advance(proposal, depth, states[parent], token))
            expand(node, depth, token)
        else:
            states.append(states[parent])  # a leaf: its state is never read
            children.append(([], []))
    return nodes


class HeapSequentialBuilder(BudgetedTreeBuilder):
    """Best-first heap with per-pop corrector calls; see the module docstring."""

    def grow(self, p: DraftProposal, corrector: Corrector, budget: int) -> DraftTree:
        rows = [sequential_row(proposal_row(p, b), corrector, budget) for b in range(p.batch_size)]
        return tree_from_rows(rows, p.root.device)


def build_heap_sequential(config: HeapSequentialConfig, ctx: BuildContext | None = None) -> HeapSequentialBuilder:
    return HeapSequentialBuilder(config)
