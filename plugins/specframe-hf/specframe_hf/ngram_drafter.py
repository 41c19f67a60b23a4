"""`NgramDrafter`: prompt-lookup drafting (model-free), as in transformers' prompt lookup and vLLM's ngram proposer.

Each round the drafter looks for the context's last ``n`` tokens earlier in the context, trying ``n`` from
``max_ngram`` down to ``min_ngram``; the first ``n`` with a match wins, and the tokens that followed the
**most recent** earlier occurrence are proposed (at most ``num_speculative_tokens``). The proposal has one
candidate per depth, a deterministic draft that the tree builder turns into a chain.

Its score is the **match length**: every token of a continuation found by an ``n``-token suffix gets the log-score
``log(n / max_ngram)`` (0 for the longest suffix, below 0 for shorter ones). It is a confidence, not a
probability: the verifiers that take n-gram drafts (greedy, walk) never read q, and the rejection verifiers that
would need one refuse a deterministic draft. What it buys is calibration: `budget: auto` bins acceptance by depth
and score, so it learns that a continuation of a one-token match is rarely accepted while one of a three-token
match often is, and verifies the first and not the second where a verify is expensive.

Worked example (``max_ngram=3, min_ngram=1, num_speculative_tokens=3``)::

    context = [4, 8, 15, 16, 4, 8, 23, 4, 8]          (the last token, 8, is the root)
    n = 3: suffix [23, 4, 8] never occurred before   -> try a shorter suffix
    n = 2: suffix [4, 8] occurred at 0 and at 4       -> most recent: 4, followed by [23, 4, 8, ...]
    proposal tokens = [23, 4, 8]                      (depths 1, 2, 3; K = 1, score log(2/3) per token)

With no match for any ``n`` the proposal is empty (depth 0) and the round decodes the root alone.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view

from specframe.interfaces import DecodeState, Drafter
from specframe.types import DraftProposal
from specframe_hf.config import NgramConfig


def lookup_continuation(tokens: np.ndarray, *, min_ngram: int, max_ngram: int, limit: int) -> np.ndarray:
    """Tokens that followed the most recent earlier occurrence of the longest matching suffix (see module doc).

    Args:
        tokens: ``[T]`` int64 context, the root last.
        min_ngram / max_ngram: suffix lengths tried, longest first.
        limit: most tokens returned.

    Returns:
        ``[L]`` int64 with ``0 <= L <= limit``; empty when no suffix occurred before.
    """
    return lookup_match(tokens, min_ngram=min_ngram, max_ngram=max_ngram, limit=limit)[0]


def lookup_match(tokens: np.ndarray, *, min_ngram: int, max_ngram: int, limit: int) -> tuple[np.ndarray, int]:
    """:func:`lookup_continuation` and the length ``n`` of the suffix that matched (0 when none did)."""
    length = tokens.shape[0]
    for n in range(min(max_ngram, length - 1), min_ngram - 1, -1):
        suffix = tokens[length - n :]
        # Windows start at 0 .. length - n - 1: every earlier occurrence, never the suffix itself.
        windows = sliding_window_view(tokens[: length - 1], n)  # [length - n, n]
        hits = np.flatnonzero((windows == suffix).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + n
            return tokens[start : start + limit], n
    return tokens[:0], 0


class NgramDrafter(Drafter):
    """Prompt-lookup drafter; see the module docstring."""

    supports_batch = True  # stateless: the history is the row's own DecodeState

    def __init__(self, config: NgramConfig) -> None:
        self.config = config

    def max_depth(self) -> int:
        """A match's continuation is cut at ``num_speculative_tokens``."""
        return self.config.num_speculative_tokens

    def propose(self, state: DecodeState) -> DraftProposal:
        cfg = self.config
        rows = state.tokens.cpu().numpy()  # [B, T]
        matches = [lookup_match(row, min_ngram=cfg.min_ngram, max_ngram=cfg.max_ngram,
                                limit=cfg.num_speculative_tokens) for row in rows]
        found = [cont for cont, _ in matches]
        depth = max(len(f) for f in found)
        if depth == 0:
            return DraftProposal.empty(state.root)
        b = len(found)
        tokens = torch.zeros(b, depth, 1, dtype=torch.long)  # [B, L, 1]
        logprobs = torch.full((b, depth, 1), float("-inf"))  # [B, L, 1]; -inf pads rows with shorter matches
        for r, (cont, n) in enumerate(matches):
            tokens[r, : len(cont), 0] = torch.from_numpy(cont.astype(np.int64))
            logprobs[r, : len(cont), 0] = math.log(n / cfg.max_ngram)  # the match-length score (module docstring)
        device = state.tokens.device
        return DraftProposal(root=state.root, tokens=tokens.to(device), logprobs=logprobs.to(device))
