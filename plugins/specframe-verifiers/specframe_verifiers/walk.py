"""WALK verification (docs/concepts/losslessness.md) and its temperature-0 special case, greedy verification.

Vocabulary: the **accepted** tokens are the draft nodes on the walked path; the **bonus** token is the target's
draw at the node where the walk stops. WALK never produces a residual token.

Algorithm, for every batch row at once::

    y[v] ~ p(. | context, path(v))   for every node v            (uniform keyed by v's position; argmax at T = 0)
    v := root
    while v has a child c with token(c) == y[v]:  accept c; v := c
    bonus := y[v]

Worked example (one row): tree ``root(7) -> {a(3) -> c(9), b(5)}``; draws ``y = [3, 9, 1, 4]`` for nodes
``[root, a, b, c]``. ``y[root] = 3`` matches ``a``; ``y[a] = 9`` matches ``c``; ``c`` is a leaf, so the bonus is
``y[c] = 4``. Result: ``accepted_nodes = [0, 1, 3]``, ``num_accepted = 2``, ``bonus_token = 4``.

The draw at ``v`` uses the uniform of stream ``TARGET`` keyed by the request seed and the absolute position of
the token it predicts (:mod:`specframe.decode.noise`), the uniform plain decoding uses at that position. Nodes
at the same depth share it; the walk visits one node per depth.

Why it is exact: each emitted token is the draw ``F^{-1}(u_t)`` from the target conditional given exactly the
emitted prefix, with ``u_t`` the position's own uniform, and whether the walk continues is a function of that
draw and of a tree fixed before the draws. So the emitted tokens are those plain decoding emits for the same
seed (its law is the target's), for any tree built independently of the target's uniforms (deterministic top-K
trees and trees sampled from a draft law alike).
"""

from __future__ import annotations

import torch

from specframe.decode.noise import TARGET
from specframe.interfaces import RoundContext, Verifier
from specframe.sampling import sample
from specframe.tree import DraftTree
from specframe.types import VerifyResult
from specframe_verifiers.paths import AcceptedPath, child_with_token, gather_rows


class WalkVerifier(Verifier):
    """Follow the children that match independent target draws; emit the draw where the walk stops."""

    def draws(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> torch.Tensor:  # [B, N] int64
        """One target draw per node from the processed law (argmax at temperature 0), position-keyed."""
        u = None if ctx.sampling.greedy else ctx.noise.uniforms(TARGET, tree.depth)  # [B, N]
        return sample(logits, ctx.sampling, u)

    def next_child(self, tree: DraftTree, node: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:  # [B]
        """The child of ``node[b]`` to move to given the draw ``draw[b]``, or -1 to stop."""
        return child_with_token(tree, node, draw)

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        y = self.draws(tree, logits, ctx)  # [B, N]
        depth = tree.max_depth  # the round's one read of the tree (it sizes the path)
        path = AcceptedPath(tree, depth)
        active = torch.ones(tree.batch_size, dtype=torch.bool, device=y.device)  # [B] still walking
        # Every depth is stepped (stopped rows stay put): no per-depth read of `active` on the host.
        for _ in range(depth):
            node = path.current
            child = self.next_child(tree, node, gather_rows(y, node))
            moved = active & (child >= 0)
            path.advance(moved, child)
            active = moved
        return path.result(gather_rows(y, path.current))


class GreedyVerifier(WalkVerifier):
    """WALK with ``y[v] = argmax`` of the target's logits: exact at temperature 0 only.

    It ignores the sampling settings and never consumes randomness; at temperature 0 it returns exactly what
    :class:`WalkVerifier` returns.
    """

    def draws(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> torch.Tensor:  # [B, N] int64
        return logits.argmax(dim=-1)
