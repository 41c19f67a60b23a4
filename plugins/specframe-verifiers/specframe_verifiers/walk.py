"""WALK verification (docs/concepts/losslessness.md) and its temperature-0 special case, greedy verification.

Vocabulary: the **accepted** tokens are the draft nodes on the walked path; the **bonus** token is the target's
draw at the node where the walk stops. WALK never produces a residual token.

Algorithm, for every batch row at once::

    y[v] ~ p(. | context, path(v))   for every node v            (uniform keyed by v's position; argmax at T = 0)
    v := root
    while v has a child c with token(c) == y[v]:  accept c; v := c
    bonus := y[v]

computed without a loop over depths or a read of the tree: a node *matches* when its token is its parent's draw
(the first such sibling, should a builder repeat a token; :meth:`WalkVerifier.matches`); a node is on the walked
path when it and all its ancestors match (the tree's visibility relation, which the target's mask was built
from); the path is the set of ancestors of its deepest node, whose draw is the bonus.

Worked example (one row): tree ``root(7) -> {a(3) -> c(9), b(5)}``; draws ``y = [3, 9, 1, 4]`` for nodes
``[root, a, b, c]``. ``y[root] = 3`` matches ``a``; ``y[a] = 9`` matches ``c``; ``c`` is a leaf, so the bonus is
``y[c] = 4``. Result: ``accepted_nodes = [0, 1, 3]``, ``num_accepted = 2``, ``bonus_token = 4``.

The draw at ``v`` uses the uniform of stream ``TARGET`` keyed by the request seed and the absolute position of
the token it predicts (:mod:`specframe.sampling.noise`), the uniform plain decoding uses at that position. Nodes
at the same depth share it; the walk visits one node per depth.

Why it is exact: each emitted token is the draw ``F^{-1}(u_t)`` from the target conditional given exactly the
emitted prefix, with ``u_t`` the position's own uniform, and whether the walk continues is a function of that
draw and of a tree fixed before the draws. So the emitted tokens are those plain decoding emits for the same
seed (its law is the target's), for any tree built independently of the target's uniforms (deterministic top-K
trees and trees sampled from a draft law alike).
"""

from __future__ import annotations

import torch

from specframe.interfaces import RoundContext, Verifier
from specframe.sampling import sample
from specframe.sampling.noise import TARGET
from specframe.tree import DraftTree
from specframe.types import VerifyResult


class WalkVerifier(Verifier):
    """Follow the children that match independent target draws; emit the draw where the walk stops."""

    def draws(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> torch.Tensor:  # [B, N] int64
        """One target draw per node from the processed law (argmax at temperature 0), position-keyed."""
        u = None if ctx.sampling.greedy else ctx.noise.uniforms(TARGET, tree.depth)  # [B, N]
        return sample(logits, ctx.sampling, u)

    def matches(self, tree: DraftTree, y: torch.Tensor) -> torch.Tensor:  # [B, N] bool
        """The nodes the walk may step to: a valid child whose token is its parent's draw ``y[parent]`` (the first
        such sibling, should a builder repeat a token). The root is added by the walk."""
        n = y.shape[1]
        tokens, parent = tree.tokens.to(y.device), tree.parent.to(y.device)
        match = tree.valid.to(y.device) & (parent >= 0) & (tokens == y.gather(1, parent.clamp(min=0)))
        earlier = torch.ones(n, n, dtype=torch.bool, device=y.device).tril(-1)  # [i, j]: j < i
        twin = (parent[:, :, None] == parent[:, None, :]) & (tokens[:, :, None] == tokens[:, None, :]) \
            & match[:, None, :] & earlier  # [B, N, N]
        return match & ~twin.any(dim=2)

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        y = self.draws(tree, logits, ctx)  # [B, N]
        return walk_result(tree, y, self.matches(tree, y))


def walk_result(tree: DraftTree, y: torch.Tensor, match: torch.Tensor) -> VerifyResult:
    """The WALK verdict for the draws ``y`` ``[B, N]`` (one per node) and the nodes that ``match`` ``[B, N]`` their
    parent's draw, in a fixed number of tensor operations (no loop over depths, no read)."""
    b, n = y.shape
    dev = y.device
    valid = tree.valid.to(dev)
    match = match.clone()
    match[:, 0] = True
    # Step 1: on the path = every ancestor-or-self matches; the deepest such node ends the walk.
    seen = tree.visibility().to(dev)  # [B, N, N]: [b, i, j] = j is i or an ancestor of i
    on_path = valid & ~(seen & ~match[:, None, :]).any(dim=2)  # [B, N]
    depth = torch.where(on_path, tree.depth.to(dev), torch.full_like(y, -1))
    last = depth.argmax(dim=1)  # [B] the deepest node on the path (depths along a path are distinct)
    # Step 2: the path's nodes are the ancestors of `last`, in increasing index (= root-first) order.
    members = seen.gather(1, last[:, None, None].expand(b, 1, n))[:, 0] & on_path  # [B, N]
    index = torch.arange(n, device=dev).expand(b, n)
    nodes = torch.sort(torch.where(members, index, torch.full_like(index, n)), dim=1).values  # [B, N]
    nodes = torch.where(nodes == n, torch.full_like(nodes, -1), nodes)
    if tree.depth_bound is not None:  # [B, D + 1]: a path holds at most depth_bound + 1 nodes
        nodes = nodes[:, : tree.depth_bound + 1]
    count = members.sum(dim=1) - 1  # [B] accepted draft tokens
    return VerifyResult(accepted_nodes=nodes, num_accepted=count, bonus_token=y.gather(1, last[:, None])[:, 0])


class GreedyVerifier(WalkVerifier):
    """WALK with ``y[v] = argmax`` of the target's logits: exact at temperature 0 only.

    It ignores the sampling settings and never consumes randomness; at temperature 0 it returns exactly what
    :class:`WalkVerifier` returns.
    """

    def draws(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> torch.Tensor:  # [B, N] int64
        return logits.argmax(dim=-1)
