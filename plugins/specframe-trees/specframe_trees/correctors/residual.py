"""`ResidualCorrector`: the shared part of learned correctors that add a path-conditioned bias to base logits.

A learned head (Domino's GRU, DSpark's Markov head) scores the K candidates of slot ``depth - 1`` as
children of each frontier node::

    logit[b, m, c] = base[b, slot, c] + bias[b, m, c]        (no bias for slot < pure_prefix_len)

and normalises according to ``normalize``:

* ``candidates`` (DARTree): log-softmax over the K candidates of each parent. ``base`` is the proposal's
  candidate log-probs; their full-vocabulary normaliser is a per-slot constant, so it cancels.
* ``full_vocab``: log-softmax over the whole vocabulary of ``proposal.logits[:, slot] + bias``, then the
  candidates' entries are gathered. Needs ``proposal.logits`` and the bias over all ``V`` tokens.

``-inf`` base entries (masked vocabulary, padding) stay ``-inf``; a parent whose candidates are all
``-inf`` gets all ``-inf`` rather than NaN. Subclasses provide the bias and the per-node state.

Example (K = 2, candidates mode): base ``[-0.1, -2.3]``, bias ``[0.0, 1.0]`` -> logits ``[-0.1, -1.3]`` ->
log-probs ``[-0.26, -1.46]``.
"""

from __future__ import annotations

import weakref
from abc import abstractmethod
from collections.abc import Callable
from typing import Generic, Literal, TypeVar

import torch

from specframe.errors import ContractError, GenerationError
from specframe.interfaces import Corrector
from specframe.tree.ops import masked_log_softmax
from specframe.types import DraftProposal

Normalize = Literal["candidates", "full_vocab"]
T = TypeVar("T")


class ProposalCache(Generic[T]):
    """Holds a value computed from the most recent proposal (per-round tables), keyed by identity.

    Builders hand the same proposal object to every corrector call of a round, so the tables are built on
    the first call and reused. The proposal is referenced weakly: a finished round's tensors are freed.
    """

    def __init__(self, compute: Callable[[DraftProposal], T]) -> None:
        self._compute = compute
        self._owner: weakref.ref[DraftProposal] | None = None
        self._value: T | None = None

    def get(self, proposal: DraftProposal) -> T:
        if self._owner is None or self._owner() is not proposal:
            self._value = self._compute(proposal)
            self._owner = weakref.ref(proposal)
        return self._value  # type: ignore[return-value]


class ResidualCorrector(Corrector):
    """Base log-probs plus a learned bias; see the module docstring.

    Args:
        name: the component name, used in error messages.
        pure_prefix_len: leading slots that are not corrected (Domino 1, DSpark 0).
        normalize: ``"candidates"`` or ``"full_vocab"``.
        score_dtype: dtype of the returned log-probs (float32, or float64 for a float64 head).
    """

    def __init__(self, *, name: str, pure_prefix_len: int, normalize: Normalize,
                 score_dtype: torch.dtype) -> None:
        self.name = name
        self.pure_prefix_len = pure_prefix_len
        self.normalize = normalize
        self.score_dtype = score_dtype

    # ------------------------------------------------------------------------------ subclass API
    @abstractmethod
    def candidate_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M] frontier tokens
        state: torch.Tensor,  # [B, M, S] frontier states
    ) -> torch.Tensor:  # [B, M, K]
        """The bias for the slot's K candidates as children of each frontier node."""

    @abstractmethod
    def full_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, S]
    ) -> torch.Tensor:  # [B, M, V]
        """The bias over the whole vocabulary (``normalize: full_vocab``)."""

    # ------------------------------------------------------------------------------- Corrector
    def child_logprobs(
        self,
        proposal: DraftProposal,
        depth: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, S]
    ) -> torch.Tensor:  # [B, M, K]
        slot = depth - 1
        if not 0 <= slot < proposal.depth:
            raise ContractError(
                f"corrector '{self.name}' was asked for depth {depth}, but the proposal has {proposal.depth} "
                "(tree builders must clamp their max_depth to the proposal depth)", stage="tree_builder")
        b, m = tokens.shape
        k = proposal.num_candidates
        corrected = slot >= self.pure_prefix_len
        if self.normalize == "candidates":
            base = proposal.logprobs[:, slot].to(self.score_dtype)  # [B, K]
            if not corrected:
                return masked_log_softmax(base)[:, None, :].expand(b, m, k)
            bias = self.candidate_bias(proposal, slot, tokens, state).to(self.score_dtype)  # [B, M, K]
            return masked_log_softmax(base[:, None, :] + bias)
        logits = self.require_logits(proposal)[:, slot].to(self.score_dtype)  # [B, V]
        full = logits[:, None, :].expand(b, m, -1)  # [B, M, V]
        if corrected:
            full = full + self.full_bias(proposal, slot, tokens, state).to(self.score_dtype)
        index = proposal.tokens[:, slot, None, :].expand(b, m, k)  # [B, M, K]
        return masked_log_softmax(full).gather(-1, index)

    # --------------------------------------------------------------------------------- checks
    def require_features(self, proposal: DraftProposal, hidden_size: int) -> torch.Tensor:  # [B, L, H]
        """``proposal.features``, or a clear error when the drafter did not provide matching ones."""
        features = proposal.features
        if features is None:
            raise GenerationError(
                f"corrector '{self.name}' needs proposal.features (the drafter's per-depth hidden states), "
                "but the proposal has none",
                hint="use a drafter that emits features, or corrector type 'identity'",
            )
        if features.shape[-1] != hidden_size:
            raise GenerationError(
                f"corrector '{self.name}' expects features of width {hidden_size}, the proposal's are "
                f"{features.shape[-1]} wide",
                hint="set the corrector's hidden_size to the drafter's hidden size",
            )
        return features

    def require_logits(self, proposal: DraftProposal) -> torch.Tensor:  # [B, L, V]
        """``proposal.logits``, needed for full-vocabulary normalisation."""
        if proposal.logits is None:
            raise GenerationError(
                f"corrector '{self.name}' with normalize: full_vocab needs proposal.logits, but the "
                "drafter did not emit them",
                hint="use normalize: candidates, or a drafter that emits full logits",
            )
        return proposal.logits

    def check_vocab(self, proposal: DraftProposal, vocab_size: int) -> None:
        """Fail clearly when a token id does not fit the head's vocabulary: checked on the first proposal only
        (ids come from the drafter's fixed vocabulary, so one read per corrector, never one per round)."""
        if getattr(self, "_vocab_checked", False):
            return
        top = int(proposal.root.max().item())
        if proposal.tokens.numel() > 0:
            top = max(top, int(proposal.tokens.max().item()))
        if top >= vocab_size:
            raise GenerationError(
                f"corrector '{self.name}' has a vocabulary of {vocab_size}, but the proposal contains "
                f"token id {top}",
                hint="set the corrector's vocab_size to the target's vocabulary size",
            )
        self._vocab_checked = True
