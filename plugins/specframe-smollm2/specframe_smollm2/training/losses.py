"""Sampled-softmax losses over a candidate vocabulary, with hard (greedy) and soft (target top-k) targets.

The full 49,152-way softmax dominates the cost on CPU, so the loss is computed over a candidate set ``C``: every
label and soft-label id in the batch plus ``n`` random ids (drawn with the training generator). Logits of the
candidates are ``features @ W[C].T (+ per-candidate corrections)``.

    loss = sum_j w_j [(1 - beta) CE(label) + beta * soft_j] / sum_j w_j,   w_j = exp(-j / gamma)

with ``q`` the softmax over ``C`` and ``j`` the slot. Two soft terms:

* ``renormalised_topk``: ``soft = sum_i p_i (-log q(i))`` with ``p`` the target's top-k distribution renormalised
  over its k ids (the target's probabilities up to one factor per position);
* ``forward_kl``: ``KL(p || q)`` on the partition {each top-k token} + {every other token}, with the target's
  exact probabilities ``p_i = exp(topk_logp_i)`` (stored from the full-vocabulary log-softmax) and the rest bucket
  ``p_rest = 1 - sum_i p_i`` against ``q_rest = 1 - sum_i q(i)``: the drafter is taught the target's whole
  distribution at that resolution, including how much mass lies outside the top k.

Example: gamma 5 gives slot weights 1, .82, .67, .55, ... for slots 0, 1, 2, 3; a target with top-2
``p = [0.6, 0.3]`` (rest 0.1) and a drafter with ``q = [0.5, 0.2]`` (rest 0.3) give
``KL = 0.6 ln(1.2) + 0.3 ln(1.5) + 0.1 ln(1/3) = 0.12``.
"""

from __future__ import annotations

import torch

from specframe_smollm2.training.dataset import IGNORE


def candidate_set(labels: torch.Tensor, soft_ids: torch.Tensor, vocab: int, extra: int,
                  gen: torch.Generator) -> torch.Tensor:  # [C] sorted unique int64
    """Labels, soft-label ids and ``extra`` random ids; ``extra == 0`` means the whole vocabulary."""
    if extra <= 0:
        return torch.arange(vocab)
    rand = torch.randint(0, vocab, (extra,), generator=gen)
    ids = torch.cat([labels[labels != IGNORE].reshape(-1), soft_ids.reshape(-1), rand])
    return torch.unique(ids)


def slot_weights(block_size: int, gamma: float) -> torch.Tensor:  # [bs]
    return torch.exp(-torch.arange(block_size, dtype=torch.float32) / gamma)


def sampled_loss(logits: torch.Tensor, cand: torch.Tensor, labels: torch.Tensor, soft_ids: torch.Tensor,
                 soft_logp: torch.Tensor, weights: torch.Tensor, soft_weight: float,
                 total_weight: torch.Tensor | None = None, soft: str = "renormalised_topk") -> torch.Tensor:
    """Weighted hard + soft CE (divided by ``total_weight`` when given: a slice's share of a larger batch).

    Args:
        logits: ``[N, bs, C]`` candidate logits.
        cand: ``[C]`` sorted candidate ids.
        labels: ``[N, bs]`` ids or IGNORE.
        soft_ids / soft_logp: ``[N, bs, k]`` target top-k.
        weights: ``[bs]`` slot weights.
        soft_weight: beta.
    """
    logq = torch.log_softmax(logits.float(), dim=-1)  # [N, bs, C]
    valid = labels != IGNORE  # [N, bs]
    lab_pos = torch.searchsorted(cand, labels.clamp_min(0).contiguous())
    hard = -logq.gather(-1, lab_pos[..., None]).squeeze(-1)  # [N, bs]
    soft_pos = torch.searchsorted(cand, soft_ids.contiguous())  # [N, bs, k]
    if soft == "forward_kl":
        soft_term = forward_kl(soft_logp, logq.gather(-1, soft_pos))
    else:
        p = torch.softmax(soft_logp, dim=-1)
        soft_term = -(p * logq.gather(-1, soft_pos)).sum(-1)  # [N, bs]
    per = (1 - soft_weight) * hard + soft_weight * soft_term
    w = weights[None, :] * valid.float()
    return (per * w).sum() / (w.sum() if total_weight is None else total_weight).clamp_min(1e-6)


def forward_kl(target_logp: torch.Tensor, draft_logq: torch.Tensor) -> torch.Tensor:  # [N, bs]
    """``KL(p || q)`` over the top-k tokens and one rest bucket (module docstring); ``target_logp`` /
    ``draft_logq`` ``[N, bs, k]`` (padding entries have ``target_logp`` -1e4, i.e. ``p = 0``, and do not count)."""
    p = target_logp.float().exp()  # [N, bs, k]
    present = p > 0
    q = draft_logq.exp() * present
    tiny = torch.finfo(torch.float32).tiny
    p_rest = (1 - p.sum(-1)).clamp_min(0)  # [N, bs]
    q_rest = (1 - q.sum(-1)).clamp_min(tiny)
    top = torch.where(present, p * (target_logp.float() - draft_logq), torch.zeros_like(p)).sum(-1)
    rest = torch.where(p_rest > 0, p_rest * (p_rest.clamp_min(tiny).log() - q_rest.log()), torch.zeros_like(p_rest))
    return top + rest


def leading_accept(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # [N] int64
    """Accepted draft tokens of a chain per block: leading slots where ``pred == labels`` (IGNORE stops)."""
    ok = (pred == labels) & (labels != IGNORE)
    return ok.long().cumprod(dim=-1).sum(-1)
