"""The one place where temperature, top-k and top-p are applied: to the target's law p and the draft law q alike.

Lossless verification compares the target's law with the draft's law token by token, so both must be processed
by exactly the same code. Every stage that turns logits into a distribution or a token calls this module;
nothing else in specframe divides by a temperature or filters a vocabulary.

Semantics follow ``transformers`` ``generate(do_sample=True)`` (``TemperatureLogitsWarper`` ->
``TopKLogitsWarper`` -> ``TopPLogitsWarper``, ``min_tokens_to_keep = 1``):

1. **temperature** ``T > 0``: logits are divided by ``T``. ``T == 0`` means greedy: the law is a point mass on
   the argmax of the raw logits (first index on ties, like ``torch.argmax``); top-k/top-p are then irrelevant.
   Temperatures between 0 and :data:`~specframe.types.MIN_TEMPERATURE` (1e-5) are refused: they do not survive
   the float32 the logits are divided in (``1e-300`` rounds to 0 and decodes garbage).
2. **top-k** (``k > 0``): tokens whose (scaled) logit is *strictly below* the k-th largest are removed, so ties
   at the boundary are all kept (the kept set can exceed ``k``). ``k >= V`` keeps everything.
3. **top-p** (``p < 1``): tokens are sorted ascending (stable sort), the cumulative probability of the
   remaining tokens is taken, and a token is removed when that cumulative mass is ``<= 1 - p``; the most likely
   token is always kept. This keeps the smallest descending prefix whose mass is ``>= p``. Among equal
   logits at the boundary the lower token index is removed first (stable sort; transformers uses an unstable
   sort, which agrees on small rows and is unspecified on large ones).

Worked example: logits ``[2, 1, 1, 1, 0]``, ``T = 1``, ``top_p = 0.6``. Softmax is ``[.447, .164, .164,
.164, .060]``; ascending cumulative mass in the order ``4, 1, 2, 3, 0`` is ``[.060, .224, .389, .553, 1]``;
the tokens with cumulative mass ``<= 0.4`` (``4, 1, 2``) are removed, leaving ``{0, 3}``.

Randomness is always explicit: a draw is a pure function of (probabilities, uniforms). The decode loop passes
position-keyed uniforms (:mod:`specframe.sampling.noise`), tests and statistics may pass uniforms drawn from a
``torch.Generator`` (:func:`uniforms`); the global torch RNG is never used. Draws use inverse-CDF sampling on
float64 uniforms (one uniform per drawn token), and draws without replacement use Gumbel-top-k on given Gumbel
noise, so optimised kernels can be checked against this reference given the same noise.
"""

from __future__ import annotations

import math

import torch

from specframe.errors import GenerationError
from specframe.types import SamplingParams, temperature_problem

__all__ = [
    "gumbel_from_uniforms",
    "inverse_cdf",
    "probs",
    "processed_logprobs",
    "sample",
    "sample_from_probs",
    "sample_without_replacement",
    "uniforms",
    "validate_sampling",
]


def validate_sampling(params: SamplingParams) -> None:
    """Raise :class:`GenerationError` if a sampling value is out of range.

    Valid: ``temperature`` 0 (greedy) or a finite number from :data:`~specframe.types.MIN_TEMPERATURE`; ``top_k`` an
    integer ``>= 0``; ``top_p`` in ``(0, 1]``.
    """
    t, k, p = params.temperature, params.top_k, params.top_p
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise GenerationError(
            f"sampling.temperature is {t!r}; it must be a finite number >= 0",
            hint="use 0 for greedy decoding or a positive value such as 0.7 or 1.0",
        )
    tiny = temperature_problem(t)
    if tiny is not None:
        raise GenerationError(f"sampling.temperature is {tiny}", hint="0 means greedy decoding")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise GenerationError(
            f"sampling.top_k is {k!r}; it must be an integer >= 0",
            hint="use 0 to disable top-k filtering, or a positive count such as 50",
        )
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0.0 < p <= 1.0):
        raise GenerationError(
            f"sampling.top_p is {p!r}; it must lie in (0, 1]",
            hint="use 1.0 to disable nucleus filtering, or a mass such as 0.9",
        )


def _working_dtype(t: torch.Tensor) -> torch.dtype:
    """float64 stays float64; everything else is processed in float32."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def processed_logprobs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:  # [..., V]
    """Log-probabilities of the processed law; ``-inf`` outside the kept set.

    Args:
        logits: ``[..., V]`` raw (unnormalised) logits; ``-inf`` entries are never kept.
        params: temperature, top-k and top-p (validated here).

    Returns:
        ``[..., V]`` normalised log-probabilities in float32 (float64 for float64 input). At temperature 0
        this is ``0`` at the argmax and ``-inf`` elsewhere.
    """
    validate_sampling(params)
    x = logits.to(_working_dtype(logits))
    if params.greedy:
        best = x.argmax(dim=-1, keepdim=True)  # first index on ties
        out = torch.full_like(x, float("-inf"))
        return out.scatter(-1, best, 0.0)
    # Step 1: temperature. Shifting by the row maximum first leaves the law unchanged and avoids overflow.
    shift = x.amax(dim=-1, keepdim=True)
    x = (x - torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))) / params.temperature
    vocab = x.shape[-1]
    # Step 2: top-k keeps every token not strictly below the k-th largest value.
    if 0 < params.top_k < vocab:
        kth = torch.topk(x, params.top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    # Step 3: top-p removes ascending-sorted tokens whose cumulative mass is <= 1 - top_p, keeping the top one.
    if params.top_p < 1.0:
        sorted_x, order = torch.sort(x, dim=-1, descending=False, stable=True)
        cumulative = sorted_x.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cumulative <= (1.0 - params.top_p)
        remove_sorted[..., -1] = False
        remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
        x = x.masked_fill(remove, float("-inf"))
    return x.log_softmax(dim=-1)


def probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:  # [..., V]
    """Probabilities of the processed law (zeros outside the kept set); see :func:`processed_logprobs`."""
    return processed_logprobs(logits, params).exp()


def uniforms(shape: tuple[int, ...], generator: torch.Generator, device: torch.device | str = "cpu") -> torch.Tensor:
    """``shape`` float64 uniforms in ``[0, 1)`` from ``generator`` (never the global RNG), placed on ``device``.

    They are drawn on the generator's own device, so a stage on another device than the target (whose device
    holds the request's streams) draws the same numbers and only moves them.
    """
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=generator.device)
    return u.to(device)


def inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:  # [...] int64
    """Draw from ``weights`` ``[..., V]`` (non-negative, not necessarily normalised) with uniforms ``u`` ``[...]``.

    Token ``i`` is chosen when ``cdf[i - 1] <= u * total < cdf[i]``, so zero-weight tokens are never chosen.
    Rows of zero total mass return token 0.
    """
    w = weights.to(torch.float64).clamp(min=0.0)
    cdf = w.cumsum(dim=-1)  # [..., V]
    total = cdf[..., -1:]
    target = u.to(torch.float64).unsqueeze(-1) * total  # [..., 1]
    idx = torch.searchsorted(cdf.contiguous(), target.contiguous(), right=True).squeeze(-1)
    # Rounding can put u * total at or beyond the last step; fall back to the last positive-weight token.
    vocab = w.shape[-1]
    last_positive = (vocab - 1) - (w > 0).flip(-1).long().argmax(dim=-1)
    return torch.minimum(idx, last_positive)


def sample_from_probs(weights: torch.Tensor, generator: torch.Generator) -> torch.Tensor:  # [...] int64
    """One draw per row of ``weights`` ``[..., V]``, consuming one uniform per row from ``generator``."""
    u = uniforms(tuple(weights.shape[:-1]), generator, weights.device)
    return inverse_cdf(weights, u)


def sample(logits: torch.Tensor, params: SamplingParams, u: torch.Tensor | None) -> torch.Tensor:  # [...] int64
    """Draw one token per row of ``logits`` ``[..., V]`` from the processed law with the uniforms ``u`` ``[...]``.

    At temperature 0 this is ``argmax`` (first index on ties) and ``u`` is not read (it may be None).
    """
    validate_sampling(params)
    if params.greedy:
        return logits.argmax(dim=-1)
    if u is None:
        raise ValueError("sampling at temperature > 0 needs uniforms")
    return inverse_cdf(probs(logits, params), u.to(logits.device))


def gumbel_from_uniforms(u: torch.Tensor) -> torch.Tensor:  # float64, same shape
    """Standard Gumbel noise ``-log(-log(u))`` from uniforms in ``[0, 1)``."""
    tiny = torch.finfo(torch.float64).tiny
    return -torch.log(-torch.log(u.to(torch.float64).clamp(min=tiny)))


def sample_without_replacement(
    logprobs: torch.Tensor,  # [..., V] log-probabilities of the law (-inf = excluded)
    num: int,
    gumbel: torch.Tensor,  # [..., V] float64 standard Gumbel noise, independent per entry
) -> tuple[torch.Tensor, torch.Tensor]:  # ([..., num] int64, [..., num] bool)
    """Draw ``num`` distinct tokens per row by Gumbel-top-k, in the order of sequential sampling.

    The keys ``logprobs + Gumbel noise`` sorted descending have the law of drawing without replacement one
    token at a time: the first from ``q``, the second from ``q`` with the first removed and renormalised, and
    so on (Kool et al., 2019). ``gumbel`` comes from :func:`gumbel_from_uniforms` (or
    :meth:`specframe.sampling.noise.RoundNoise.gumbel`).

    Returns:
        ``tokens [..., num]`` in draw order and ``ok [..., num]``: False where the law's support was exhausted
        (those token ids are meaningless).
    """
    if num < 1:
        raise ValueError(f"num must be >= 1, got {num}")
    keys = logprobs.to(torch.float64) + gumbel.to(logprobs.device)
    k = min(num, logprobs.shape[-1])
    top = torch.topk(keys, k, dim=-1)
    tokens, ok = top.indices, torch.isfinite(top.values)
    if k < num:
        pad = num - k
        tokens = torch.cat([tokens, tokens.new_zeros((*tokens.shape[:-1], pad))], dim=-1)
        ok = torch.cat([ok, ok.new_zeros((*ok.shape[:-1], pad))], dim=-1)
    return tokens, ok
