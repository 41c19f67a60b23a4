"""`LatticeCorrector`: LiLiCorr's candidate-lattice reranker (:mod:`specframe_trees.heads.lattice`) as a `Corrector`.

Once per round (the first call on a proposal) the head scores the lattice of the first ``k`` candidates of every
slot: ``start [B, k]`` and ``pair [B, L - 1, k, k]``. The children of a frontier node at depth ``d`` are then::

    depth 1:  log_softmax(start)                        (the root's children; the anchor is the root)
    depth d:  log_softmax(pair[d - 2, i, :])            i = the node's index among slot d - 2's candidates

so the law depends on the parent (path-dependent) but needs no per-node state. The anchor the start factors are
read against is the checkpoint's (``anchor``): ``target_row``, LiLiCorr's own, is the drafter's projected context
row just before the block (``proposal.extras["context_row"]`` ``[B, D]``, which specframe's block drafters emit);
``root_embedding``, specframe's variant, is the target embedding of the root. Candidates past ``k`` and dead
candidates get ``-inf``; a frontier token that is not one of the previous slot's first ``k`` candidates is not a
lattice node and gets no children (all ``-inf``). A proposal cut to fewer depths (a builder's ``max_depth``) is
scored as the shorter lattice.

Host reads: none per round. Scoring runs on the device; the token ids are checked against the embedding table on
the first proposal only (they come from the drafter's fixed vocabulary), so a round keeps its one read, the
outcome (:mod:`specframe.decode.rounds`).

Walks: the ``chain`` builder's argmax walk is LiLiCorr's greedy walk (left to right); at temperature > 0 the
``sampled_chain`` builder draws each depth from the softmax of these scores and records it, for
``chain_rejection`` (the public serving code uses the engine's rejection sampler the same way). Depth-wise tree
builders (``dartree``) rank the lattice's paths by the sum of these log-probs.

Example (k = 2, depth 2, frontier tokens ``[[c0, c1]]``, the two candidates of slot 0)::

    lp = corrector.child_logprobs(p, 2, torch.tensor([[c0, c1]]), empty)   # [1, 2, K]
    # row 0 = log_softmax(pair[0, 0, :]), row 1 = log_softmax(pair[0, 1, :]), then -inf past k
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specframe.errors import ContractError, GenerationError
from specframe.interfaces import Corrector
from specframe.tree.ops import NEG_INF, masked_log_softmax
from specframe.types import DraftProposal
from specframe_trees.correctors.residual import ProposalCache
from specframe_trees.heads.lattice import LatticeHead, LatticeScores

#: What the start factors are read against: the drafter's projected context row (LiLiCorr) or the root's embedding.
ANCHORS = ("target_row", "root_embedding")


class LatticeCorrector(Corrector):
    """LiLiCorr's reranker; see the module docstring.

    Args:
        head: the lattice head (random or loaded from a checkpoint).
        embed_weight: ``[V, D]`` the target's token-embedding table (not owned, not copied).
        top_k: candidates per slot in the lattice; None: the head's ``candidate_topk``.
        name: component name for error messages.
        anchor: ``target_row`` (LiLiCorr's: the drafter's projected context row before the block, read from
            ``proposal.extras["context_row"]``) or ``root_embedding`` (the root token's target embedding).
    """

    def __init__(self, head: LatticeHead, embed_weight: torch.Tensor, *, top_k: int | None = None,
                 name: str = "lilicorr", anchor: str = "root_embedding") -> None:
        sizes = head.sizes
        if embed_weight.dim() != 2 or embed_weight.shape[1] != sizes.model_hidden_size:
            raise GenerationError(f"corrector '{name}': the token-embedding table has shape "
                                  f"{tuple(embed_weight.shape)}, the head expects width {sizes.model_hidden_size}",
                                  hint="the head's checkpoint must belong to this target")
        if top_k is not None and not 1 <= top_k <= sizes.candidate_topk:
            raise GenerationError(f"corrector '{name}': top_k {top_k} is outside 1..{sizes.candidate_topk}, the "
                                  "candidates per slot the head was trained on",
                                  hint=f"use at most {sizes.candidate_topk} (or leave top_k unset)")
        if anchor not in ANCHORS:
            raise GenerationError(f"corrector '{name}': unknown anchor {anchor!r}",
                                  hint=f"anchors: {', '.join(ANCHORS)}")
        self.head = head
        self.embed_weight = embed_weight  # [V, D]
        self.top_k = top_k or sizes.candidate_topk
        self.name = name
        self.anchor = anchor
        self.state_size = 0
        self._round = ProposalCache(self._score)
        self._vocab_checked = False  # the first proposal's token ids were checked against the embedding table

    def _score(self, proposal: DraftProposal) -> LatticeScores:
        sizes = self.head.sizes
        if proposal.depth > sizes.num_slots:
            raise GenerationError(f"corrector '{self.name}' scores lattices of at most {sizes.num_slots} slots, the "
                                  f"proposal has {proposal.depth} depths",
                                  hint="use the head trained with this drafter (same block size)")
        features = proposal.features
        if features is None or features.shape[-1] != sizes.model_hidden_size:
            have = None if features is None else features.shape[-1]
            raise GenerationError(f"corrector '{self.name}' needs proposal.features of width "
                                  f"{sizes.model_hidden_size} (the drafter's hidden states), got {have}",
                                  hint="use a block drafter that emits features, trained with this head")
        self._check_vocab(proposal)
        k = min(self.top_k, proposal.num_candidates)
        cands = proposal.tokens[:, :, :k]  # [B, L, k]
        with torch.inference_mode():
            return self.head(F.embedding(cands, self.embed_weight), proposal.logprobs[:, :, :k], features,
                             self._anchor(proposal))

    def _anchor(self, proposal: DraftProposal) -> torch.Tensor:  # [B, D]
        """The vector the start factors are read against (see the module docstring)."""
        if self.anchor == "root_embedding":
            return F.embedding(proposal.root.long(), self.embed_weight)
        row = proposal.extras.get("context_row")
        width = self.head.sizes.model_hidden_size
        if row is None or tuple(row.shape) != (proposal.batch_size, width):
            have = None if row is None else tuple(row.shape)
            raise GenerationError(f"corrector '{self.name}' anchors on the drafter's projected context row "
                                  f"(proposal.extras['context_row'] of shape [{proposal.batch_size}, {width}]), "
                                  f"got {have}", hint="use a block drafter (dflash, domino, dspark), which emits "
                                                      "it, or a head trained with lilicorr_anchor: root_embedding")
        return row

    def _check_vocab(self, proposal: DraftProposal) -> None:
        """Fail clearly when a token id does not fit the embedding table. Ids come from the drafter's fixed
        vocabulary, so the first proposal is checked (one read per corrector) and later rounds read nothing."""
        if self._vocab_checked:
            return
        vocab = self.embed_weight.shape[0]
        top = max(int(proposal.root.max()), int(proposal.tokens.max()) if proposal.tokens.numel() else 0)
        if top >= vocab:
            raise GenerationError(f"corrector '{self.name}' embeds tokens of a vocabulary of {vocab}, the proposal "
                                  f"holds token id {top}", hint="the head must belong to the drafter's target")
        self._vocab_checked = True

    def child_logprobs(
        self,
        proposal: DraftProposal,
        depth: int,
        tokens: torch.Tensor,  # [B, M] frontier tokens (depth - 1)
        state: torch.Tensor,  # [B, M, 0]
    ) -> torch.Tensor:  # [B, M, K]
        slot = depth - 1
        if not 0 <= slot < proposal.depth:
            raise ContractError(f"corrector '{self.name}' was asked for depth {depth}, but the proposal has "
                                f"{proposal.depth}", stage="tree_builder")
        scores = self._round.get(proposal)
        b, m = tokens.shape
        kk = scores.start.shape[-1]
        if slot == 0:
            logits = scores.start[:, None, :].expand(b, m, kk)  # [B, M, k]
        else:
            prev = proposal.tokens[:, slot - 1, :kk]  # [B, k] the previous slot's lattice nodes
            match = prev[:, None, :] == tokens.long()[:, :, None]  # [B, M, k]
            index = match.long().argmax(dim=-1)  # [B, M] first match
            rows = scores.pair[:, slot - 1].gather(1, index[:, :, None].expand(b, m, kk))  # [B, M, k]
            logits = torch.where(match.any(dim=-1, keepdim=True), rows, torch.full_like(rows, NEG_INF))
        dead = ~torch.isfinite(proposal.logprobs[:, slot, :kk])  # [B, k]
        logits = logits.masked_fill(dead[:, None, :], NEG_INF)
        lp = masked_log_softmax(logits.double()).to(torch.float32)
        if kk < proposal.num_candidates:  # candidates past the lattice are never children
            lp = F.pad(lp, (0, proposal.num_candidates - kk), value=NEG_INF)
        return lp
