"""The `depth_rank_histogram` pruner (JetSpec): keep the B nodes whose paths an offline profile rates most likely.

The profile (:mod:`specframe.metrics.depth_rank`, recorded by ``specframe profile-acceptance`` on the tune split)
gives ``h[d][r]``: how often the child the target accepts at depth ``d`` has sibling rank ``r`` (rank 0 = the
drafter's top choice, :mod:`specframe.tree.siblings`), Laplace-smoothed so every entry lies strictly in (0, 1).

Algorithm, for all rows at once:

1. every node's sibling rank ``r(v)`` (its place among its parent's children by ``logq``, as the records count it);
2. its entry ``h(v) = h[min(d, D)][min(r, R)]``: depths past the profile's ``D`` reuse its last row, ranks it never
   saw get the row's unseen rate ``s / (trials + 2 s)``;
3. its path score ``H(v) = sum of log h(u)`` over the path root -> v (one batched product with the ancestor mask;
   the product of the entries, in log space);
4. the root and the B best ``H`` are kept (ties: the builder's path score, then the lower node index).

Why the kept set is a valid tree: every ``h < 1``, so ``H`` falls strictly along each edge and a node always ranks
after its parent; the first ``B + 1`` of the order are ancestor-closed (as in DARTree's Lemma 1). Nothing is read
from the device: the kept count is ``min(B + 1, nodes)`` per row.

Worked example (B = 2; profile rows ``h[1] = [0.5, 0.25]``, ``h[2] = [0.5, 0.125]``)::

    root ─┬─ a (d1, rank 0) ── c (d2, rank 0)      products: a = 0.5, b = 0.25, c = 0.5 * 0.5 = 0.25
          └─ b (d1, rank 1)                         keep a, then c or b: the tie goes to the higher builder score

Difference from JetSpec's public code: there the table sets a per-depth fan-out cap (the ranks whose profiled
acceptance clears a threshold ``tau``) inside its heap builder, and its collector divides by the rounds in which a
rank was present. Here, as issue #42 specifies, the table scores whole paths (product of entries) in a pruner
after any builder; a ``tau`` cap is not offered.

Losslessness: the pruner only chooses an ancestor-closed subtree of a deterministic tree, which any verifier that
is exact for that tree is exact for. It does not keep a prefix of each node's children in sampling order
(``keeps_child_prefix`` is False), so pipelines pairing it with a rejection verifier on sampled trees are refused
when the config is validated.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_TREE_NODES
from specframe.interfaces import BuildContext, Pruner, RoundContext
from specframe.metrics.depth_rank import MAX_RANKS, DepthRankCounts, load_counts
from specframe.tree import DraftTree
from specframe.tree.siblings import path_sibling_ranks


class DepthRankHistogramConfig(ComponentConfig):
    """Global top-B by the product of offline depth x rank acceptance rates along each path."""

    type: Literal["depth_rank_histogram"] = "depth_rank_histogram"
    profile: str = Field(description="JSON profile written by `specframe profile-acceptance` (never pickle)")
    budget: int | None = Field(None, ge=1, le=MAX_TREE_NODES,
                               description="B: nodes kept (root excluded); None: the pipeline's")
    smoothing: float = Field(1.0, gt=0.0, le=1e6,
                             description="Laplace count s: h = (accepted + s) / (trials + 2 s); keeps h in (0, 1)")


def log_table(counts: DepthRankCounts, smoothing: float) -> torch.Tensor:  # [D, R + 1] float64
    """``log h`` per (depth - 1, rank), plus a last column for ranks the profile never saw (the unseen rate)."""
    rows = counts.rates(smoothing)
    width = len(rows[0])
    table = torch.tensor([row + [smoothing / (t + 2 * smoothing)] for row, t in zip(rows, counts.trials, strict=True)],
                         dtype=torch.float64)
    if width == MAX_RANKS:  # the recorder pooled every rank >= MAX_RANKS - 1 into the last column
        table[:, width] = table[:, width - 1]
    return table.log()


class DepthRankHistogramPruner(Pruner):
    """Keeps the B nodes of highest profiled path acceptance; see the module docstring."""

    def __init__(self, config: DepthRankHistogramConfig, counts: DepthRankCounts) -> None:
        self.config = config
        self.counts = counts
        self._table = log_table(counts, config.smoothing)  # [D, R + 1] float64 on the host
        self._on: dict[torch.device, torch.Tensor] = {}

    def _table_on(self, device: torch.device) -> torch.Tensor:
        if device not in self._on:
            self._on[device] = self._table.to(device)
        return self._on[device]

    def path_scores(self, tree: DraftTree) -> torch.Tensor:  # [B, N] float64, 0 at the root, -inf on padding
        """``H(v)``: the sum of ``log h`` along each node's path (steps 1-3)."""
        table = self._table_on(tree.parent.device)
        depths, width = table.shape[0], table.shape[1] - 1
        nodes = torch.arange(tree.capacity, device=tree.parent.device).expand(tree.batch_size, -1)  # [B, N]
        rank, _ = path_sibling_ranks(tree, nodes)  # [B, N]
        d = (tree.depth.clamp(min=1, max=depths) - 1).long()  # [B, N]
        r = rank.clamp(max=width).long()  # [B, N]
        own = torch.where(tree.valid & (tree.parent >= 0), table[d, r], torch.zeros_like(table[d, r]))  # [B, N]
        ancestors = tree.ancestor_mask().to(torch.float64)  # [B, N, N]: [b, i, j] = j on the path to i
        path = torch.bmm(ancestors, own[:, :, None])[:, :, 0]  # [B, N]
        return torch.where(tree.valid, path, torch.full_like(path, -math.inf))

    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        budget = self.config.budget if self.config.budget is not None else ctx.budget
        if tree.capacity <= budget + 1:  # every row fits (a host fact: nothing to read)
            return tree
        with torch.inference_mode():
            n = tree.capacity
            key = self.path_scores(tree)  # [B, N]
            key[:, 0] = math.inf  # the root first, always kept
            # Ties on H go to the builder's path score, then to the lower index (two stable sorts).
            by_score = torch.sort(tree.score.double(), dim=1, descending=True, stable=True).indices  # [B, N]
            within = torch.sort(key.gather(1, by_score), dim=1, descending=True, stable=True).indices  # [B, N]
            order = by_score.gather(1, within)  # [B, N] node indices, best first
            index = torch.arange(n, device=tree.score.device)
            keep_count = torch.clamp(tree.num_nodes, max=budget + 1)  # [B] root included
            keep_sorted = index[None, :] < keep_count[:, None]  # [B, N] in sorted order
            keep = torch.zeros_like(tree.valid).scatter(1, order, keep_sorted)
            return tree.subtree(keep, capacity=min(budget + 1, n))


def build_depth_rank_histogram(config: DepthRankHistogramConfig,
                               ctx: BuildContext | None = None) -> DepthRankHistogramPruner:
    """Read the profile once, at build time (a missing or malformed file is a `ConfigError`)."""
    return DepthRankHistogramPruner(config, load_counts(config.profile))
