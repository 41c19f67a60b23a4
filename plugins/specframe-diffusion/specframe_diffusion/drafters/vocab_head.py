"""`DraftVocabHead`: the drafter's LM head over the full target vocabulary or a reduced draft vocabulary.

Full vocabulary: ``logits = lm_head(features)`` ``[B, L, V]``, candidates = top-K of its log-softmax.

Reduced vocabulary (:class:`specframe.draft_vocab.DraftVocab`, ``V_d`` tokens): the LM head's rows of the subset
are copied once at build time into a small ``[V_d, H]`` weight, so a round multiplies by ``V_d`` rows instead of
``V``. The log-softmax is taken over the subset (the draft law, zero outside it), the top-K draft ids are mapped
to target ids, and the full-vocabulary ``logits`` the proposal carries for correctors and sampled builders are the
subset's logits scattered into ``-inf``, so every consumer sees the same law.

Example: subset target ids ``[0, 2, 5]`` (V = 6), subset logits ``[1.0, 3.0, 2.0]`` -> top-2 candidates ``[2, 5]``
with log-probs ``log_softmax([1, 3, 2])[[1, 2]]``; ``logits = [1, -inf, 3, -inf, -inf, 2]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from specframe.cpu_linear import PackedLinear
from specframe.draft_vocab import DraftVocab


@dataclass
class DraftScores:
    """One round's candidates: target ids and log-probs sorted descending, plus the full-vocabulary logits."""

    tokens: torch.Tensor  # [B, L, K] int64 target ids
    logprobs: torch.Tensor  # [B, L, K] float32
    logits: torch.Tensor  # [B, L, V] float32 (-inf outside a reduced vocabulary)


class DraftVocabHead:
    """Scores draft features over the full vocabulary or a subset; see the module docstring.

    Args:
        lm_head: the ``[V, H]`` LM head (the target's, or the checkpoint's own copy); not modified.
        vocab: the reduced vocabulary, or None for the full one.
    """

    def __init__(self, lm_head: nn.Module, vocab: DraftVocab | None = None) -> None:
        weight = lm_head.weight  # [V, H]
        self.lm_head = lm_head
        self.vocab = vocab
        self.vocab_size = int(weight.shape[0])
        self.device, self.dtype = weight.device, weight.dtype
        self.target_ids: torch.Tensor | None = None  # [V_d] int64
        self.sub_head: nn.Module | None = None  # [H] -> [V_d] logits over the subset
        if vocab is not None:
            vocab.check_target(self.vocab_size)
            ids = vocab.target_ids.to(weight.device)
            self.target_ids = ids
            bias = getattr(lm_head, "bias", None)
            sub = nn.Linear(int(weight.shape[1]), len(ids), bias=bias is not None, device="meta")
            sub.weight = nn.Parameter(weight.detach().index_select(0, ids).contiguous(), requires_grad=False)
            if bias is not None:
                sub.bias = nn.Parameter(bias.detach().index_select(0, ids), requires_grad=False)
            # A prepacked full head (cpu_linear) gets a prepacked subset head under the same row rule, so the two
            # compare fairly.
            self.sub_head = PackedLinear(sub, lm_head.kernels) if isinstance(lm_head, PackedLinear) else sub

    @property
    def size(self) -> int:
        """Rows scored per slot: ``V_d`` with a reduced vocabulary, ``V`` otherwise."""
        return self.vocab.size if self.vocab is not None else self.vocab_size

    @torch.no_grad()
    def __call__(self, features: torch.Tensor, top_k: int) -> DraftScores:  # features [B, L, H]
        x = features.to(self.device, self.dtype)
        if self.sub_head is None or self.target_ids is None:
            logits = self.lm_head(x).float()  # [B, L, V]
            log_probs = torch.log_softmax(logits, dim=-1)
            top_logprobs, top_tokens = torch.topk(log_probs, min(top_k, logits.shape[-1]), dim=-1)  # [B, L, K]
            return DraftScores(top_tokens, top_logprobs, logits)
        sub_logits = self.sub_head(x).float()  # [B, L, V_d]
        log_probs = torch.log_softmax(sub_logits, dim=-1)
        top_logprobs, top_draft = torch.topk(log_probs, min(top_k, sub_logits.shape[-1]), dim=-1)  # [B, L, K]
        tokens = self.target_ids[top_draft]  # [B, L, K] target ids
        logits = sub_logits.new_full((*sub_logits.shape[:-1], self.vocab_size), float("-inf"))  # [B, L, V]
        logits[..., self.target_ids] = sub_logits
        return DraftScores(tokens, top_logprobs, logits)
