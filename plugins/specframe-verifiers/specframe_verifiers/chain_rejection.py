"""Chain speculative sampling (docs/concepts/losslessness.md; Leviathan et al. 2023, Chen et al. 2023).

The tree must be a chain ``root -> d_1 -> ... -> d_n`` whose node ``d_k`` was sampled from the draft law
``q_k = tree.child_q[:, parent(d_k)]``. With ``p_k`` the target's processed law at ``parent(d_k)``::

    for k = 1..n:
        accept d_k with probability min(1, p_k(d_k) / q_k(d_k))            (stream ACCEPT)
        on rejection: emit a residual token ~ normalize(max(p_k - q_k, 0))   (stream RESIDUAL) and stop
    if every draft was accepted: emit a bonus token ~ p_{n+1}                (stream TARGET)

Worked example (V = 2, one draft): ``q = [0.8, 0.2]``, ``p = [0.5, 0.5]``, draft ``d_1 = 0``. It is accepted
with probability ``0.5 / 0.8 = 0.625``; otherwise the residual ``max(p - q, 0) = [0, 0.3]`` normalises to
``[0, 1]`` and token 1 is emitted. Overall ``P(0) = 0.8 * 0.625 = 0.5`` and ``P(1) = 0.2 * 1 + 0.8 * 0.375 *
1 = 0.5``: exactly ``p``.

It is the one-child case of recursive rejection over siblings (:mod:`specframe_verifiers.tree_rejection`),
and runs that code: with a single child per node, "try the next sibling" never happens.

Why it is exact: one step emits ``x`` with probability ``min(p, q)(x) + (1 - sum min(p, q)) * r(x)`` where
``r = max(p - q, 0) / (1 - sum min(p, q))``; since ``p = min(p, q) + max(p - q, 0)`` this is ``p(x)``. After an
acceptance the next step starts from the target's law given the accepted token, so by induction the emitted
sequence has the target's law.
"""

from __future__ import annotations

import torch

from specframe.errors import ContractError
from specframe.interfaces import RoundContext
from specframe.tree import DraftTree
from specframe.types import VerifyResult
from specframe_verifiers.tree_rejection import TreeRejectionVerifier


class ChainRejectionVerifier(TreeRejectionVerifier):
    """Classic speculative sampling: the one-child case of :class:`TreeRejectionVerifier` (same code, same
    decision rules), restricted to chains."""

    name = "chain_rejection"

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        bounded = tree.width_bound is not None and tree.width_bound <= 1  # a chain by construction: nothing to read
        if not bounded and bool((tree.sibling_rank() >= 1).any()):
            raise ContractError("verifier 'chain_rejection' got a tree in which a node has several children, "
                                "from a tree builder declared produces_tree=False", stage="tree_builder")
        return super().verify(tree, logits, ctx)
