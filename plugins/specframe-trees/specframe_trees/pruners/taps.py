"""The `taps` pruner: keep the B nodes with the best *path-conditioned* acceptance estimates (TAPS).

**From the paper** (Wang, Huang, Chen, "TAPS: Target-Aware Prefix Tree Selection for Diffusion-Drafted
Speculative Decoding", arXiv 2606.00487; only the abstract could be retrieved): diffusion-tree methods such as
DDTree rank nodes by the drafter's per-depth *marginal* probabilities, while verification is prefix-conditioned
(a node is reached only if its whole prefix is accepted), so they spend verification on descendants of prefixes
that are unlikely to survive. TAPS turns the diffusion marginals into path-conditioned acceptance estimates and
selects a compact prefix-closed subtree under a fixed verification budget.

**Our reading** (the paper's formulas were not retrievable; this is written from the issue's description and
the sibling-conditional metric, :mod:`specframe.tree.siblings`): a block drafter's depth-``d`` marginal is, in
effect, conditioned on its own best guess of the prefix (the chain of its top choices). On that *main path* the
marginal is a fair estimate of the chance the target accepts the node; once the path has taken a sibling that
is not its parent's top child, the later marginals do not condition on that sibling, and the continuation is
right far less often (22 % after a sibling against 65-84 % on the main path, rmagur1203/vllm-ddtree,
docs/DDTREE-FINDINGS-EN.md). So every edge *below* the first off-top node is discounted by a constant factor
``rho`` (``sibling_discount``), the measured ratio of continuation accuracy after a sibling to that on the
main path::

    a(v) = prod over the non-root nodes u on the path root -> v of  q(u) * rho ** off(parent(u))
    off(w) = 1 if some non-root node on the path root -> w is not its parent's top child, else 0

``q(u) = exp(logq(u))`` is the node's own draft probability (the drafter's marginal for DFlash + DDTree), and
"top child" is sibling rank 0 in the sense of :mod:`specframe.tree.siblings` (highest ``logq`` among the kept
children, ties to the lower index). The node that leaves the main path keeps its own marginal (its parent is
still on the main path, so the depth's marginal conditions on the right prefix); its descendants pay ``rho``
per depth. The kept set is the global top-B by ``log a``, as in ``deferred_topb``.

Why the kept set is a valid tree (Lemma 1's argument): every factor is at most 1 (``logq`` is clamped to
<= 0 and ``rho <= 1``), so ``a`` never increases along an edge; ranking by ``(-log a, node index)`` puts every
ancestor before its descendants (ties go to the lower index, and ancestors have lower indices), so the top B
are ancestor-closed and equal the first B pops of a best-first heap over the tree by ``a``. The estimate is
taken as the minimum over each node's ancestors of the summed log, so rounding in the batched sum can never
make a child outrank its parent. With ``rho = 1`` and builder scores equal to summed ``logq`` (DDTree's heap)
the pruner keeps exactly what ``deferred_topb`` with ``beta: 0`` keeps.

Kept nodes keep every field (``score`` included): the estimate only decides which nodes stay, and it depends
only on the tree (never on the target), so any verifier that is exact for a fixed deterministic tree stays exact
(``greedy``, ``walk``). It may drop a sampled sibling from the middle of a child list, so it does not declare
``keeps_child_prefix`` and the rejection verifiers of sampled trees are refused at validation.

Worked example (``rho = 0.3``, B = 4; marginals in brackets, rank 0 = top child)::

    root ─┬─ 1 a (0.6) ── 3 c (0.7) ── 5 e (0.5)     marginal products (DDTree): a .6  c .42  b .3  d .24  e .21
          └─ 2 b (0.3) ── 4 d (0.8)                  TAPS estimates:              a .6  c .42  b .3  e .21  d .072

``b`` is rank 1 under the root, so ``d`` pays ``rho``: ``0.3 * 0.8 * 0.3 = 0.072``. DDTree's top 4 keeps
``a, c, b, d``; TAPS keeps ``a, c, b, e`` (the main path one depth deeper).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_TREE_NODES
from specframe.interfaces import BuildContext, Pruner, RoundContext
from specframe.tree import DraftTree

#: The default ``rho``: 0.22 / 0.745, continuation accuracy after an accepted sibling over the midpoint of the
#: main path's 65-84 % (rmagur1203/vllm-ddtree's DDTree-over-DFlash finding; not the paper's value, which could
#: not be retrieved, and not measured here). Dimensionless (a ratio of probabilities).
DEFAULT_SIBLING_DISCOUNT = 0.3
#: Floor of a node's log-prob in nats, so a zero-probability candidate ranks last but stays finite (a
#: ``-inf`` would turn the batched path sum into NaN).
LOGQ_FLOOR = -1e6


class TapsConfig(ComponentConfig):
    """TAPS: global top-B by path-conditioned acceptance estimate (sibling-discounted drafter marginals)."""

    type: Literal["taps"] = "taps"
    budget: int | None = Field(None, ge=1, le=MAX_TREE_NODES,
                               description="B: nodes kept (root excluded); None: the pipeline's")
    sibling_discount: float = Field(
        DEFAULT_SIBLING_DISCOUNT, gt=0.0, le=1.0, allow_inf_nan=False,
        description="rho in (0, 1]: factor per depth below a non-top sibling (continuation accuracy after a "
                    "sibling / on the main path; 1 = marginals as they are, DDTree's ranking)")


def path_conditioned_log_acceptance(tree: DraftTree, sibling_discount: float) -> torch.Tensor:  # [B, N] float64
    """``log a(v)`` for every node (see the module docstring): 0 at the root, ``-inf`` on padding.

    Never increases along an edge (exactly: the minimum over ancestors is taken). Batched on the tree's device,
    ``O(B N^2)`` memory for the sibling ranks and the ancestor mask; nothing is read back to the host.
    """
    valid, parent = tree.valid, tree.parent  # [B, N] each
    n = tree.capacity
    index = torch.arange(n, device=parent.device)
    non_root = valid & (parent >= 0)  # [B, N]
    logq = tree.logq.double().clamp(min=LOGQ_FLOOR, max=0.0)  # [B, N] a probability is at most 1
    logq = torch.where(non_root, logq, torch.zeros_like(logq))
    # Step 1: sibling rank 0 or not: a node is off-top when a valid sibling has a higher logq, or the same at a
    # lower index. This is specframe.tree.siblings' rank taken on the clamped logq, not shared with it: siblings
    # below LOGQ_FLOOR tie here (the lower index is top) where path_sibling_ranks orders them by the raw logq.
    sibling = non_root[:, None, :] & (parent[:, None, :] == parent[:, :, None])  # [B, N, N] [b, i, j]: j sibling of i
    ahead = (logq[:, None, :] > logq[:, :, None]) | (
        (logq[:, None, :] == logq[:, :, None]) & (index[None, None, :] < index[None, :, None]))  # [B, N, N]
    off_top = non_root & (sibling & ahead).any(dim=2)  # [B, N]
    # Step 2: off(w): some node on the path root -> w (w included) is off-top.
    ancestors = tree.ancestor_mask()  # [B, N, N] [b, i, j]: j is i or an ancestor of i
    off_path = (ancestors & off_top[:, None, :]).any(dim=2)  # [B, N]
    # Step 3: each edge's log factor, log q(u) + log rho * off(parent(u)).
    parent_off = off_path.gather(1, parent.clamp(min=0)) & non_root  # [B, N]
    edge = logq + math.log(sibling_discount) * parent_off.double()  # [B, N], <= 0
    # Step 4: sum the edges on each path, then take the minimum over ancestors so that rounding in the batched
    # sum cannot lift a child above its parent.
    summed = torch.bmm(ancestors.double(), edge.unsqueeze(-1)).squeeze(-1)  # [B, N]
    inf = torch.full_like(summed, math.inf)
    monotone = torch.where(ancestors, summed[:, None, :], inf[:, None, :]).amin(dim=2)  # [B, N]
    return torch.where(valid, monotone, -inf)


class TapsPruner(Pruner):
    """Keeps the top-B nodes by path-conditioned acceptance estimate; see the module docstring."""

    def __init__(self, config: TapsConfig) -> None:
        self.config = config

    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        budget = self.config.budget if self.config.budget is not None else ctx.budget
        if tree.capacity <= budget + 1:  # every row fits (a host fact: nothing to read)
            return tree
        with torch.inference_mode():
            n = tree.capacity
            index = torch.arange(n, device=tree.logq.device)
            key = path_conditioned_log_acceptance(tree, self.config.sibling_discount)  # [B, N], -inf on padding
            key[:, 0] = math.inf  # the root ranks first and is always kept
            # A stable sort over node index breaks ties ancestor-first (see the module docstring).
            order = torch.sort(key, dim=1, descending=True, stable=True).indices  # [B, N]
            keep_count = torch.clamp(tree.num_nodes, max=budget + 1)  # [B] root included
            keep_sorted = index[None, :] < keep_count[:, None]  # [B, N] in sorted order
            keep = torch.zeros_like(tree.valid).scatter(1, order, keep_sorted)  # [B, N] in node order
            # No row keeps more than budget + 1 nodes: the capacity is known without reading the device.
            return tree.subtree(keep, capacity=min(budget + 1, n))


def build_taps(config: TapsConfig, ctx: BuildContext | None = None) -> TapsPruner:
    return TapsPruner(config)
