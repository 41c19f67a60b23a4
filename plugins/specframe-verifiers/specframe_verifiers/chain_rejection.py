"""Chain speculative sampling (docs/concepts/losslessness.md; Leviathan et al. 2023, Chen et al. 2023).

The tree must be a chain ``root -> d_1 -> ... -> d_n`` whose node ``d_k`` was sampled from the draft law
``q_k = tree.child_q[:, parent(d_k)]``. With ``p_k`` the target's processed law at ``parent(d_k)``::

    for k = 1..n:
        accept d_k with probability min(1, p_k(d_k) / q_k(d_k))            (rng.accept)
        on rejection: emit a residual token ~ normalize(max(p_k - q_k, 0))   (rng.residual) and stop
    if every draft was accepted: emit a bonus token ~ p_{n+1}                (rng.target)

Worked example (V = 2, one draft): ``q = [0.8, 0.2]``, ``p = [0.5, 0.5]``, draft ``d_1 = 0``. It is accepted
with probability ``0.5 / 0.8 = 0.625``; otherwise the residual ``max(p - q, 0) = [0, 0.3]`` normalises to
``[0, 1]`` and token 1 is emitted. Overall ``P(0) = 0.8 * 0.625 = 0.5`` and ``P(1) = 0.2 * 1 + 0.8 * 0.375 *
1 = 0.5``: exactly ``p``.

Why it is exact: one step emits ``x`` with probability ``min(p, q)(x) + (1 - sum min(p, q)) * r(x)`` where
``r = max(p - q, 0) / (1 - sum min(p, q))``; since ``p = min(p, q) + max(p - q, 0)`` this is ``p(x)``. After an
acceptance the next step starts from the target's law given the accepted token, so by induction the emitted
sequence has the target's law.
"""

from __future__ import annotations

import torch

from specframe.errors import ContractError
from specframe.interfaces import RoundContext, Verifier
from specframe.sampling import inverse_cdf, probs, uniforms
from specframe.tree import DraftTree
from specframe.types import VerifyResult
from specframe_verifiers.paths import AcceptedPath, child_at_rank, gather_rows, sibling_rank
from specframe_verifiers.rejection import accepts, common_dtype, require_child_q, residual_law


class ChainRejectionVerifier(Verifier):
    """Classic speculative sampling on a sampled chain; the methods below are its decision rules."""

    name = "chain_rejection"

    def accepts(self, u: torch.Tensor, p_tok: torch.Tensor, q_tok: torch.Tensor) -> torch.Tensor:  # [B]
        """Acceptance test, ``u * q < p`` (probability ``min(1, p / q)``)."""
        return accepts(u, p_tok, q_tok)

    def residual(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:  # [B, V]
        """Law of the token emitted after a rejection: ``normalize(max(p - q, 0))``."""
        return residual_law(p, q)

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        q_all = require_child_q(tree, self.name)  # [B, N, V]
        rank = sibling_rank(tree)  # [B, N]
        if bool((rank >= 1).any()):
            raise ContractError("verifier 'chain_rejection' got a tree in which a node has several children, "
                                "from a tree builder declared produces_tree=False", stage="tree_builder")
        p_all = probs(logits, ctx.sampling)  # [B, N, V]
        dtype = common_dtype(p_all, q_all)
        p_all, q_all = p_all.to(dtype), q_all.to(dtype)
        b, dev = tree.batch_size, logits.device
        path = AcceptedPath(tree)
        active = torch.ones(b, dtype=torch.bool, device=dev)  # [B] rows still verifying
        bonus = torch.zeros(b, dtype=torch.long, device=dev)  # [B]
        for _ in range(tree.max_depth + 1):
            node = path.current  # [B]
            child = child_at_rank(tree, rank, node, 0)  # [B], -1 at a leaf
            p, q = gather_rows(p_all, node), gather_rows(q_all, node)  # [B, V]
            token = torch.gather(tree.tokens, 1, child.clamp(min=0)[:, None])  # [B, 1]
            u_accept = uniforms((b,), ctx.rng.accept, dev)
            u_residual = uniforms((b,), ctx.rng.residual, dev)
            u_bonus = uniforms((b,), ctx.rng.target, dev)
            # Step 1: test the draft child against min(1, p / q).
            has_child = active & (child >= 0)
            accepted = has_child & self.accepts(u_accept, p.gather(1, token)[:, 0], q.gather(1, token)[:, 0])
            # Step 2: a rejection emits a residual token; a leaf emits a bonus token from p.
            rejected = has_child & ~accepted
            at_leaf = active & (child < 0)
            bonus = torch.where(rejected, inverse_cdf(self.residual(p, q), u_residual), bonus)
            bonus = torch.where(at_leaf, inverse_cdf(p, u_bonus), bonus)
            path.advance(accepted, child)
            active = accepted
            if not bool(active.any()):
                break
        return path.result(bonus)
