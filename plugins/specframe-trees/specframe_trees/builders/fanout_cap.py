"""JetSpec's fan-out trees (hao-ai-lab/JetSpec, ``jetspec/tree``; arXiv 2606.18394): `accum_logp` and
`top2gap_fanout`, written here from their documented behaviour.

Both expand a best-first heap on the cumulative log-prob, but unlike DDTree's `heap` (which materialises one
prefix per pop, siblings one at a time) a pop **materialises all of the popped node's children at once**: the
first ``cap[d]`` candidates of the next depth (every parent at a depth shares the depth's candidates, the
per-depth marginals of a block drafter). ``accum_logp`` uses the full fan-out ``cap[d] = K`` (JetSpec's
baseline); ``top2gap_fanout`` narrows it where the drafter is decisive::

    g_d = logq[d][0] - logq[d][1]                       # top-2 gap at depth d (>= 0)
    cap[d] = max(1, round_half_up(K * sigmoid(-beta * (g_d - gap0))))

A large gap (rank 1 far behind rank 0) gives a chain-like depth (cap 1); a small one gives a wide depth. With a
huge ``gap0`` the sigmoid is 1 and ``top2gap_fanout`` is ``accum_logp``. The caps are per row (each row's own
marginals).

Construction, one row (``budget`` = draft nodes, root excluded)::

    heap = [(0, root)]                                  # key: (-path score, insertion order)
    while heap and nodes < budget:
        pop the best node v (depth d)
        if d == L: continue
        for j in 0 .. min(cap[d], budget - nodes) - 1:  # stop at a -inf (padding) candidate
            add child (token[d][j], parent v, logq[d][j], score(v) + logq[d][j]); push it

Properties (tests/test_fanout_cap.py): at most ``budget`` nodes; children come after their parent (a valid,
ancestor-closed tree); siblings are distinct candidates of one depth; no node at depth d has more than ``cap[d]``
children. The tree depends on the drafter's output only, so WALK and greedy verification stay lossless.

Worked example (K = 2, L = 2, logq = [[-0.1, -2.5], [-0.7, -0.9]], budget 3, accum_logp): pop the root, add
a (-0.1) and b (-2.5); pop a, add a's children (-0.8) until the budget: nodes [a, b, a0]. With top2gap_fanout
(beta 1, gap0 1): g = [2.4, 0.2] -> caps [round(2 * 0.198), round(2 * 0.690)] = [1, 1]: the chain a, a0.
"""

from __future__ import annotations

import heapq
import math
from typing import Literal

import torch
from pydantic import Field

from specframe.building import BudgetedTreeBuilder, TreeShapeConfig
from specframe.config.bounds import MAX_CANDIDATES
from specframe.interfaces import BuildContext, Corrector
from specframe.tree import DraftTree
from specframe.tree.assembly import RowNodes, tree_from_rows
from specframe.types import DraftProposal


class AccumLogPConfig(TreeShapeConfig):
    """JetSpec's baseline: a best-first heap that adds every candidate of the next depth under the popped node."""

    type: Literal["accum_logp"] = "accum_logp"
    candidates: int = Field(8, ge=1, le=MAX_CANDIDATES, description="K: children per popped node (clamped to the "
                                                          "proposal's candidates)")


class Top2GapFanoutConfig(AccumLogPConfig):
    """JetSpec's `top2gap_fanout`: per-depth fan-out cap from the drafter's top-2 log-prob gap."""

    type: Literal["top2gap_fanout"] = "top2gap_fanout"  # type: ignore[assignment]
    beta: float = Field(1.0, ge=0.0, le=1e6, description="sigmoid slope on the gap (0: K/2 everywhere)")
    gap0: float = Field(1.0, ge=-1e6, le=1e6, description="gap (nats) at which the cap is K/2")


def top2gap_caps(logq: list[list[float]], beta: float, gap0: float) -> list[int]:
    """Per-depth caps of one row from its sorted candidate log-probs ``[L][K]`` (see the module docstring)."""
    caps = []
    for row in logq:
        k = len(row)
        if k < 2 or row[1] == -math.inf:  # no runner-up: nothing to fan out to
            caps.append(1)
            continue
        x = -beta * ((row[0] - row[1]) - gap0)
        share = 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))  # stable sigmoid
        caps.append(max(1, math.floor(k * share + 0.5)))
    return caps


def capped_fanout(root_token: int, tokens: list[list[int]], logq: list[list[float]], caps: list[int],
                  budget: int) -> RowNodes:
    """One row's tree, nodes in insertion (= topological) order. See the module docstring."""
    nodes = RowNodes.start(root_token)
    order = 0
    heap: list[tuple[float, int, int, int]] = [(-0.0, order, 0, 0)]  # (-score, insertion order, node, depth)
    while heap and nodes.num_draft_nodes < budget:
        neg_score, _, node, d = heapq.heappop(heap)
        if d >= len(tokens):
            continue
        for j in range(min(caps[d], len(tokens[d]), budget - nodes.num_draft_nodes)):
            lq = logq[d][j]
            if lq == -math.inf:  # padding: sorted, so every later candidate is padding too
                break
            score = -neg_score + lq
            child = nodes.add(tokens[d][j], node, lq, score)
            order += 1
            heapq.heappush(heap, (-score, order, child, d + 1))
    return nodes


def fanout_tree(p: DraftProposal, budget: int, beta: float | None, gap0: float) -> DraftTree:
    """Every row's tree, the proposal read to the host once (``beta`` None: full fan-out, `accum_logp`)."""
    b, depth, k = p.tokens.shape
    packed = torch.cat([p.root.double().view(b, 1), p.tokens.double().reshape(b, depth * k),
                        p.logprobs.double().reshape(b, depth * k)], dim=1).tolist()  # [B, 1 + 2 L K]: one read
    rows = []
    for row in packed:
        tokens = [[int(t) for t in row[1 + d * k : 1 + (d + 1) * k]] for d in range(depth)]
        logq = [row[1 + depth * k + d * k : 1 + depth * k + (d + 1) * k] for d in range(depth)]
        caps = [k] * depth if beta is None else top2gap_caps(logq, beta, gap0)
        rows.append(capped_fanout(int(row[0]), tokens, logq, caps, budget))
    return tree_from_rows(rows, p.root.device)


class AccumLogPBuilder(BudgetedTreeBuilder):
    """Full fan-out best-first heap on the proposal's base log-probs (the corrector is not used)."""

    def grow(self, p: DraftProposal, corrector: Corrector, budget: int) -> DraftTree:
        return fanout_tree(p, budget, None, 0.0)


class Top2GapFanoutBuilder(BudgetedTreeBuilder):
    """Fan-out capped per depth by the top-2 gap (the corrector is not used)."""

    config: Top2GapFanoutConfig

    def grow(self, p: DraftProposal, corrector: Corrector, budget: int) -> DraftTree:
        return fanout_tree(p, budget, self.config.beta, self.config.gap0)


def build_accum_logp(config: AccumLogPConfig, ctx: BuildContext | None = None) -> AccumLogPBuilder:
    return AccumLogPBuilder(config)


def build_top2gap_fanout(config: Top2GapFanoutConfig, ctx: BuildContext | None = None) -> Top2GapFanoutBuilder:
    return Top2GapFanoutBuilder(config)
