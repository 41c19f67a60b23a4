"""Domino's GRU correction head (docs/concepts/correction-heads.md) with the published checkpoints' parameter names.

Parameters (``G`` = GRU hidden, ``H`` = backbone hidden, ``E`` = projection width, ``V`` = vocabulary)::

    prefix_gru.weight_ih_l0   [3G, H]      nn.GRU(H, G, bias=False, batch_first=True), gate order r, z, n
    prefix_gru.weight_hh_l0   [3G, G]
    embed_proj.0.weight       [E, H + G]   Linear(H + G -> E, no bias) = [W_z | W_s]
    embed_proj.2.weight       [V, E]       Linear(E -> V, no bias)     = W2   (embed_proj.1 is SiLU)

The GRU reads the *target's* token embeddings ``[V, H]``, which the caller passes in; the head does not own
them. For slot ``i`` (predicting depth ``i + 1``) the corrected logits are::

    final_i = base_i + W2 · SiLU(W_z z_i + W_s s_i)

with ``z_i`` the backbone output at slot ``i`` and ``s_i`` the GRU state after ``[root, d_1 .. d_i]``.

Two equivalent forms are provided:

* **direct** (:meth:`DominoGRUHead.gru_step`, :meth:`DominoGRUHead.correction`): ``nn.GRU`` and
  ``embed_proj`` over the whole vocabulary, as the checkpoint code writes it; the reference.
* **low-rank** (:class:`GRUFastForm`): ``W_z z_i`` precomputed for every slot once per round, the K
  candidate rows of ``W2`` gathered once per round, and per step only ``W_s s`` (``G -> E``), SiLU and an
  ``[E x K]`` product; the GRU cell is written out so one step is two matrix products and a few
  element-wise ops.

Example (one slot, one node, V = 5, K = 2 candidates ``[3, 1]``)::

    act   = silu(zproj[slot] + W_s @ s)            # [E]
    corr  = W2[[3, 1]] @ act                       # [2], equal to embed_proj([z; s])[[3, 1]]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specframe_trees.heads.init import materialize


@dataclass(frozen=True)
class GRUHeadSizes:
    """Shapes of a Domino GRU head. Domino-8B: H 4096, G 1024, E 256, V 151936."""

    hidden_size: int  # H, backbone (= target) hidden size, also the embedding width
    gru_hidden: int  # G
    emb_dim: int  # E
    vocab_size: int  # V


class DominoGRUHead(nn.Module):
    """The GRU correction head; see the module docstring for names, shapes and the two forms.

    Args:
        sizes: the head's shapes.
        generator: initialises the weights (default: seed 0); the global RNG is never used.
        device: where to allocate; ``"meta"`` allocates nothing (load with ``assign=True``).
        dtype: parameter dtype (default float32).
    """

    def __init__(self, sizes: GRUHeadSizes, *, generator: torch.Generator | None = None,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        h, g, e, v = sizes.hidden_size, sizes.gru_hidden, sizes.emb_dim, sizes.vocab_size
        self.sizes = sizes
        self.prefix_gru = nn.GRU(h, g, bias=False, batch_first=True, device="meta")
        self.embed_proj = nn.Sequential(
            nn.Linear(h + g, e, bias=False, device="meta"),
            nn.SiLU(),
            nn.Linear(e, v, bias=False, device="meta"),
        )
        materialize(self, generator=generator, device=device, dtype=dtype)

    # ------------------------------------------------------------------------------ weight views
    @property
    def w_ih(self) -> torch.Tensor:  # [3G, H]
        return self.prefix_gru.weight_ih_l0

    @property
    def w_hh(self) -> torch.Tensor:  # [3G, G]
        return self.prefix_gru.weight_hh_l0

    @property
    def w_z(self) -> torch.Tensor:  # [E, H], a strided view of embed_proj.0.weight
        return self.embed_proj[0].weight[:, : self.sizes.hidden_size]

    @property
    def w_s(self) -> torch.Tensor:  # [E, G], a strided view of embed_proj.0.weight
        return self.embed_proj[0].weight[:, self.sizes.hidden_size :]

    @property
    def w2(self) -> torch.Tensor:  # [V, E]
        return self.embed_proj[2].weight

    # ----------------------------------------------------------------------------- direct form
    def gru_step(
        self,
        state: torch.Tensor,  # [N, G]
        inputs: torch.Tensor,  # [N, H] token embeddings
    ) -> torch.Tensor:  # [N, G]
        """One GRU step with ``nn.GRU`` itself (reference)."""
        _, h_n = self.prefix_gru(inputs.unsqueeze(1), state.unsqueeze(0).contiguous())
        return h_n[0]

    def correction(
        self,
        features: torch.Tensor,  # [N, H] backbone outputs z
        state: torch.Tensor,  # [N, G] GRU states s
    ) -> torch.Tensor:  # [N, V]
        """``embed_proj([z ; s])`` over the full vocabulary (reference)."""
        return self.embed_proj(torch.cat([features, state], dim=-1))

    # --------------------------------------------------------------------------- low-rank form
    def input_gates(self, inputs: torch.Tensor) -> torch.Tensor:  # [..., H] -> [..., 3G]
        """The GRU input projection ``W_ih x`` (the part of a step that depends only on the token)."""
        return F.linear(inputs, self.w_ih)

    def hidden_gates(self, state: torch.Tensor) -> torch.Tensor:  # [..., G] -> [..., 3G]
        """The GRU hidden projection ``W_hh s`` (the part of a step that depends only on the parent)."""
        return F.linear(state, self.w_hh)

    def gru_cell(
        self,
        state: torch.Tensor,  # [..., G]
        gates_x: torch.Tensor,  # [..., 3G] from input_gates
        gates_h: torch.Tensor | None = None,  # [..., 3G] from hidden_gates (computed here if None)
    ) -> torch.Tensor:  # [..., G]
        """A GRU step written out (PyTorch's equations without biases), given ``W_ih x`` (and ``W_hh s``)."""
        if gates_h is None:
            gates_h = self.hidden_gates(state)
        r_x, z_x, n_x = gates_x.chunk(3, dim=-1)
        r_h, z_h, n_h = gates_h.chunk(3, dim=-1)
        reset = torch.sigmoid(r_x + r_h)
        update = torch.sigmoid(z_x + z_h)
        candidate = torch.tanh(n_x + reset * n_h)
        return candidate + update * (state - candidate)  # = (1 - update) * candidate + update * state


class GRUFastForm:
    """Per-round tables of the low-rank form for one proposal.

    Args:
        head: the GRU head.
        features: ``[B, L, H]`` backbone outputs ``z`` per slot.
        candidates: ``[B, L, K]`` candidate token ids per slot.

        state_projection: computes ``W_s s`` (default ``F.linear`` with the head's ``W_s``); a caller may
            pass a pre-packed equivalent (:class:`~specframe_trees.heads.linear.FrozenLinear`).

    Built once per round: ``zproj = W_z z`` ``[B, L, E]`` and ``w2_rows = W2[candidates]``
    ``[B, L, K, E]``; only the candidates' rows of the ``[V, E]`` matrix are ever read.
    """

    def __init__(self, head: DominoGRUHead, features: torch.Tensor, candidates: torch.Tensor,
                 state_projection: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.head = head
        self.zproj = F.linear(features, head.w_z)  # [B, L, E]
        self.w2_rows = F.embedding(candidates, head.w2)  # [B, L, K, E]
        self.project_state = state_projection or (lambda s: F.linear(s, head.w_s))

    def candidate_correction(
        self,
        slot: int,
        state: torch.Tensor,  # [B, M, G] GRU states of the frontier nodes
    ) -> torch.Tensor:  # [B, M, K]
        """``W2[cand] · SiLU(W_z z_slot + W_s s)`` for every frontier node and candidate of the slot."""
        act = F.silu(self.zproj[:, slot, None, :] + self.project_state(state))  # [B, M, E]
        return torch.matmul(act, self.w2_rows[:, slot].transpose(1, 2))  # [B, M, K]

    def full_correction(
        self,
        slot: int,
        state: torch.Tensor,  # [B, M, G]
    ) -> torch.Tensor:  # [B, M, V]
        """The same correction over the whole vocabulary (needed only for full-vocabulary normalisation)."""
        act = F.silu(self.zproj[:, slot, None, :] + self.project_state(state))  # [B, M, E]
        return F.linear(act, self.head.w2)
