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

**Reduced vocabulary** (a choice for drafters served over a draft vocabulary, as vLLM sizes the selector by
``draft_vocab_size``): the codebooks can have one row per draft token plus one shared row for every other token
(``codebook_rows = V_draft + 1``; :meth:`PathSelectorHead.set_vocabulary` maps target ids to rows). A predecessor
outside the draft vocabulary (a root the target wrote, say) uses the shared row, which training learns; a candidate
outside it gets a zero successor row, i.e. no transition term (the drafter's own logit alone). For SmolLM2 and the
8,192-token draft vocabulary this keeps rank 256 at 2 x 8,193 x 256 codebook entries instead of 2 x 49,152 x 256.

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
    codebook_rows: int | None = None  # V_draft + 1 for a reduced vocabulary; None: V

    @property
    def rows(self) -> int:
        return self.vocab_size if self.codebook_rows is None else self.codebook_rows


class PathSelectorHead(nn.Module):
    """The path selector; see the module docstring.

    Args:
        sizes: shapes.
        generator: initialises the weights (default: seed 0); the global RNG is never used.
        device: where to allocate; ``"meta"`` allocates nothing (load with ``assign=True``).
        dtype: parameter dtype (default float32).
        init_std: standard deviation of the initial weights (training starts from :data:`INIT_STD`).
        draft_ids: the draft vocabulary's target ids (sorted) when ``sizes.codebook_rows`` is set.
    """

    def __init__(self, sizes: PathSelectorSizes, *, generator: torch.Generator | None = None,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None,
                 init_std: float = INIT_STD, draft_ids: torch.Tensor | None = None) -> None:
        super().__init__()
        rows, r, d = sizes.rows, sizes.rank, sizes.hidden_size
        self.sizes = sizes
        self.predecessor_codebook = nn.Parameter(torch.empty(rows, r, device="meta"))
        self.successor_codebook = nn.Parameter(torch.empty(rows, r, device="meta"))
        self.hidden_projection = nn.Linear(d, r, bias=False, device="meta")
        self.row_of: torch.Tensor | None = None  # [V] int64 target id -> codebook row (None: the identity)
        materialize(self, generator=None, device=device, dtype=dtype)
        if device is None or torch.device(device).type != "meta":
            self._init_normal(generator if generator is not None else torch.Generator().manual_seed(0), init_std)
            self.set_vocabulary(draft_ids)

    @torch.no_grad()
    def _init_normal(self, generator: torch.Generator, std: float) -> None:
        for param in (self.predecessor_codebook, self.successor_codebook, self.hidden_projection.weight):
            values = torch.empty(param.shape, dtype=torch.float32).normal_(0.0, std, generator=generator)
            param.copy_(values)
        if self.sizes.codebook_rows is not None:
            self.successor_codebook[-1].zero_()  # a candidate outside the draft vocabulary: no transition term

    def set_vocabulary(self, draft_ids: torch.Tensor | None) -> None:
        """Map target ids to codebook rows: draft id ``i`` -> row ``i``, every other token -> the last row.

        ``draft_ids`` ``[V_draft]`` are the draft vocabulary's target ids; None keeps one row per token.
        """
        sizes = self.sizes
        if draft_ids is None:
            if sizes.codebook_rows is not None:
                raise ValueError(f"a selector with {sizes.codebook_rows} codebook rows needs its draft vocabulary")
            self.row_of = None
            return
        if sizes.codebook_rows != draft_ids.numel() + 1:
            raise ValueError(f"{draft_ids.numel()} draft tokens need {draft_ids.numel() + 1} codebook rows, the "
                             f"selector has {sizes.rows}")
        device = self.successor_codebook.device
        row_of = torch.full((sizes.vocab_size,), draft_ids.numel(), dtype=torch.long)
        row_of[draft_ids.long().cpu()] = torch.arange(draft_ids.numel())
        self.row_of = row_of.to(device)

    def rows_of(self, tokens: torch.Tensor) -> torch.Tensor:  # [...] int64 target ids -> codebook rows
        return tokens if self.row_of is None else self.row_of[tokens]

    def successors(self, tokens: torch.Tensor) -> torch.Tensor:  # [...] int64 -> [..., r] B[b]
        return F.embedding(self.rows_of(tokens), self.successor_codebook)

    def context(
        self,
        predecessors: torch.Tensor,  # [...] int64 predecessor tokens a
        hidden: torch.Tensor,  # [..., D] the slot's hidden state h_t
    ) -> torch.Tensor:  # [..., r] A[a] ⊙ H h_t
        """The rank-r vector whose product with ``B[b]`` is the transition score."""
        projected = F.linear(hidden.to(self.hidden_projection.weight.dtype), self.hidden_projection.weight)
        return F.embedding(self.rows_of(predecessors), self.predecessor_codebook) * projected

    def candidate_scores(
        self,
        context: torch.Tensor,  # [B, M, r]
        candidates: torch.Tensor,  # [B, K] int64 the slot's candidates
    ) -> torch.Tensor:  # [B, M, K] the bilinear term for every (predecessor, candidate) pair
        """``< context, B[b] >`` for the slot's K candidates."""
        return torch.matmul(context, self.successors(candidates).transpose(1, 2))

    def full_scores(self, context: torch.Tensor) -> torch.Tensor:  # [..., r] -> [..., V]
        """The bilinear term over the whole vocabulary (full-vocabulary normalisation, reference)."""
        if self.row_of is None:
            return F.linear(context, self.successor_codebook)
        return F.linear(context, self.successor_codebook[self.row_of])

    def num_parameters(self) -> dict[str, int]:
        """Parameter counts: the projection alone and the two codebooks (the codebooks are lookup tables)."""
        return {"hidden_projection": self.hidden_projection.weight.numel(),
                "codebooks": self.predecessor_codebook.numel() + self.successor_codebook.numel()}
