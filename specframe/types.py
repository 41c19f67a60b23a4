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

DraftRegime = Literal["deterministic", "sampled"]


#: Smallest positive temperature: vLLM's threshold for greedy. Logits are divided by the temperature in float32, and
#: below it the law differs from greedy only by gaps under float32's spacing of the logits themselves (7.6e-6 at a
#: logit of 64); far below it the temperature itself rounds to 0 in float32 (1e-300 does) and decodes garbage, and
#: transformers' ``generate()`` divides unshifted logits into infinity. Such values are refused: 0 is greedy.
MIN_TEMPERATURE = 1e-5


def temperature_problem(value: float) -> str | None:
    """Why ``value`` cannot be a temperature (see :data:`MIN_TEMPERATURE`), or None."""
    if 0 < value < MIN_TEMPERATURE:
        return (f"{value!r} is between 0 and {MIN_TEMPERATURE:g}: logits are divided by it in float32, where it "
                "does not survive (it decodes garbage or rounds to 0); use 0 for greedy decoding or a temperature "
                f"of at least {MIN_TEMPERATURE:g}")
    return None


@dataclass(frozen=True)
class SamplingParams:
    """How tokens are drawn from a distribution; applied by :mod:`specframe.sampling` only.

    ``temperature == 0`` means greedy (argmax); positive temperatures start at :data:`MIN_TEMPERATURE`. ``top_k == 0``
    and ``top_p == 1`` disable filtering.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


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
    def stack(cls, rows: list[DraftProposal]) -> DraftProposal:
        """Concatenate proposals along the batch axis, padding depths and candidates with ``-inf`` log-probs
        (never used); ``logits`` / ``features`` / ``extras`` are kept only where every row has them alike."""
        depth = max(p.depth for p in rows)
        k = max(p.num_candidates for p in rows)

        def pad(t: torch.Tensor, value: float) -> torch.Tensor:  # [1, L, K] -> [1, depth, k]
            return torch.nn.functional.pad(t, (0, k - t.shape[2], 0, depth - t.shape[1]), value=value)

        def same(ts: list[torch.Tensor | None]) -> torch.Tensor | None:
            if any(t is None for t in ts) or len({tuple(t.shape[1:]) for t in ts}) != 1:  # type: ignore[union-attr]
                return None
            return torch.cat(ts)  # type: ignore[arg-type]

        extras = {}
        for name in rows[0].extras:
            joined = same([p.extras.get(name) for p in rows])
            if joined is not None:
                extras[name] = joined
        return cls(root=torch.cat([p.root for p in rows]),
                   tokens=torch.cat([pad(p.tokens, 0) for p in rows]),
                   logprobs=torch.cat([pad(p.logprobs, float("-inf")) for p in rows]),
                   logits=same([p.logits for p in rows]), features=same([p.features for p in rows]), extras=extras)

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
