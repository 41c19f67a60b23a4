"""`GRUCorrector`: Domino's GRU head (docs/concepts/correction-heads.md) behind the `Corrector` interface.

Per-node state is the GRU hidden state ``s`` (``G`` floats):

* ``init_state``: one GRU step from zero on the root's embedding (``s_0``);
* ``child_logprobs(depth)``: slot ``depth - 1`` scores its K candidates for every frontier node with
  ``base + W2[cand] · SiLU(W_z z_slot + W_s s)`` (slot 0 stays uncorrected when ``pure_prefix_len = 1``);
* ``advance(depth)``: the kept children's states, one GRU step on their tokens' embeddings.

With ``low_rank=True`` (default) the per-round tables of :class:`~specframe_trees.heads.gru.GRUFastForm`
are built on the round's first call and reused, and the GRU cell is written out with its two projections
(``W_ih x`` and ``W_hh s``) over the whole frontier: finding the distinct tokens or parents first would save
arithmetic but cost a device-to-host read per depth (``torch.unique``), which a round must not make. The large
projections go through :class:`~specframe_trees.heads.linear.FrozenLinear` (pre-packed CPU kernels for a
few rows), so build the corrector after the head's weights are loaded and placed.
``low_rank=False`` runs ``nn.GRU`` and ``embed_proj`` over the full vocabulary (the reference both forms
are tested against).

Every call is batched over the frontier, so a depth-wise builder scores ``M x K`` children with one call.

Example (one round, frontier of 2 nodes at depth 3)::

    s = corrector.init_state(p)                                  # [B, 1, G]
    ...
    lp = corrector.child_logprobs(p, 4, tokens_d3, states_d3)    # [B, 2, K]
    s4 = corrector.advance(p, 4, states_d3[:, [0, 0, 1]], kept)  # [B, 3, G]: two children of node 0
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specframe.errors import CheckpointError
from specframe.types import DraftProposal
from specframe_trees.correctors.residual import Normalize, ProposalCache, ResidualCorrector
from specframe_trees.heads.gru import DominoGRUHead, GRUFastForm
from specframe_trees.heads.linear import FrozenLinear


@dataclass
class _GRURound:
    """Per-round inputs: the slot features in the head's dtype and, in low-rank mode, its tables."""

    features: torch.Tensor  # [B, L, H]
    fast: GRUFastForm | None


class GRUCorrector(ResidualCorrector):
    """Domino GRU correction; see the module docstring.

    Args:
        head: the GRU head (random or loaded from a checkpoint).
        embed_weight: ``[V, H]`` the target's token-embedding table (not owned, not copied).
        pure_prefix_len: leading uncorrected slots (Domino: 1).
        normalize: ``"candidates"`` (DARTree) or ``"full_vocab"``.
        low_rank: use the low-rank fast form (same results as the direct form).
        name: component name for error messages.
    """

    def __init__(self, head: DominoGRUHead, embed_weight: torch.Tensor, *, pure_prefix_len: int = 1,
                 normalize: Normalize = "candidates", low_rank: bool = True, name: str = "domino_gru") -> None:
        dtype = head.w_ih.dtype
        super().__init__(name=name, pure_prefix_len=pure_prefix_len, normalize=normalize,
                         score_dtype=torch.promote_types(dtype, torch.float32))
        sizes = head.sizes
        if tuple(embed_weight.shape) != (sizes.vocab_size, sizes.hidden_size):
            raise CheckpointError(
                f"the token-embedding table has shape {tuple(embed_weight.shape)}, but the GRU head expects "
                f"[{sizes.vocab_size}, {sizes.hidden_size}] (vocab_size, hidden_size)",
                hint="the head's checkpoint must belong to this target: same vocabulary and hidden size",
            )
        self.head = head
        self.embed_weight = embed_weight  # [V, H]
        self.low_rank = low_rank
        self.dtype = dtype
        self.state_size = sizes.gru_hidden
        self._input_proj = FrozenLinear(head.w_ih)  # W_ih: [3G, H]
        self._hidden_proj = FrozenLinear(head.w_hh)  # W_hh: [3G, G]
        self._state_proj = FrozenLinear(head.w_s.contiguous())  # W_s: [E, G]
        self._round = ProposalCache(self._prepare)

    def _prepare(self, proposal: DraftProposal) -> _GRURound:
        self.check_vocab(proposal, self.head.sizes.vocab_size)
        features = self.require_features(proposal, self.head.sizes.hidden_size).to(self.dtype)
        fast = GRUFastForm(self.head, features, proposal.tokens, self._state_proj) if self.low_rank else None
        return _GRURound(features=features, fast=fast)

    # ----------------------------------------------------------------------------------- state
    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:  # [B, M] -> [B, M, H]
        return F.embedding(tokens, self.embed_weight).to(self.dtype)

    def _step(
        self,
        state: torch.Tensor,  # [B, M, G]
        tokens: torch.Tensor,  # [B, M] int64
    ) -> torch.Tensor:  # [B, M, G]
        b, m, g = state.shape
        if not self.low_rank:
            inputs = self._embed(tokens)  # [B, M, H]
            return self.head.gru_step(state.reshape(b * m, g), inputs.reshape(b * m, -1)).view(b, m, g)
        flat_state = state.reshape(b * m, g)
        gates_x = self._input_proj(self._embed(tokens.reshape(b * m)))  # [B * M, 3G]
        gates_h = self._hidden_proj(flat_state)  # [B * M, 3G]
        return self.head.gru_cell(flat_state, gates_x, gates_h).view(b, m, g)

    def init_state(self, proposal: DraftProposal) -> torch.Tensor:  # [B, 1, G]
        self._round.get(proposal)  # validate the round's inputs and build its tables once
        b = proposal.batch_size
        zero = torch.zeros(b, 1, self.state_size, dtype=self.dtype, device=proposal.root.device)
        if not self.low_rank:
            return self._step(zero, proposal.root.long()[:, None])
        # From the zero state W_hh s vanishes: only the root's input projection is needed.
        gates_x = self._input_proj(self._embed(proposal.root.long()[:, None]))  # [B, 1, 3G]
        return self.head.gru_cell(zero, gates_x, torch.zeros_like(gates_x))

    def advance(
        self,
        proposal: DraftProposal,
        depth: int,
        state: torch.Tensor,  # [B, M, G] parents' states
        tokens: torch.Tensor,  # [B, M] children's tokens
    ) -> torch.Tensor:  # [B, M, G]
        return self._step(state, tokens)

    # ------------------------------------------------------------------------------------ bias
    def candidate_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, G]
    ) -> torch.Tensor:  # [B, M, K]
        rnd = self._round.get(proposal)
        if rnd.fast is not None:
            return rnd.fast.candidate_correction(slot, state)
        b, m, _ = state.shape
        index = proposal.tokens[:, slot, None, :].expand(b, m, -1)  # [B, M, K]
        return self._direct_full(rnd, slot, state).gather(-1, index)

    def full_bias(
        self,
        proposal: DraftProposal,
        slot: int,
        tokens: torch.Tensor,  # [B, M]
        state: torch.Tensor,  # [B, M, G]
    ) -> torch.Tensor:  # [B, M, V]
        rnd = self._round.get(proposal)
        if rnd.fast is not None:
            return rnd.fast.full_correction(slot, state)
        return self._direct_full(rnd, slot, state)

    def _direct_full(self, rnd: _GRURound, slot: int, state: torch.Tensor) -> torch.Tensor:  # [B, M, V]
        b, m, g = state.shape
        z = rnd.features[:, slot, None, :].expand(b, m, -1)  # [B, M, H]
        return self.head.correction(z.reshape(b * m, -1), state.reshape(b * m, g)).view(b, m, -1)
