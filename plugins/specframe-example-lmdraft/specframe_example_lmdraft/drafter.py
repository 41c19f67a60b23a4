"""`LMDrafter`: K candidates per depth along a small causal LM's greedy rollout, with a KV cache kept in sync.

One round (``L`` = num_speculative_tokens, ``K`` = num_candidates)::

    sync the cache with the committed tokens   # keep the longest cached prefix the loop committed
    feed the uncached tokens (at least the root) -> logits for depth 1
    for d in 2..L: feed x_{d-1} = argmax(depth d-1) -> logits for depth d
    candidates at depth d = top-K of log_softmax(logits_d)

The cache then holds ``committed + root + x_1 .. x_{L-1}``. After verification the loop appends the accepted
tokens and the bonus token to ``state.tokens``; :meth:`LMDrafter.commit` crops the cache to the longest prefix
it shares with them, so the rollout tokens the target accepted are never recomputed.

Worked example (L = 3, the cache holds prompt ``p`` and the root ``r`` is new)::

    propose: feed [r] -> depth 1, x1 = a;  feed [a] -> depth 2, x2 = b;  feed [b] -> depth 3
             cache = p r a b
    the target accepts a, rejects b, emits bonus c:  tokens = p r a c
    commit:  longest common prefix of (p r a b) and (p r a c) = p r a  -> crop the cache to p r a
    propose: feed [c] -> depth 1 ...

Candidates are ids of the target's vocabulary: a draft model with a larger (padded) vocabulary has its extra
logits dropped. The proposal is deterministic given the committed tokens (no randomness is drawn).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from specframe.interfaces import DecodeState, Drafter
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput, VerifyResult


class LMDrafter(Drafter):
    """Greedy-rollout drafter over a causal LM (see the module docstring).

    Args:
        model: a transformers ``*ForCausalLM`` in eval mode, already on its device and dtype.
        vocab_size: the target's vocabulary size V (candidate ids lie in ``[0, V)``).
        depth: L, depths per round.
        num_candidates: K, candidates per depth (at most V).
    """

    supports_batch = True  # the draft LM's cache is made by begin(), so each batch row's fork has its own

    def __init__(self, model: Any, *, vocab_size: int, depth: int, num_candidates: int) -> None:
        self.model = model.eval()
        self.vocab_size = vocab_size
        self.depth = depth
        self.num_candidates = min(num_candidates, vocab_size)
        self.device = next(model.parameters()).device
        # transformers >= 5.24 names the KV-cache argument `cache`; earlier versions `past_key_values`.
        self._cache_kwarg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self._cache: DynamicCache | None = None
        self._cached = torch.zeros(0, 0, dtype=torch.long)  # [B, C] ids whose KV entries the cache holds

    def max_depth(self) -> int:
        return self.depth

    # ---------------------------------------------------------------------------------------- requests
    def begin(self, state: DecodeState, prefill: TargetOutput) -> None:
        """Start a request with an empty cache; the first proposal feeds the whole prompt."""
        self._reset(state.tokens.shape[0])

    def _reset(self, batch: int) -> None:
        self._cache = DynamicCache(config=self.model.config)
        self._cached = torch.zeros(batch, 0, dtype=torch.long)

    def commit(self, state: DecodeState, tree: DraftTree, result: VerifyResult, target_out: TargetOutput) -> None:
        """Drop the cache entries of rollout tokens the loop did not commit."""
        self._sync(state.tokens.cpu())

    def _sync(self, tokens: torch.Tensor) -> None:
        """Crop the cache to the longest prefix it shares with ``tokens`` ``[B, T]``, leaving the root uncached."""
        if self._cache is None or self._cached.shape[0] != tokens.shape[0]:
            self._reset(tokens.shape[0])
            return
        n = min(self._cached.shape[1], tokens.shape[1] - 1)
        same = (self._cached[:, :n] == tokens[:, :n]).all(dim=0)  # [n] position agrees in every row
        keep = int(same.long().cumprod(dim=0).sum())
        drop = self._cached.shape[1] - keep
        if drop:
            self._cache.crop(-drop)  # transformers 5 crops by a negative count of trailing entries
            self._cached = self._cached[:, :keep]

    # --------------------------------------------------------------------------------------- proposals
    def _next_logits(self, feed: torch.Tensor) -> torch.Tensor:  # [B, V] float32
        """Run ``feed`` ``[B, F]`` on top of the cache; logits after its last token, cut to the target's V."""
        out = self.model(input_ids=feed.to(self.device), use_cache=True, logits_to_keep=1,
                         **{self._cache_kwarg: self._cache})
        self._cached = torch.cat([self._cached, feed.cpu()], dim=1)
        return out.logits[:, -1, : self.vocab_size].float()

    def propose(self, state: DecodeState) -> DraftProposal:
        tokens = state.tokens.cpu()  # [B, T]
        self._sync(tokens)
        feed = tokens[:, self._cached.shape[1] :]  # [B, F >= 1]: the uncached tokens, the root last
        steps = []
        with torch.inference_mode():
            for d in range(self.depth):
                steps.append(self._next_logits(feed))  # depth d + 1
                if d + 1 < self.depth:
                    feed = steps[-1].argmax(dim=-1, keepdim=True)  # [B, 1] the rollout's next token
        logits = torch.stack(steps, dim=1)  # [B, L, V]
        top = torch.topk(torch.log_softmax(logits, dim=-1), self.num_candidates, dim=-1)  # sorted, best first
        device = state.tokens.device
        return DraftProposal(root=state.root, tokens=top.indices.to(device), logprobs=top.values.to(device),
                             logits=logits.to(device))
