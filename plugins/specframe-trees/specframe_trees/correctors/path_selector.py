"""`PathSelectorCorrector`: DFlash2's path selector (:mod:`specframe_trees.heads.path_selector`) as a `Corrector`.

The children of a frontier node ``a`` at depth ``d`` are slot ``t = d - 1``'s candidates ``b``, scored::

    logit[b | a] = U_t(b) + < A[a] ⊙ H h_t , B[b] >          (a = the root for depth 1)

``U_t`` is the proposal's base log-prob (the drafter's unary logit minus a per-slot constant, which cancels in the
softmax over the candidates) and ``h_t = proposal.features[:, t]``. Only the first ``top_k`` candidates of every
slot (the proposal sorts them best first) are scored, as DFlash2 scores the drafter's top-16; the others get
``-inf``. Every slot is corrected (``pure_prefix_len = 0``), and the state is empty: the path enters through the
frontier token alone, so a depth-wise builder scores M frontier nodes with one ``[M x r] @ [r x K]`` product.

How the stage is walked (chosen where DFlash2 leaves it to the engine):

* greedy (temperature 0): the ``chain`` builder takes the argmax at every depth, DFlash2's greedy walk;
* temperature > 0: the ``sampled_chain`` builder draws each depth from ``q = softmax(logit / T)`` over the K
  candidates and records ``q`` (``DraftTree.child_q``), so ``chain_rejection`` verifies losslessly. DFlash2's
  reference draws by inverse CDF; specframe draws the same law with the request's keyed noise (Gumbel-max),
  which is an exact draw from the same ``q``: the sampled-law tests check the law, not the mechanism.
* any depth-wise tree builder (``dartree``, ``heap_sequential``, ``chain_then_heap``) uses the same per-parent
  law; DFlash2 itself only walks one path.

Example (K = 2, top_k = 2, depth 2, frontier tokens ``[[5, 9]]``)::

    lp = corrector.child_logprobs(p, 2, torch.tensor([[5, 9]]), empty)   # [1, 2, 2]
    # row 0: log_softmax(U_1 + B[cands] @ (A[5] * H h_1)), row 1: the same with A[9]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specframe.tree.ops import NEG_INF, masked_log_softmax
from specframe.types import DraftProposal
from specframe_trees.correctors.residual import Normalize, ProposalCache, ResidualCorrector
from specframe_trees.heads.path_selector import PathSelectorHead


@dataclass
class _SelectorRound:
    """Per-round inputs: the slots' hidden states in the head's dtype."""

    features: torch.Tensor  # [B, L, D]


class PathSelectorCorrector(ResidualCorrector):
    """DFlash2's path selector; see the module docstring.

    Args:
        head: the path selector (random or loaded from a checkpoint).
        top_k: candidates scored per slot (the first ``top_k`` of the proposal's); None: all of them.
        normalize: ``"candidates"`` (DFlash2's law over the K candidates) or ``"full_vocab"``.
        name: component name for error messages.
    """

    def __init__(self, head: PathSelectorHead, *, top_k: int | None = None, normalize: Normalize = "candidates",
                 name: str = "path_selector") -> None:
        dtype = head.successor_codebook.dtype
        super().__init__(name=name, pure_prefix_len=0, normalize=normalize,
                         score_dtype=torch.promote_types(dtype, torch.float32))
        self.head = head
        self.dtype = dtype
        self.top_k = top_k
        self._round = ProposalCache(self._prepare)

    def _prepare(self, proposal: DraftProposal) -> _SelectorRound:
        self.check_vocab(proposal, self.head.sizes.vocab_size)
        features = self.require_features(proposal, self.head.sizes.hidden_size).to(self.dtype)
        return _SelectorRound(features=features)

    def init_state(self, proposal: DraftProposal) -> torch.Tensor:  # [B, 1, 0]
        self._round.get(proposal)  # validate the round's inputs once
        return torch.zeros(proposal.batch_size, 1, 0, dtype=self.dtype, device=proposal.root.device)

    def _context(self, proposal: DraftProposal, slot: int, tokens: torch.Tensor) -> torch.Tensor:  # [B, M, r]
        features = self._round.get(proposal).features[:, slot, None, :]  # [B, 1, D]
        return self.head.context(tokens.long(), features.expand(-1, tokens.shape[1], -1))

    # ------------------------------------------------------------------------------------ bias
    def candidate_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M] predecessors
        state: torch.Tensor,  # [B, M, 0]
    ) -> torch.Tensor:  # [B, M, K]
        return self.head.candidate_scores(self._context(proposal, slot, tokens), proposal.tokens[:, slot])

    def full_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, 0]
    ) -> torch.Tensor:  # [B, M, V]
        return self.head.full_scores(self._context(proposal, slot, tokens))

    # ------------------------------------------------------------------------------- Corrector
    def child_logprobs(
        self,
        proposal: DraftProposal,
        depth: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, 0]
    ) -> torch.Tensor:  # [B, M, K]
        scores = super().child_logprobs(proposal, depth, tokens, state)
        if self.top_k is None or self.top_k >= proposal.num_candidates:
            return scores
        scores = scores.clone()
        scores[..., self.top_k :] = NEG_INF  # only the drafter's top_k candidates are in the selector's lattice
        return masked_log_softmax(scores) if self.normalize == "candidates" else scores
