"""`MarkovCorrector`: DSpark's Markov head (docs/concepts/correction-heads.md) behind the `Corrector` interface.

The bias of slot ``depth - 1`` for a frontier node depends on the node's own token ``x`` (the previous
token of its children; the root for depth 1) and, for the gated and rnn variants, on the slot's backbone
output ``h``. Slot 0 is corrected (``pure_prefix_len = 0``, DSpark's default).

Per-node state:

* vanilla, gated: none (``state_size = 0``); the path enters through the frontier token alone;
* rnn: ``[s ; W1[x]]`` (``2r``), the recurrent state and the node's own token embedding, so that
  ``advance`` (which sees the parent's state and the children's tokens) can compute
  ``s_child = g ⊙ s_parent + (1 - g) ⊙ tanh(cand)`` from ``[s_parent ; W1[x_parent] ; h_slot]``.
  The root's state is ``[0 ; W1[root]]``.

Only the K candidate rows of ``W2`` are gathered, once per round, for ``normalize: candidates``.

Example (vanilla, depth 2, frontier tokens ``[[5, 9]]``)::

    lp = corrector.child_logprobs(p, 2, torch.tensor([[5, 9]]), empty)   # [1, 2, K]
    # row 0 adds W2[cand] · W1[5], row 1 adds W2[cand] · W1[9], then log-softmax over the K candidates
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specframe.types import DraftProposal
from specframe_trees.correctors.residual import Normalize, ProposalCache, ResidualCorrector
from specframe_trees.heads.markov import MarkovHead


@dataclass
class _MarkovRound:
    """Per-round inputs: slot features (gated, rnn) and the candidates' rows of ``W2``."""

    features: torch.Tensor | None  # [B, L, H]
    w2_rows: torch.Tensor  # [B, L, K, r]


class MarkovCorrector(ResidualCorrector):
    """DSpark Markov correction; see the module docstring.

    Args:
        head: the Markov head (random or loaded from a checkpoint).
        pure_prefix_len: leading uncorrected slots (DSpark: 0).
        normalize: ``"candidates"`` or ``"full_vocab"``.
        name: component name for error messages.
    """

    def __init__(self, head: MarkovHead, *, pure_prefix_len: int = 0, normalize: Normalize = "candidates",
                 name: str = "dspark_markov") -> None:
        dtype = head.markov_w2.weight.dtype
        super().__init__(name=name, pure_prefix_len=pure_prefix_len, normalize=normalize,
                         score_dtype=torch.promote_types(dtype, torch.float32))
        self.head = head
        self.dtype = dtype
        self.rank = head.sizes.rank
        self.state_size = head.state_size
        self._round = ProposalCache(self._prepare)

    def _prepare(self, proposal: DraftProposal) -> _MarkovRound:
        self.check_vocab(proposal, self.head.sizes.vocab_size)
        features = None
        if self.head.variant != "vanilla":
            features = self.require_features(proposal, self.head.sizes.hidden_size).to(self.dtype)
        w2_rows = F.embedding(proposal.tokens, self.head.markov_w2.weight)  # [B, L, K, r]
        return _MarkovRound(features=features, w2_rows=w2_rows)

    def _slot_features(self, rnd: _MarkovRound, slot: int, m: int) -> torch.Tensor | None:  # [B, M, H]
        if rnd.features is None:
            return None
        return rnd.features[:, slot, None, :].expand(-1, m, -1)

    # ----------------------------------------------------------------------------------- state
    def init_state(self, proposal: DraftProposal) -> torch.Tensor:  # [B, 1, S]
        self._round.get(proposal)
        b = proposal.batch_size
        if self.head.variant != "rnn":
            return torch.zeros(b, 1, 0, dtype=self.dtype, device=proposal.root.device)
        root_embed = self.head.embed(proposal.root[:, None])  # [B, 1, r]
        return torch.cat([torch.zeros_like(root_embed), root_embed], dim=-1)

    def advance(
        self,
        proposal: DraftProposal,
        depth: int,
        state: torch.Tensor,  # [B, M, S] parents' states
        tokens: torch.Tensor,  # [B, M] children's tokens
    ) -> torch.Tensor:  # [B, M, S]
        if self.head.variant != "rnn":
            return state
        rnd = self._round.get(proposal)
        parent_s, parent_embed = state.split(self.rank, dim=-1)  # [B, M, r] each
        features = self._slot_features(rnd, depth - 1, tokens.shape[1])
        child_s = self.head.next_state(parent_embed, features, parent_s)
        return torch.cat([child_s, self.head.embed(tokens)], dim=-1)

    # ------------------------------------------------------------------------------------ bias
    def _bias_vector(self, proposal: DraftProposal, slot: int, tokens: torch.Tensor,
                     state: torch.Tensor) -> torch.Tensor:  # [B, M, r]
        rnd = self._round.get(proposal)
        prev_embed = self.head.embed(tokens)  # [B, M, r]
        recurrent = state[..., : self.rank] if self.head.variant == "rnn" else None
        return self.head.bias_vector(prev_embed, self._slot_features(rnd, slot, tokens.shape[1]), recurrent)

    def candidate_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, S]
    ) -> torch.Tensor:  # [B, M, K]
        u = self._bias_vector(proposal, slot, tokens, state)
        return self.head.candidate_bias(u, self._round.get(proposal).w2_rows[:, slot])

    def full_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, S]
    ) -> torch.Tensor:  # [B, M, V]
        return self.head.full_bias(self._bias_vector(proposal, slot, tokens, state))
