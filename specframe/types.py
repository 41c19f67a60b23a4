"""Core data types passed between the stages of a decode round.

A round is ``draft -> correct/build -> prune -> target forward -> verify -> commit``. The types here are the
messages between those stages. All tensors are batch-first; the decode loop runs one request per batch row
and currently batch size 1, but every type keeps the batch axis so batched loops need no new types.

Vocabulary (close to vLLM's rejection sampler, with one difference: vLLM calls the token drawn after a rejection
*recovered* and keeps *bonus* for the token after a fully accepted draft; specframe calls both the bonus token,
because the loop treats them alike):

* **root**: the last committed token, not yet in the target's KV cache. Every draft tree hangs off it.
* **accepted** tokens: draft tokens the verifier kept, in path order.
* **bonus** token: the token the verifier emits after the accepted path (sampled from the target at the last
  accepted node, or a **residual** sample after a rejection). It becomes the next round's root.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from specframe.seeds import stream_seed

DraftRegime = Literal["deterministic", "sampled"]


@dataclass(frozen=True)
class SamplingParams:
    """How tokens are drawn from a distribution; applied by :mod:`specframe.sampling` only.

    ``temperature == 0`` means greedy (argmax). ``top_k == 0`` and ``top_p == 1`` disable filtering.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class RngStreams:
    """Per-request random streams. The global torch RNG is never used by specframe.

    Separate streams keep the draft randomness independent of the verifier's coins, which losslessness
    proofs require, and let a test replay one stream while varying another.
    """

    draft: torch.Generator
    accept: torch.Generator
    residual: torch.Generator
    target: torch.Generator

    @classmethod
    def from_seed(cls, seed: int, device: str | torch.device = "cpu") -> RngStreams:
        """Four independent streams of ``seed`` (``0 <= seed < 2**63``, else a GenerationError): see
        :mod:`specframe.seeds`."""
        gens = []
        for stream in range(4):
            g = torch.Generator(device=device)
            g.manual_seed(stream_seed(seed, stream))
            gens.append(g)
        return cls(*gens)


@dataclass
class DraftProposal:
    """What a drafter emits in one round: per-depth candidates from (usually) one forward pass.

    Depth ``d`` (1-based) is the ``d``-th token after the root; it is stored at index ``d - 1`` ("slot").
    ``logprobs`` are the drafter's base (uncorrected) log-probabilities of the candidates, normalised over
    the full vocabulary (or over a reduced draft vocabulary, :mod:`specframe.draft_vocab`, whose complement then
    has ``-inf`` in ``logits``), sorted descending along K. ``-inf`` marks a candidate that must never be used
    (for example a masked vocabulary entry or padding when the vocabulary is smaller than K).
    """

    root: torch.Tensor  # [B] int64, the last committed token (previous round's bonus)
    tokens: torch.Tensor  # [B, L, K] int64, top-K candidate ids per depth
    logprobs: torch.Tensor  # [B, L, K] float32, base log-probs of the candidates
    logits: torch.Tensor | None = None  # [B, L, V] float32, full base logits (correctors, sampled regimes)
    features: torch.Tensor | None = None  # [B, L, H] per-depth hidden features for learned correctors
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # drafter-specific side outputs

    @property
    def batch_size(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def depth(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def num_candidates(self) -> int:
        return int(self.tokens.shape[2])

    @classmethod
    def empty(cls, root: torch.Tensor) -> DraftProposal:
        """A proposal with no depth at all: the tree is the root alone (plain decoding)."""
        b = root.shape[0]
        return cls(
            root=root,
            tokens=torch.zeros(b, 0, 1, dtype=torch.long, device=root.device),
            logprobs=torch.zeros(b, 0, 1, dtype=torch.float32, device=root.device),
        )


@dataclass
class TargetOutput:
    """The target's outputs for a set of query positions (prefill tokens or draft-tree nodes)."""

    logits: torch.Tensor  # [B, N, V], next-token logits after each query position
    hidden: torch.Tensor | None = None  # [B, N, n_taps * H], concatenated tapped hidden states


@dataclass
class VerifyResult:
    """The verifier's decision for one round.

    ``accepted_nodes`` are tree node indices along the accepted path, root first, padded with -1. The target
    adapter commits exactly these nodes to its KV cache; the bonus token is emitted but not yet cached.
    """

    accepted_nodes: torch.Tensor  # [B, D + 1] int64, root first, -1 padded
    num_accepted: torch.Tensor  # [B] int64, accepted draft tokens (bonus excluded)
    bonus_token: torch.Tensor  # [B] int64, next root

    def emitted_tokens(self, tree_tokens: torch.Tensor) -> list[list[int]]:
        """Tokens committed to the output this round (accepted drafts, then the bonus), per row.

        Args:
            tree_tokens: ``[B, N]`` token ids of the verified tree.
        """
        out = []
        for b in range(self.accepted_nodes.shape[0]):
            n = int(self.num_accepted[b])
            nodes = self.accepted_nodes[b, 1 : n + 1]
            row = tree_tokens[b, nodes].tolist() + [int(self.bonus_token[b])]
            out.append(row)
        return out
