"""The `depth_rank_histogram` pruner (JetSpec): an offline depth x rank acceptance profile decides what is kept.

The profile (:mod:`specframe.metrics.depth_rank`, recorded by ``specframe profile-acceptance`` on the tune split)
counts, per depth ``d``, ``trials[d]`` (rounds whose depth-``d - 1`` node was accepted and had children) and
``accepted[d][r]`` (those whose accepted child had sibling rank ``r``; rank 0 = the drafter's top choice among the
parent's children, :mod:`specframe.tree.siblings`). Two rules read it (``rule``):

``fanout_cap`` (the default; JetSpec's ``jetspec/tree/profile_guided/depth_rank_histogram.py``, written here from
its documented behaviour). The table sets a per-depth fan-out cap::

    p[d][r] = accepted[d][r] / trials[d]                  # raw rate, no smoothing (JetSpec's table)
    cap[d]  = max(1, #{r : p[d][r] >= tau})                # at least one child per depth
    cap[d]  = unlimited  if tau <= 0, trials[d] = 0 or d > D (no data: full fan-out)

1. a node ``v`` at depth ``d`` of sibling rank ``r`` is *allowed* when ``r < cap[d]`` (the root always is);
2. it is *eligible* when it and every ancestor are allowed (one batched ``any`` over the ancestor mask), so the
   eligible set is ancestor-closed;
3. the root and the B eligible nodes of highest path score (the builder's ``score``: the drafter's path log-prob)
   are kept; ties go to the lower node index, so an ancestor precedes its descendants.

No data means full fan-out as JetSpec documents it ("missing deep rows -> full fanout"; its ``tau <= 0`` recovers
the uncapped heap). A row of zero trials is no data here; JetSpec's collector would write it as zero rates, which
its reader caps to 1. Like JetSpec, the cap *counts* the ranks that clear ``tau`` and allows the first ``cap[d]``
ranks: a depth whose rank 1 clears ``tau`` and rank 0 does not allows rank 0 only. Profiled rates almost always
fall with the rank, and then the allowed ranks are exactly those that clear ``tau``.

How this relates to JetSpec's cap inside its heap. Step 3's order is a best-first heap's: with scores that never
rise along an edge, the kept nodes are the first ``min(B, eligible)`` pops (ties aside) of DDTree's `heap` (one node
per pop) run with the cap, over the nodes the input tree holds. A `heap` tree over-expanded to M nodes holds the
first M prefixes of the uncapped order, and its eligible nodes are then a prefix of the capped heap's pop order
(sibling ranks in it are the candidates' ranks: siblings are popped best first). So the pruner equals the capped
heap at budget B exactly when the over-expanded tree holds the capped heap's first B pops, i.e. when at most
``M - B`` ineligible prefixes outrank the capped heap's B-th pop; otherwise it keeps the shorter prefix (fewer than
B nodes, never different ones). With ``M`` at least the number of nodes the full tree has, it always holds.
JetSpec's own builder (our `accum_logp` with a cap, :mod:`specframe_trees.builders.fanout_cap`) differs in a way
no pruner can undo: a pop materialises all of a node's allowed children at once, so its B nodes include
low-scoring siblings of early pops where the one-node-per-pop order keeps deeper, higher-scoring nodes.

Worked example (B = 2, tau = 0.3; profile ``trials = [10, 10]``, ``accepted = [[6, 1], [8, 1]]``, so
``p[1] = [0.6, 0.1]`` and ``p[2] = [0.8, 0.1]``: ``cap = [1, 1]``, a chain)::

    root ─┬─ a (d1, rank 0, score -0.1) ── c (d2, rank 0, score -0.9)
          └─ b (d1, rank 1, score -0.5) ── e (d2, rank 0, score -0.6)
    eligible: a, c (b is rank 1 at depth 1; e sits under b)   keep a, c (b would win on score alone)

With ``tau = 0`` (no cap) it keeps a and b: the plain heap top-B (`deferred_topb` with ``beta = 0``).

``path_product`` (this project's variant, kept as an explicitly named option): every node's entry is the smoothed
rate ``h[d][r] = (accepted + s) / (trials + 2 s)`` (``smoothing`` s; depths past the profile reuse its last row,
ranks it never saw the row's unseen rate ``s / (trials + 2 s)``), its path score ``H(v)`` is the sum of ``log h``
along its path (one batched product with the ancestor mask), and the root and the B best ``H`` are kept (ties: the
builder's score, then the lower index). Every ``h < 1``, so ``H`` falls strictly along each edge and the first
``B + 1`` are ancestor-closed (as in DARTree's Lemma 1). In the example above (s = 1): ``H(a) = log 0.58``,
``H(b) = log 0.17``, ``H(c) = log(0.58 * 0.75)``: keep a, c.

Nothing is read from the device under either rule: the kept count is at most ``B + 1`` per row (root included).
Losslessness: the pruner only chooses an ancestor-closed subtree of a deterministic tree, which any verifier that is
exact for that tree is exact for. It does not keep a prefix of each node's children in sampling order
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
from specframe_trees.pruners.deferred_topb import check_no_rise

#: A cap that never binds (no node has this many siblings).
UNCAPPED = MAX_TREE_NODES + 1


class DepthRankHistogramConfig(ComponentConfig):
    """An offline depth x rank acceptance profile: a per-depth fan-out cap (JetSpec) or a path product."""

    type: Literal["depth_rank_histogram"] = "depth_rank_histogram"
    profile: str = Field(description="JSON profile written by `specframe profile-acceptance` (never pickle)")
    rule: Literal["fanout_cap", "path_product"] = Field(
        "fanout_cap",
        description="fanout_cap (JetSpec): at each depth keep the first cap ranks, cap = how many ranks' profiled "
                    "rate reaches tau (at least 1), then the top-B by path score; path_product: top-B by the "
                    "product of smoothed profile rates along each path")
    tau: float = Field(0.02, ge=0.0, le=1.0,
                       description="fanout_cap: least acceptance rate (a probability, accepted / trials at the "
                                   "depth) for a sibling rank to be kept; 0 disables the cap (JetSpec: 0.02)")
    budget: int | None = Field(None, ge=1, le=MAX_TREE_NODES,
                               description="B: nodes kept (root excluded); None: the pipeline's")
    smoothing: float = Field(1.0, gt=0.0, le=1e6,
                             description="path_product: Laplace count s: h = (accepted + s) / (trials + 2 s)")


def fanout_caps(counts: DepthRankCounts, tau: float) -> list[int]:
    """``cap[d - 1]`` for depths ``d = 1 .. D`` (the module docstring's rule); `UNCAPPED` where nothing binds."""
    caps = []
    for t, row in zip(counts.trials, counts.accepted, strict=True):
        if tau <= 0 or t == 0:
            caps.append(UNCAPPED)
            continue
        # A full row's last column pools every rank >= MAX_RANKS - 1 (the recorder's bound, not a rank of its own):
        # it counts no rank towards the cap, and when every rank below it and it too clear tau, nothing is capped.
        pooled = len(row) == MAX_RANKS
        ranks = row[:-1] if pooled else row
        clears = sum(1 for a in ranks if a / t >= tau)
        everything = pooled and clears == len(ranks) and row[-1] / t >= tau
        caps.append(UNCAPPED if everything else max(1, clears))
    return caps


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
    """Keeps B nodes chosen by the profile under ``config.rule``; see the module docstring."""

    def __init__(self, config: DepthRankHistogramConfig, counts: DepthRankCounts) -> None:
        self.config = config
        self.counts = counts
        self._table = log_table(counts, config.smoothing)  # [D, R + 1] float64 on the host
        caps = fanout_caps(counts, config.tau)
        self._capped = any(c < UNCAPPED for c in caps)
        # Indexed by depth 0 (the root) .. D + 1 (every depth past the profile): never binding at either end.
        self._caps = torch.tensor([UNCAPPED, *caps, UNCAPPED], dtype=torch.long)  # [D + 2]
        self._on: dict[tuple[str, torch.device], torch.Tensor] = {}

    def _on_device(self, name: str, host: torch.Tensor, device: torch.device) -> torch.Tensor:
        if (name, device) not in self._on:
            self._on[(name, device)] = host.to(device)
        return self._on[(name, device)]

    def _ranks(self, tree: DraftTree) -> torch.Tensor:  # [B, N] int64
        nodes = torch.arange(tree.capacity, device=tree.parent.device).expand(tree.batch_size, -1)  # [B, N]
        return path_sibling_ranks(tree, nodes)[0]

    def eligible(self, tree: DraftTree) -> torch.Tensor:  # [B, N] bool
        """``fanout_cap`` steps 1-2: the node and all its ancestors have a rank under their depth's cap."""
        caps = self._on_device("caps", self._caps, tree.parent.device)  # [D + 2]
        cap = caps[tree.depth.long().clamp(min=0, max=caps.shape[0] - 1)]  # [B, N]
        allowed = tree.valid & ((tree.parent < 0) | (self._ranks(tree) < cap))  # [B, N]
        # [b, i, j]: j is i or an ancestor of i and is not allowed.
        blocked = tree.ancestor_mask() & ~allowed[:, None, :]  # [B, N, N]
        return allowed & ~blocked.any(dim=2)

    def path_scores(self, tree: DraftTree) -> torch.Tensor:  # [B, N] float64, 0 at the root, -inf on padding
        """``path_product``'s ``H(v)``: the sum of ``log h`` along each node's path."""
        table = self._on_device("table", self._table, tree.parent.device)  # [D, R + 1]
        depths, width = table.shape[0], table.shape[1] - 1
        d = (tree.depth.clamp(min=1, max=depths) - 1).long()  # [B, N]
        r = self._ranks(tree).clamp(max=width).long()  # [B, N]
        own = torch.where(tree.valid & (tree.parent >= 0), table[d, r], torch.zeros_like(table[d, r]))  # [B, N]
        ancestors = tree.ancestor_mask().to(torch.float64)  # [B, N, N]: [b, i, j] = j on the path to i
        path = torch.bmm(ancestors, own[:, :, None])[:, :, 0]  # [B, N]
        return torch.where(tree.valid, path, torch.full_like(path, -math.inf))

    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        budget = self.config.budget if self.config.budget is not None else ctx.budget
        capping = self.config.rule == "fanout_cap" and self._capped
        if tree.capacity <= budget + 1 and not capping:  # every row fits (a host fact: nothing to read)
            return tree
        with torch.inference_mode():
            n = tree.capacity
            index = torch.arange(n, device=tree.score.device)
            score = tree.score.double()  # [B, N]
            if ctx.check and self.config.rule == "fanout_cap":  # reads the device: the checking mode only
                check_no_rise(tree, score, "depth_rank_histogram", "builder path score")
            if self.config.rule == "fanout_cap":
                # Step 3: best path score first among eligible nodes; the rest after them (two stable sorts,
                # so equal scores keep the lower index, an ancestor, first).
                eligible = self.eligible(tree)  # [B, N]
                score = torch.where(index[None, :] == 0, math.inf, score)  # the root first, always kept
                by_score = torch.sort(score, dim=1, descending=True, stable=True).indices  # [B, N]
                within = torch.sort(eligible.gather(1, by_score).to(torch.int8), dim=1, descending=True,
                                    stable=True).indices  # [B, N]
                available = eligible.sum(dim=1)  # [B] root included
            else:
                # Ties on H go to the builder's path score, then to the lower index (two stable sorts).
                key = self.path_scores(tree)  # [B, N]
                key[:, 0] = math.inf  # the root first, always kept
                by_score = torch.sort(score, dim=1, descending=True, stable=True).indices  # [B, N]
                within = torch.sort(key.gather(1, by_score), dim=1, descending=True, stable=True).indices  # [B, N]
                available = tree.num_nodes  # [B]
            order = by_score.gather(1, within)  # [B, N] node indices, best first
            keep_count = torch.clamp(available, max=budget + 1)  # [B] root included
            keep_sorted = index[None, :] < keep_count[:, None]  # [B, N] in sorted order
            keep = torch.zeros_like(tree.valid).scatter(1, order, keep_sorted)
            return tree.subtree(keep, capacity=min(budget + 1, n))


def build_depth_rank_histogram(config: DepthRankHistogramConfig,
                               ctx: BuildContext | None = None) -> DepthRankHistogramPruner:
    """Read the profile once, at build time (a missing or malformed file is a `ConfigError`)."""
    return DepthRankHistogramPruner(config, load_counts(config.profile))
