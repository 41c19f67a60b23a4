"""DFlash2's path selector (z-lab / Inco AI, 2026) with the published checkpoints' parameter names.

The block drafter's top-K candidates of every slot form a lattice; the selector scores the transition from a
predecessor token ``a`` (the previous token on the path, the root for slot 0) to a candidate ``b`` of slot ``t``::

    S_t(a, b) = U_t(b) + < A[a] ⊙ H h_t , B[b] >

with ``U_t`` the drafter's own (unary) logit of ``b``, ``h_t`` the drafter's hidden state at slot ``t``, ``A`` the
predecessor codebook, ``B`` the successor codebook (both ``[V, r]``) and ``H`` a bias-free ``r x D`` projection.
The drafter's law over the K candidates of a parent ``a`` is ``softmax_b S_t(a, b) / T``; a greedy walk takes the
argmax at every slot.

Parameters (z-lab ``DFlash2DraftModel.candidate_selector`` keys; ``V`` vocabulary, ``r`` rank, ``D`` hidden)::

    candidate_selector.predecessor_codebook      [V, r]   A (a raw parameter, no ``.weight``)
    candidate_selector.successor_codebook        [V, r]   B
    candidate_selector.hidden_projection.weight  [r, D]   H

Initialisation follows the public training code (vLLM speculators' DFlash2): every weight normal with std 0.02.

Only the K candidates' rows of ``B`` are read to score them (:meth:`PathSelectorHead.candidate_scores`); the
full-vocabulary form (:meth:`PathSelectorHead.full_scores`) exists for full-vocabulary normalisation.

Example (rank 2, predecessor 7, candidates ``[3, 1]``)::

    context = A[7] * (H @ h_t)                      # [2]
    bias    = B[[3, 1]] @ context                   # [2], added to U_t([3, 1])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specframe_trees.heads.init import materialize

#: Standard deviation of every weight at initialisation (the public DFlash2 training code's initializer_range).
INIT_STD = 0.02


@dataclass(frozen=True)
class PathSelectorSizes:
    """Shapes of a DFlash2 path selector. Qwen3.8-27B-DFlash2: V 202048, r 256, D 6656, K 16."""

    vocab_size: int  # V
    rank: int  # r
    hidden_size: int  # D, the drafter's hidden size
    top_k: int = 16  # K, candidates per slot the selector was trained on


class PathSelectorHead(nn.Module):
    """The path selector; see the module docstring.

    Args:
        sizes: shapes.
        generator: initialises the weights (default: seed 0); the global RNG is never used.
        device: where to allocate; ``"meta"`` allocates nothing (load with ``assign=True``).
        dtype: parameter dtype (default float32).
        init_std: standard deviation of the initial weights (training starts from :data:`INIT_STD`).
    """

    def __init__(self, sizes: PathSelectorSizes, *, generator: torch.Generator | None = None,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None,
                 init_std: float = INIT_STD) -> None:
        super().__init__()
        v, r, d = sizes.vocab_size, sizes.rank, sizes.hidden_size
        self.sizes = sizes
        self.predecessor_codebook = nn.Parameter(torch.empty(v, r, device="meta"))
        self.successor_codebook = nn.Parameter(torch.empty(v, r, device="meta"))
        self.hidden_projection = nn.Linear(d, r, bias=False, device="meta")
        materialize(self, generator=None, device=device, dtype=dtype)
        if device is None or torch.device(device).type != "meta":
            self._init_normal(generator if generator is not None else torch.Generator().manual_seed(0), init_std)

    @torch.no_grad()
    def _init_normal(self, generator: torch.Generator, std: float) -> None:
        for param in (self.predecessor_codebook, self.successor_codebook, self.hidden_projection.weight):
            values = torch.empty(param.shape, dtype=torch.float32).normal_(0.0, std, generator=generator)
            param.copy_(values)

    def context(
        self,
        predecessors: torch.Tensor,  # [...] int64 predecessor tokens a
        hidden: torch.Tensor,  # [..., D] the slot's hidden state h_t
    ) -> torch.Tensor:  # [..., r] A[a] ⊙ H h_t
        """The rank-r vector whose product with ``B[b]`` is the transition score."""
        projected = F.linear(hidden.to(self.hidden_projection.weight.dtype), self.hidden_projection.weight)
        return F.embedding(predecessors, self.predecessor_codebook) * projected

    def candidate_scores(
        self,
        context: torch.Tensor,  # [B, M, r]
        candidates: torch.Tensor,  # [B, K] int64 the slot's candidates
    ) -> torch.Tensor:  # [B, M, K] the bilinear term for every (predecessor, candidate) pair
        """``< context, B[b] >`` for the slot's K candidates."""
        successors = F.embedding(candidates, self.successor_codebook)  # [B, K, r]
        return torch.matmul(context, successors.transpose(1, 2))

    def full_scores(self, context: torch.Tensor) -> torch.Tensor:  # [..., r] -> [..., V]
        """The bilinear term over the whole vocabulary (full-vocabulary normalisation, reference)."""
        return F.linear(context, self.successor_codebook)

    def num_parameters(self) -> dict[str, int]:
        """Parameter counts: the projection alone and the two codebooks (the codebooks are lookup tables)."""
        return {"hidden_projection": self.hidden_projection.weight.numel(),
                "codebooks": self.predecessor_codebook.numel() + self.successor_codebook.numel()}
