"""Multi-draft recursive rejection sampling for trees sampled without replacement (docs/concepts/losslessness.md).

Setting: the children ``c_1..c_n`` of every node ``v`` were drawn *without replacement* from the draft law
``q = tree.child_q[:, v]`` in child-index order (Gumbel-top-k, as the sampled builders do): ``c_1 ~ q``,
``c_2 ~ q`` with ``c_1`` removed and renormalised, and so on. With ``p`` the target's processed law at ``v``::

    p_1 = p; q_1 = q
    for j = 1..n:
        accept c_j with probability min(1, p_j(c_j) / q_j(c_j))        (stream ACCEPT, keyed v, j) -> descend
        else: p_{j+1} = normalize(max(p_j - q_j, 0))
              q_{j+1} = q_j with c_j removed, renormalised
    if every child was rejected: emit a residual token ~ p_{n+1}       (stream RESIDUAL, keyed v)
    at a leaf (no children): emit a bonus token ~ p                      (stream TARGET)

The laws arrive at their own size (``tree.child_ids`` / ``child_probs`` ``[B, N, K]``, q zero off the K
candidates); at each step the node's ``q`` is laid over the vocabulary on the fly (``[B, V]``, next to ``p``,
which is vocabulary-sized anyway), so the residual ``max(p - q, 0)`` never needs a stored ``[B, N, V]`` law.

Every uniform is keyed by the request seed, the stream, the absolute position of the token decided at ``v``
and the keys named (:mod:`specframe.sampling.noise`), so the draws at different nodes, tries and streams are
independent, and a seed reproduces a round whose tree has the same shape.

Worked example (V = 3): ``p = [0.2, 0.5, 0.3]``, ``q = [0.6, 0.3, 0.1]``, children ``c_1 = 0``, ``c_2 = 1``.
``c_1`` is accepted w.p. ``0.2 / 0.6``; on rejection ``p_2 = [0, 0.2, 0.2] / 0.4 = [0, 0.5, 0.5]`` and
``q_2 = [0, 0.75, 0.25]``; ``c_2`` is accepted w.p. ``0.5 / 0.75``; on rejection ``p_3 = [0, 0, 0.25] / 0.25 =
[0, 0, 1]`` and token 2 is emitted.

Proof sketch. Claim: given the history up to try ``j`` (earlier children, coins), the token emitted at ``v``
has law ``p_j``. For ``j = n + 1`` the residual is drawn from ``p_{n+1}`` directly. For ``j <= n``, given the
history ``c_j ~ q_j`` (sampling without replacement), so the token is ``x`` with probability
``min(p_j, q_j)(x)`` by acceptance plus ``(1 - sum min(p_j, q_j)) * p_{j+1}(x)`` by rejection, because
``p_{j+1}`` depends on ``q_j`` only, not on which ``c_j`` was rejected, and by the claim for ``j + 1``. As
``max(p_j - q_j, 0) = p_j - min(p_j, q_j)`` has mass ``1 - sum min(p_j, q_j)``, the sum is ``p_j(x)``. A
rejected ``c_j`` has ``p_j(c_j) < q_j(c_j)``, so ``p_{j+1}(c_j) = 0``: the residual never re-emits a tried
token, and the ``q_{j+1}`` that ``c_{j+1}`` comes from excludes it too. At ``j = 1`` the token has law ``p``.
After accepting ``c``, the subtree under ``c`` was sampled with draft randomness independent of the coins at
``v``, so the argument repeats at ``c`` with the target's law given the accepted prefix; by induction the
emitted sequence has the target's law. With one child per node this is chain speculative sampling.

The argument needs each node's kept children to be the first ones drawn *whatever their tokens*: which and how
many children a node keeps may depend on the depth, the sibling rank and the history, never on the drawn tokens
(`budget: auto` follows that rule for this verifier; `specframe.cost.acceptance`).

Requirement on pruners: removing a sibling from the middle of a child list breaks "``c_{j+1} ~ q_{j+1}``";
keeping a prefix of each child list (or dropping whole subtrees) is safe.
"""

from __future__ import annotations

import torch

from specframe.interfaces import RoundContext, Verifier
from specframe.sampling import inverse_cdf, probs
from specframe.sampling.noise import ACCEPT, RESIDUAL, TARGET
from specframe.tree import DraftTree
from specframe.types import VerifyResult
from specframe_verifiers.paths import AcceptedPath, child_at_rank, gather_rows
from specframe_verifiers.rejection import accepts, common_dtype, dense_law, require_child_law, residual_law


class TreeRejectionVerifier(Verifier):
    """Recursive rejection over without-replacement siblings; the methods below are its decision rules."""

    name = "tree_rejection"

    def accepts(self, u: torch.Tensor, p_tok: torch.Tensor, q_tok: torch.Tensor) -> torch.Tensor:  # [B]
        """Acceptance test, ``u * q < p`` (probability ``min(1, p / q)``)."""
        return accepts(u, p_tok, q_tok)

    def residual(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:  # [B, V]
        """Target law for the next sibling after a rejection: ``normalize(max(p - q, 0))``."""
        return residual_law(p, q)

    def drop_tried(self, q: torch.Tensor, token: torch.Tensor) -> torch.Tensor:  # [B, V]
        """The draft law of the next sibling: ``q`` without ``token`` (``[B, 1]``), renormalised."""
        q = q.scatter(1, token, 0.0)
        mass = q.sum(dim=1, keepdim=True)
        return torch.where(mass > 0, q / mass.clamp(min=torch.finfo(q.dtype).tiny), q)

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        ids_all, q_all = require_child_law(tree, self.name)  # [B, N, K] candidates, their draft probabilities
        p_all = probs(logits, ctx.sampling)  # [B, N, V]
        dtype = common_dtype(p_all, q_all)
        p_all, q_all = p_all.to(dtype), q_all.to(dtype)
        rank = tree.sibling_rank()  # [B, N]
        # Loop bounds from the builder's host-side bounds (no read); every iteration runs, finished rows stay put.
        depth_limit, width = tree.depth_limit(), tree.width_limit()
        b, dev = tree.batch_size, logits.device
        path = AcceptedPath(tree, depth_limit)
        active = torch.ones(b, dtype=torch.bool, device=dev)  # [B] rows still verifying
        bonus = torch.zeros(b, dtype=torch.long, device=dev)  # [B]
        for _ in range(depth_limit + 1):
            node = path.current  # [B]
            depth = gather_rows(tree.depth, node)  # [B]
            p = gather_rows(p_all, node)  # [B, V] p_j
            q = dense_law(p, gather_rows(ids_all, node), gather_rows(q_all, node))  # [B, V] q_j, from [B, K]
            chosen = torch.full((b,), -1, dtype=torch.long, device=dev)  # [B] accepted child
            rejected_any = torch.zeros(b, dtype=torch.bool, device=dev)  # [B] p is a residual
            # Step 1: try the children in sampling order until one is accepted.
            for j in range(width):
                child = child_at_rank(tree, rank, node, j)  # [B]
                trying = active & (chosen < 0) & (child >= 0)
                token = torch.gather(tree.tokens, 1, child.clamp(min=0)[:, None])  # [B, 1]
                u_accept = ctx.noise.uniforms(ACCEPT, depth, node, j).to(dev)  # [B]
                accepted = trying & self.accepts(u_accept, p.gather(1, token)[:, 0], q.gather(1, token)[:, 0])
                chosen = torch.where(accepted, child, chosen)
                # Step 2: after a rejection, p_{j+1} = residual(p_j, q_j) and q_{j+1} = q_j without c_j.
                rejected = (trying & ~accepted)[:, None]
                p = torch.where(rejected, self.residual(p, q), p)
                q = torch.where(rejected, self.drop_tried(q, token), q)
                rejected_any |= rejected[:, 0]
            # Step 3: rows that accepted nothing stop here with a residual (or, at a leaf, a bonus) token.
            moved = active & (chosen >= 0)
            stopped = active & ~moved
            u_residual = ctx.noise.uniforms(RESIDUAL, depth, node).to(dev)  # [B]
            u_bonus = ctx.noise.uniforms(TARGET, depth).to(dev)  # [B]
            emitted = inverse_cdf(p, torch.where(rejected_any, u_residual, u_bonus))
            bonus = torch.where(stopped, emitted, bonus)
            path.advance(moved, chosen)
            active = moved
        return path.result(bonus)
