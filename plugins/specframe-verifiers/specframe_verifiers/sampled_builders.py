"""Sampled tree builders: `sampled_chain` and `sampled_tree`, whose children are draws from a recorded draft law.

At depth ``d`` every frontier node asks the corrector for the log-probs of the depth's K candidates as its
children (a token listed twice counts once, with its larger log-prob). Processed by :mod:`specframe.sampling`
with the round's sampling settings over the candidates, they give the draft law ``q`` of that node's children,
zero off the candidates: the law of processing a ``[V]`` vector that is ``-inf`` off the candidates
(temperature, top-k and top-p only see finite entries), with exact ties broken by candidate order instead of
token id. The children are ``branching[d - 1]`` draws without replacement from exactly that law (Gumbel-top-k on
noise of stream ``DRAFT`` keyed by the request seed, the position of the children and the parent node, so
siblings of different parents are drawn independently), in child-index order. The law is recorded at its own
size (``DraftTree.child_ids`` / ``child_probs`` ``[B, N, K]``), so the builder does no work of the vocabulary's
size.
Fewer children are drawn where ``q`` has a smaller support (for example one at temperature 0).

Layout: breadth first, children of one parent contiguous and in draw order. When the tree exceeds the round's
budget, only the first ``budget`` nodes in that order are kept, which keeps a prefix of every child list (the
condition the ``tree_rejection`` verifier needs). ``logq`` is ``log q(token)`` under the parent's full law and
``score`` its sum along the path.

Worked example: ``branching = [2, 1]``, V = 4. The root's law ``q_0 = [0.5, 0.3, 0.2, 0]`` yields children
``(1, 0)``; each child gets its own law from the corrector and one child, e.g. node 1 (token 1) ``-> 3``, node 2
(token 0) ``-> 2``: ``tokens = [root, 1, 0, 3, 2]``, ``parent = [-1, 0, 0, 1, 2]``.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator

from specframe.config.base import ComponentConfig
from specframe.config.bounds import MAX_DRAFT_DEPTH, MAX_TREE_NODES, StageShape, capped_min, tree_nodes
from specframe.errors import ConfigError, GenerationError
from specframe.interfaces import Corrector, RoundContext, TreeBuilder
from specframe.sampling import processed_logprobs, sample_without_replacement
from specframe.sampling.noise import DRAFT
from specframe.tree import DraftTree
from specframe.types import DraftProposal


class SampledChainConfig(ComponentConfig):
    """A chain of drafts, each sampled from the corrected draft law of its parent."""

    type: Literal["sampled_chain"] = "sampled_chain"
    depth: int | None = Field(None, ge=1, le=MAX_DRAFT_DEPTH,
                              description="draft depth; default: every depth the drafter proposes")

    def output_shape(self, upstream: StageShape) -> StageShape:
        depth = capped_min(upstream.depth, self.depth)
        return StageShape(depth, 1, depth)


class SampledTreeConfig(ComponentConfig):
    """A tree whose node at depth d - 1 gets branching[d - 1] children sampled without replacement."""

    type: Literal["sampled_tree"] = "sampled_tree"
    branching: tuple[int, ...] = Field((3, 2, 1), description="children per node at each depth, e.g. [3, 2, 1]")

    @field_validator("branching")
    @classmethod
    def _positive(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(b < 1 for b in value):
            raise ValueError(f"branching must be a non-empty list of positive counts, got {list(value)}")
        if len(value) > MAX_DRAFT_DEPTH or tree_nodes(len(value), list(value)) > MAX_TREE_NODES:  # type: ignore[operator]
            raise ValueError(f"branching {list(value)} makes trees of more than {MAX_TREE_NODES} nodes, the most "
                             "one target forward verifies; use fewer children or depths")
        return value

    def output_shape(self, upstream: StageShape) -> StageShape:
        depth = min(upstream.depth if upstream.depth is not None else len(self.branching), len(self.branching))
        return StageShape(depth, max(self.branching), tree_nodes(depth, list(self.branching)))


class SampledTreeBuilder(TreeBuilder):
    """Draws each node's children without replacement from its processed, corrected draft law.

    Args:
        branching: children per node at depths ``1..L``; None means a chain over every proposed depth.
        vocab_size: the target's vocabulary (the length of ``q``); when None, ``proposal.logits`` gives it.
        config_field: the config field named in errors about the depth count.
    """

    def __init__(self, branching: tuple[int, ...] | None, vocab_size: int | None = None,
                 config_field: str = "tree_builder.branching") -> None:
        self.branching = branching
        self.vocab_size = vocab_size
        self.config_field = config_field

    def _vocab_size(self, proposal: DraftProposal) -> int:
        if self.vocab_size is not None:
            return self.vocab_size
        if proposal.logits is not None:
            return int(proposal.logits.shape[-1])
        raise GenerationError(
            "a sampled tree builder needs the vocabulary size to form the draft law q",
            hint="build the pipeline with its target (BuildContext.target) or use a drafter that emits logits",
        )

    def _branching(self, proposal: DraftProposal) -> tuple[int, ...]:
        branching = self.branching or (1,) * proposal.depth
        if len(branching) > proposal.depth:
            raise ConfigError(
                f"{len(branching)} depths requested but the drafter proposes only {proposal.depth}",
                where=self.config_field, hint=f"use at most {proposal.depth} depths",
            )
        return branching

    def build(self, proposal: DraftProposal, corrector: Corrector, ctx: RoundContext) -> DraftTree:
        branching = self._branching(proposal)
        v = self._vocab_size(proposal)
        b, dev = proposal.batch_size, proposal.tokens.device
        # Level 0 is the root; each level holds [B, M] nodes, M = prod(branching[:d]).
        tokens = [proposal.root.long()[:, None]]  # per level [B, M] int64
        parents = [torch.full((b, 1), -1, dtype=torch.long, device=dev)]  # per level [B, M]
        logq = [torch.zeros(b, 1, device=dev)]  # per level [B, M]
        alive = [torch.ones(b, 1, dtype=torch.bool, device=dev)]  # per level [B, M]
        laws: list[torch.Tensor] = []  # per level [B, M, K], q at that level's children's candidates
        law_ids: list[torch.Tensor] = []  # per level [B, M, K], the candidates
        state = corrector.init_state(proposal)  # [B, 1, S]
        offset = 0  # node index of the current level's first node
        for d, n in enumerate(branching, start=1):
            m = tokens[-1].shape[1]
            # Step 1: the corrected log-probs of every frontier node's K candidates, a repeated token once.
            cand_lp = corrector.child_logprobs(proposal, d, tokens[-1], state)  # [B, M, K]
            cand = proposal.tokens[:, d - 1][:, None, :].expand(-1, m, -1)  # [B, M, K]
            lp = once(cand, cand_lp)  # [B, M, K]
            # Step 2: q = the processed law over the candidates (zero off them; none at a dead depth). The
            # children are drawn from exactly this law, and it is recorded at its own size.
            has_law = torch.isfinite(lp).any(dim=-1, keepdim=True)  # [B, M, 1]
            q = torch.where(has_law, processed_logprobs(lp, ctx.sampling).exp(), 0.0)  # [B, M, K]
            laws.append(q)
            law_ids.append(cand)
            node = offset + torch.arange(m, device=dev)[None, :].expand(b, m)  # [B, M] frontier node indices
            # Gumbel-top-n among the K candidates (q is zero elsewhere): the draws a vocabulary-wide
            # Gumbel-top-n with the same token-keyed noise makes, at K hashes per node instead of V.
            gumbel = ctx.noise.gumbel(DRAFT, torch.full_like(node, d - 1), node, cand)  # [B, M, K]
            drawn, ok = sample_without_replacement(q.log(), n, gumbel)  # [B, M, n] candidate positions
            picks = cand.gather(2, drawn)  # [B, M, n] token ids
            # Step 3: append the level, children of one parent contiguous, in draw order.
            tokens.append(picks.reshape(b, m * n))
            parents.append((offset + torch.arange(m, device=dev)).repeat_interleave(n)[None, :].expand(b, -1))
            logq.append(q.gather(2, drawn).log().reshape(b, m * n).float())
            # A frontier node none of whose candidates is live (a dead depth) has no children, at any temperature.
            alive.append((alive[-1][:, :, None] & ok & has_law).reshape(b, m * n))
            state = corrector.advance(proposal, d, state.repeat_interleave(n, dim=1), tokens[-1])
            offset += m
        m_last, k = tokens[-1].shape[1], proposal.num_candidates
        laws.append(torch.zeros(b, m_last, k, dtype=laws[-1].dtype if laws else torch.float32, device=dev))
        law_ids.append(torch.zeros(b, m_last, k, dtype=torch.long, device=dev))  # leaves draw nothing
        return self._assemble(tokens, parents, logq, alive, (law_ids, laws, v), ctx.budget,
                              max(branching, default=0))

    @staticmethod
    def _assemble(tokens: list[torch.Tensor], parents: list[torch.Tensor], logq: list[torch.Tensor],
                  alive: list[torch.Tensor], laws: tuple[list[torch.Tensor], list[torch.Tensor], int], budget: int,
                  width: int) -> DraftTree:
        """Concatenate the levels and keep the live nodes, the first ``budget`` of them in breadth-first order."""
        tok = torch.cat(tokens, dim=1)  # [B, N]
        par = torch.cat(parents, dim=1)  # [B, N]
        lq = torch.cat(logq, dim=1)  # [B, N]
        live = torch.cat(alive, dim=1)  # [B, N]
        depth = torch.cat([torch.full_like(t, d) for d, t in enumerate(tokens)], dim=1)  # [B, N]
        score = lq.clone()
        for i in range(1, tok.shape[1]):  # parents precede children
            score[:, i] = score.gather(1, par[:, i : i + 1].clamp(min=0))[:, 0] + lq[:, i]
        raw = DraftTree(tokens=tok, parent=par, depth=depth, logq=lq, score=score,
                        valid=torch.ones_like(live), child_ids=torch.cat(laws[0], dim=1),
                        child_probs=torch.cat(laws[1], dim=1), child_vocab=laws[2], depth_bound=len(tokens) - 1,
                        width_bound=width)
        order = torch.cumsum(live.long(), dim=1) - 1  # [B, N] breadth-first index among live nodes
        # At most budget + 1 nodes per row are kept: the capacity is known without reading the device.
        return raw.subtree(live & (order <= budget), capacity=min(int(tok.shape[1]), budget + 1))


def once(cand: torch.Tensor, lp: torch.Tensor) -> torch.Tensor:  # [..., K]
    """``lp`` with each token counted once: at its first place among the candidates, with the largest log-prob
    it is listed with, and ``-inf`` at its later places. Example: tokens ``[5, 2, 5]``, log-probs ``[-2, -1, -0.5]``
    give ``[-0.5, -1, -inf]``."""
    same = cand[..., :, None] == cand[..., None, :]  # [..., K, K]
    best = torch.where(same, lp[..., None, :], torch.full_like(lp[..., None, :], float("-inf"))).amax(dim=-1)
    return best.masked_fill(repeated(cand), float("-inf"))


def repeated(cand: torch.Tensor) -> torch.Tensor:  # [..., K] bool
    """Candidates whose token already appears earlier in their row (a token is drawn at most once)."""
    k = cand.shape[-1]
    earlier = torch.ones(k, k, dtype=torch.bool, device=cand.device).tril(-1)  # [i, j]: j < i
    return ((cand[..., :, None] == cand[..., None, :]) & earlier).any(dim=-1)
