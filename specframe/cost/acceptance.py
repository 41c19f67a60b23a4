"""`AcceptanceEstimator`: the probability that a draft node's whole path is accepted, calibrated online.

`budget: auto` needs ``p(v)``, the probability that the verifier accepts every node on the path from the root
to ``v``: the expected tokens a round commits are ``1 + sum of p(v)`` over the verified nodes.

Estimator (a histogram calibrator with a Beta prior, kept per depth):

1. a node falls in cell ``(d, j)``: ``d`` = its depth (capped at ``max_depth``) and ``j`` its **key**:

   * ``key = "score"`` (deterministic trees, and any tree verified by WALK): the bin of ``exp(s(v))`` among
     ``bins`` equal-width bins of ``[0, 1]``, ``s(v)`` the path score the builder ranked the node by (the
     drafter's own belief, which the estimator calibrates);
   * ``key = "rank"`` (sampled trees verified by rejection, which needs ``q``): the node's sibling rank (capped
     at ``bins - 1``). The path score of a sampled node is the log-probability of the tokens that were
     *drawn*, so a kept set chosen by it would depend on the draws and break the rejection proof (a one-token
     chain with ``q = [0.8, 0.2]``, ``p = [0.5, 0.5]``, verified only when its ``q`` is high, emits
     ``[0.6, 0.4]``). Depth and rank are fixed before anything is drawn, so which children a node keeps is
     independent of their tokens given the history (:mod:`specframe_verifiers.tree_rejection`);
2. each cell keeps decayed counts ``n`` (nodes verified) and ``a`` (nodes whose path was accepted); every
   verified node of a round adds 1 to ``n`` and, if it lies on the accepted path, 1 to ``a``; all counts
   are multiplied by ``decay`` once per round, so the estimate follows drift between prompts;
3. ``p(cell) = (a + k * prior) / (n + k)`` with ``prior`` = the bin's centre times ``prior_scale`` for score keys
   (a rank cell's prior is ``prior_scale / (2 + j)``) and ``k = prior_strength`` pseudo-observations;
4. a node's estimate is then capped by its parent's (a path cannot be accepted more often than its
   prefix), so ``p`` never increases along an edge.

Everything runs on the tree's device for all rows at once; nothing is read back to the host. As counts grow,
each cell's estimate converges to the empirical acceptance rate of the nodes that fall in it:
`tests/cost/test_acceptance.py` checks this on synthetic rounds with a known acceptance law.

Example: a cell that saw 30 nodes, 24 accepted, prior 0.5, ``k = 4`` -> ``(24 + 2) / 34 = 0.76``.
"""

from __future__ import annotations

from typing import Literal

import torch

from specframe.tree import DraftTree

Key = Literal["score", "rank"]
#: Factor every count is multiplied by once per round.
DEFAULT_DECAY = 0.995


class AcceptanceEstimator:
    """Calibrated path-acceptance probabilities; see the module docstring."""

    def __init__(self, *, key: Key = "score", bins: int = 10, max_depth: int = 16, prior_strength: float = 4.0,
                 prior_scale: float = 0.8, decay: float = DEFAULT_DECAY) -> None:
        if bins < 1 or max_depth < 1:
            raise ValueError("bins and max_depth must be positive")
        self.key = key
        self.bins = bins
        self.max_depth = max_depth
        self.prior_strength = prior_strength
        self.decay = decay
        if key == "score":
            centres = (torch.arange(bins, dtype=torch.float64) + 0.5) / bins  # [J]
            prior = centres * prior_scale
        else:
            prior = prior_scale / (2.0 + torch.arange(bins, dtype=torch.float64))  # [J]
        self.prior = prior.expand(max_depth, bins).clone()  # [D, J]
        self.seen = torch.zeros(max_depth, bins, dtype=torch.float64)  # [D, J] decayed verified counts
        self.accepted = torch.zeros(max_depth, bins, dtype=torch.float64)  # [D, J] decayed accepted counts

    # ----------------------------------------------------------------------------------------- cells
    def _to(self, device: torch.device) -> None:
        if self.seen.device != device:
            self.prior, self.seen, self.accepted = (t.to(device) for t in (self.prior, self.seen, self.accepted))

    def cells(self, tree: DraftTree) -> torch.Tensor:  # [B, N] int64 flat cell index d * J + j
        """The cell of every node of ``tree`` (root and padding get a cell too; callers mask them)."""
        d = tree.depth.long().clamp(min=1, max=self.max_depth) - 1  # [B, N]
        if self.key == "score":
            prob = torch.exp(tree.score.double().clamp(max=0.0)).nan_to_num(0.0)
            j = (prob * self.bins).long().clamp(max=self.bins - 1)
        else:
            j = tree.sibling_rank().clamp(min=0, max=self.bins - 1)
        return d * self.bins + j

    def cell_estimates(self) -> torch.Tensor:  # [D, J] float64
        k = self.prior_strength
        return (self.accepted + k * self.prior) / (self.seen + k)

    def estimate(self, tree: DraftTree) -> torch.Tensor:  # [B, N] float64: 1 at the root, 0 on padding
        """``p(v)`` for every node of every row, capped by the parent's estimate."""
        self._to(tree.depth.device)
        p = self.cell_estimates().reshape(-1)[self.cells(tree)]  # [B, N]
        p = torch.where(tree.valid, p, torch.zeros_like(p))
        p[:, 0] = 1.0
        parent = tree.parent.clamp(min=0)
        # Parents precede children, so after `depth` passes every path is capped; the count depends only on the
        # capacity's depth bound, never on a value read from the device.
        for _ in range(min(self.max_depth, tree.capacity - 1)):
            p = torch.minimum(p, p.gather(1, parent))
            p[:, 0] = 1.0
        return p

    # ------------------------------------------------------------------------------------------ update
    def observe(self, tree: DraftTree, accepted_nodes: torch.Tensor, rows: torch.Tensor | None = None) -> None:
        """Count one verified round: ``accepted_nodes`` ``[B, D + 1]`` holds each row's accepted path (root first,
        -1 padded); ``rows`` ``[B]`` bool selects the rows to count (None: all)."""
        self._to(tree.depth.device)
        self.seen *= self.decay
        self.accepted *= self.decay
        counted = tree.valid & (tree.depth > 0)  # [B, N] draft nodes
        if rows is not None:
            counted &= rows.to(counted.device)[:, None]
        path = accepted_nodes.to(tree.depth.device).long()  # [B, D + 1]
        on_path = torch.zeros_like(counted)
        on_path.scatter_(1, path.clamp(min=0), path >= 0)
        cells = self.cells(tree).reshape(-1)
        flat_seen = self.seen.view(-1)
        flat_seen.index_add_(0, cells, counted.reshape(-1).double())
        self.accepted.view(-1).index_add_(0, cells, (counted & on_path).reshape(-1).double())

    # ------------------------------------------------------------------------------------- persistence
    def state(self) -> dict[str, list[list[float]]]:
        """The learnt counts, as plain lists (kept with the cost profile)."""
        return {"seen": self.seen.cpu().tolist(), "accepted": self.accepted.cpu().tolist()}

    def load_state(self, state: dict) -> bool:
        """Restore counts saved by :meth:`state`; False (nothing changed) when they do not fit these settings."""
        try:
            seen = torch.tensor(state["seen"], dtype=torch.float64)
            accepted = torch.tensor(state["accepted"], dtype=torch.float64)
        except (KeyError, TypeError, ValueError, RuntimeError):
            return False
        shape = (self.max_depth, self.bins)
        if tuple(seen.shape) != shape or tuple(accepted.shape) != shape or not bool(torch.isfinite(seen).all()) \
                or not bool(torch.isfinite(accepted).all()) or bool((accepted < 0).any()) \
                or bool((accepted > seen + 1e-9).any()):
            return False
        device = self.seen.device
        self.seen, self.accepted = seen.to(device), accepted.to(device)
        return True
