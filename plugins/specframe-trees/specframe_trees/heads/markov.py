"""DSpark's Markov correction head (docs/concepts/correction-heads.md), three variants, with checkpoint parameter names.

``p_k(v) ∝ exp(U_k(v) + B_k(v))`` where ``U_k`` are the base logits of slot ``k`` and the bias ``B_k`` is a
rank-``r`` product ``W2 · u_k``. ``x_{k-1}`` is the previous token on the path (the root for slot 0) and
``h_k`` the backbone output at slot ``k``:

=========  ===========================================================================  ==================
variant    bias vector ``u_k``                                                          parameters
=========  ===========================================================================  ==================
vanilla    ``W1[x_{k-1}]``                                                              markov_w1, markov_w2
gated      ``g ⊙ W1[x_{k-1}]``, ``g = sigmoid(gate_proj([h_k ; W1[x_{k-1}]]))``          + gate_proj
rnn        ``tanh(out)``; ``[gate ; cand ; out] = joint_proj([s_{k-1} ; W1[x_{k-1}] ; h_k])``,  + joint_proj
           ``s_k = σ(gate) ⊙ s_{k-1} + (1 - σ(gate)) ⊙ tanh(cand)``, ``s_0 = 0``
=========  ===========================================================================  ==================

Shapes: ``markov_w1.weight [V, r]`` (Embedding), ``markov_w2.weight [V, r]`` (Linear r -> V, no bias),
``gate_proj.weight [r, H + r]`` and ``gate_proj.bias [r]``, ``joint_proj.weight [3r, 2r + H]`` and
``joint_proj.bias [3r]``.

Choices made where the sources are silent (documented so a checkpoint loader can check them):
``gate_proj`` and ``joint_proj`` carry a bias (the z-lab-compatible layout lists ``gate_proj.*`` and
``joint_proj.*``); ``joint_proj``'s input is concatenated ``[s ; W1[x] ; h]`` and its output is split in
the order ``(gate, cand, out)``.

Only the K candidate rows of ``W2`` are needed to score candidates (:meth:`MarkovHead.candidate_bias`).

Example (vanilla, previous token 7, candidates ``[3, 1]``)::

    u    = markov_w1.weight[7]                      # [r]
    bias = markov_w2.weight[[3, 1]] @ u             # [2] = markov_w2(markov_w1(7))[[3, 1]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from specframe_trees.heads.init import materialize

MarkovVariant = Literal["vanilla", "gated", "rnn"]


@dataclass(frozen=True)
class MarkovHeadSizes:
    """Shapes of a DSpark Markov head. DSpark-Qwen3-4B: V 151936, r 256, H 2560."""

    vocab_size: int  # V
    rank: int  # r
    hidden_size: int  # H, backbone hidden size (gated and rnn variants)
    variant: MarkovVariant = "vanilla"


class MarkovHead(nn.Module):
    """The Markov head; see the module docstring for the variants and parameter names.

    Args:
        sizes: shapes and variant.
        generator: initialises the weights (default: seed 0); the global RNG is never used.
        device: where to allocate; ``"meta"`` allocates nothing (load with ``assign=True``).
        dtype: parameter dtype (default float32).
    """

    def __init__(self, sizes: MarkovHeadSizes, *, generator: torch.Generator | None = None,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        v, r, h = sizes.vocab_size, sizes.rank, sizes.hidden_size
        self.sizes = sizes
        self.markov_w1 = nn.Embedding(v, r, device="meta")
        self.markov_w2 = nn.Linear(r, v, bias=False, device="meta")
        if sizes.variant == "gated":
            self.gate_proj = nn.Linear(h + r, r, device="meta")
        elif sizes.variant == "rnn":
            self.joint_proj = nn.Linear(2 * r + h, 3 * r, device="meta")
        materialize(self, generator=generator, device=device, dtype=dtype)

    @property
    def variant(self) -> MarkovVariant:
        return self.sizes.variant

    @property
    def state_size(self) -> int:
        """Per-node state: ``[s ; W1[x]]`` (``2r``) for rnn, nothing for vanilla and gated."""
        return 2 * self.sizes.rank if self.sizes.variant == "rnn" else 0

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:  # [...] int64 -> [..., r]
        """``W1[x]``."""
        return self.markov_w1(tokens)

    def bias_vector(
        self,
        prev_embed: torch.Tensor,  # [..., r] W1[x_{k-1}]
        features: torch.Tensor | None,  # [..., H] h_k (gated, rnn)
        state: torch.Tensor | None,  # [..., r] s_{k-1} (rnn)
    ) -> torch.Tensor:  # [..., r] u_k, so that the bias is W2 u_k
        """The rank-r vector whose product with ``W2`` is the slot's bias."""
        if self.sizes.variant == "vanilla":
            return prev_embed
        if self.sizes.variant == "gated":
            gate = torch.sigmoid(self.gate_proj(torch.cat([features, prev_embed], dim=-1)))
            return gate * prev_embed
        _, _, out = self._joint(prev_embed, features, state)
        return torch.tanh(out)

    def next_state(
        self,
        prev_embed: torch.Tensor,  # [..., r]
        features: torch.Tensor,  # [..., H]
        state: torch.Tensor,  # [..., r] s_{k-1}
    ) -> torch.Tensor:  # [..., r] s_k
        """The rnn variant's recurrence ``s_k = g ⊙ s_{k-1} + (1 - g) ⊙ tanh(cand)``."""
        gate, cand, _ = self._joint(prev_embed, features, state)
        g = torch.sigmoid(gate)
        return g * state + (1.0 - g) * torch.tanh(cand)

    def _joint(self, prev_embed: torch.Tensor, features: torch.Tensor | None,
               state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        joint = self.joint_proj(torch.cat([state, prev_embed, features], dim=-1))  # [..., 3r]
        gate, cand, out = joint.chunk(3, dim=-1)
        return gate, cand, out

    def candidate_bias(
        self,
        u: torch.Tensor,  # [B, M, r]
        w2_rows: torch.Tensor,  # [B, K, r] gathered candidate rows of W2
    ) -> torch.Tensor:  # [B, M, K]
        """The bias restricted to the candidates: ``W2[cand] · u``."""
        return torch.matmul(u, w2_rows.transpose(1, 2))

    def full_bias(self, u: torch.Tensor) -> torch.Tensor:  # [..., r] -> [..., V]
        """The bias over the whole vocabulary (reference, full-vocabulary normalisation)."""
        return F.linear(u, self.markov_w2.weight)
