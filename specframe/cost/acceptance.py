"""`AcceptanceEstimator`: the probability that a draft node's whole path is accepted, calibrated online.

`budget: auto` needs ``p(v)``, the probability that the verifier accepts every node on the path from the root
to ``v``: the expected tokens a round commits are ``1 + sum of p(v)`` over the verified nodes. Builders rank
nodes by a path score ``s(v)`` (the sum of corrected draft log-probs), whose exponent is the drafter's own
belief; drafters are seldom calibrated, so the estimator learns the map from scores to acceptance.

Estimator (a histogram calibrator with a Beta prior, kept per depth):

1. a node falls in cell ``(d, j)``: ``d`` = its depth (capped at ``max_depth``), ``j`` = the bin of
   ``exp(s(v))`` among ``bins`` equal-width bins of ``[0, 1]``;
2. each cell keeps decayed counts ``n`` (nodes verified) and ``a`` (nodes whose path was accepted); every
   verified node of a round adds 1 to ``n`` and, if it lies on the accepted path, 1 to ``a``; all counts
   are multiplied by ``decay`` once per round, so the estimate follows drift between prompts;
3. ``p(cell) = (a + k * prior) / (n + k)`` with ``prior`` = the bin's centre times ``prior_scale``
   (the drafter's belief, shrunk) and ``k = prior_strength`` pseudo-observations;
4. a node's estimate is then capped by its parent's (a path cannot be accepted more often than its
   prefix), so ``p`` never increases along an edge.

As counts grow, each cell's estimate converges to the empirical acceptance rate of the nodes that fall in
it (the prior's weight ``k / (n + k)`` vanishes): `tests/cost/test_acceptance.py` checks this on synthetic
rounds with a known acceptance law.

Example: a cell that saw 30 nodes, 24 accepted, prior 0.5, ``k = 4`` -> ``(24 + 2) / 34 = 0.76``.
"""

from __future__ import annotations

import torch

from specframe.tree import DraftTree


class AcceptanceEstimator:
    """Calibrated path-acceptance probabilities; see the module docstring."""

    def __init__(self, *, bins: int = 10, max_depth: int = 16, prior_strength: float = 4.0,
                 prior_scale: float = 0.8, decay: float = 0.995) -> None:
        if bins < 1 or max_depth < 1:
            raise ValueError("bins and max_depth must be positive")
        self.bins = bins
        self.max_depth = max_depth
        self.prior_strength = prior_strength
        self.decay = decay
        centres = (torch.arange(bins, dtype=torch.float64) + 0.5) / bins  # [J]
        self.prior = (centres * prior_scale).expand(max_depth, bins).clone()  # [D, J]
        self.seen = torch.zeros(max_depth, bins, dtype=torch.float64)  # [D, J] decayed verified counts
        self.accepted = torch.zeros(max_depth, bins, dtype=torch.float64)  # [D, J] decayed accepted counts

    # ----------------------------------------------------------------------------------------- cells
    def _cells(self, depth: torch.Tensor, score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cell indices of nodes with the given depths ``[...]`` and path scores ``[...]``."""
        d = (depth.long().clamp(min=1, max=self.max_depth) - 1).cpu()
        prob = torch.exp(score.double().clamp(max=0.0)).nan_to_num(0.0).cpu()
        j = (prob * self.bins).long().clamp(max=self.bins - 1)
        return d, j

    def cell_estimates(self) -> torch.Tensor:  # [D, J] float64
        k = self.prior_strength
        return (self.accepted + k * self.prior) / (self.seen + k)

    def estimate(self, tree: DraftTree, row: int = 0) -> torch.Tensor:  # [N] float64, 1 at the root
        """``p(v)`` for every valid node of one row (node order), capped by the parent's estimate."""
        n = int(tree.num_nodes[row])
        depth, score = tree.depth[row, :n], tree.score[row, :n]
        d, j = self._cells(depth, score)
        p = self.cell_estimates()[d, j]
        p[0] = 1.0
        parent = tree.parent[row, :n].cpu().tolist()
        values = p.tolist()
        for i in range(1, n):  # parents precede children, so one pass caps whole paths
            values[i] = min(values[i], values[parent[i]])
        return torch.tensor(values, dtype=torch.float64)

    # ------------------------------------------------------------------------------------------ update
    def observe(self, tree: DraftTree, accepted_nodes: torch.Tensor, row: int = 0) -> None:
        """Count one verified tree: ``accepted_nodes`` ``[D + 1]`` holds the accepted path (root first, -1 pad)."""
        self.seen *= self.decay
        self.accepted *= self.decay
        n = int(tree.num_nodes[row])
        if n <= 1:
            return
        d, j = self._cells(tree.depth[row, 1:n], tree.score[row, 1:n])
        on_path = torch.zeros(n, dtype=torch.float64)
        path = accepted_nodes.cpu().long()
        path = path[(path > 0) & (path < n)]
        on_path[path] = 1.0
        self.seen.index_put_((d, j), torch.ones(n - 1, dtype=torch.float64), accumulate=True)
        self.accepted.index_put_((d, j), on_path[1:], accumulate=True)
