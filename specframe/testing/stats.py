"""Statistics for distributional losslessness tests: G-test, proportion test, exact toy laws.

A lossless verifier must emit tokens whose law equals the target's. The tests draw many rounds (one batch row
per round, all rows in one vectorised call), count the first two emitted tokens and compare the counts with the
exact law computed from a :class:`~specframe.testing.toy.ToyTarget` table::

    first, second = first_two_tokens(result, tree, target, params, generator=torch.Generator().manual_seed(9))
    law = exact_first_two_law(target, prev2=3, root=1, params=params)     # [V, V], sums to 1
    res = g_test(joint_counts(first, second, target.vocab_size), law)
    assert res.p_value > 1e-6

Everything here is float64 and uses no global RNG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specframe.sampling import probs, sample, uniforms
from specframe.testing.toy import ToyTarget
from specframe.tree import DraftTree
from specframe.types import SamplingParams, VerifyResult

__all__ = [
    "GTestResult",
    "chi2_sf",
    "conditional_g_test",
    "exact_first_two_law",
    "first_two_tokens",
    "g_test",
    "joint_counts",
    "proportion_test",
]


@dataclass(frozen=True)
class GTestResult:
    """Outcome of a G-test of observed counts against a known law.

    Attributes:
        statistic: ``G = 2 * sum O * ln(O / E)`` over the (pooled) cells.
        dof: degrees of freedom (pooled cells of positive expected mass, minus one).
        p_value: upper-tail chi-square probability of ``G``; 0 when ``impossible > 0``.
        impossible: observations that fell in cells of zero expected probability.
        n: total observations.
    """

    statistic: float
    dof: int
    p_value: float
    impossible: int
    n: int


def chi2_sf(x: float, dof: int) -> float:
    """Survival function of the chi-square distribution, ``P(X >= x)`` for ``dof`` degrees of freedom."""
    if dof <= 0:
        return 1.0
    a = torch.tensor(dof / 2.0, dtype=torch.float64)
    return float(torch.special.gammaincc(a, torch.tensor(max(x, 0.0) / 2.0, dtype=torch.float64)))


def g_test(observed: torch.Tensor, expected_probs: torch.Tensor, *, min_expected: float = 5.0) -> GTestResult:
    """G-test (log-likelihood ratio) of ``observed`` counts against ``expected_probs`` (same shape).

    Cells whose expected count is below ``min_expected`` are pooled into one cell so the chi-square
    approximation stays valid. Any observation in a zero-probability cell makes ``p_value`` 0.
    """
    obs = observed.reshape(-1).to(torch.float64)
    law = expected_probs.reshape(-1).to(torch.float64)
    law = law / law.sum()
    n = float(obs.sum())
    impossible = int(obs[law <= 0].sum())
    if impossible > 0:
        return GTestResult(statistic=math.inf, dof=0, p_value=0.0, impossible=impossible, n=int(n))
    expected = law * n
    big = expected >= min_expected
    small = (~big) & (law > 0)
    obs_cells = [obs[big]]
    exp_cells = [expected[big]]
    if bool(small.any()):
        obs_cells.append(obs[small].sum().view(1))
        exp_cells.append(expected[small].sum().view(1))
    o = torch.cat(obs_cells)
    e = torch.cat(exp_cells)
    positive = o > 0
    g = 2.0 * float((o[positive] * torch.log(o[positive] / e[positive])).sum())
    dof = int(o.numel()) - 1
    return GTestResult(statistic=g, dof=dof, p_value=chi2_sf(g, dof), impossible=0, n=int(n))


def conditional_g_test(observed: torch.Tensor, conditional: torch.Tensor, *,
                       min_expected: float = 5.0) -> GTestResult:
    """G-test of counts ``observed`` ``[C, V]`` (C contexts, V outcomes) against the conditional law ``conditional``
    ``[C, V]`` (each row sums to 1, or is all zero for a context never seen), each context's count taken as given.

    The expected counts of a context are its observed count times its law, so the C context margins are fitted
    from the data: the statistic is the sum of the per-context G statistics (each context's cells pooled as in
    :func:`g_test`), and its degrees of freedom are the sum of ``cells - 1`` over the contexts, i.e. the cells
    minus the contexts (not the cells minus one, which makes the test conservative and blunts its controls).

    Worked example: two contexts with laws ``[0.5, 0.5]`` and ``[0.9, 0.1]`` seen 100 and 50 times have expected
    counts ``[50, 50]`` and ``[45, 5]``: 4 cells, 2 contexts, 2 degrees of freedom.
    """
    obs = observed.reshape(observed.shape[0], -1).to(torch.float64)  # [C, V]
    law = conditional.reshape(obs.shape).to(torch.float64)
    statistic, dof, impossible = 0.0, 0, 0
    for row, row_law in zip(obs, law, strict=True):
        n = float(row.sum())
        if n == 0:
            continue
        if float(row_law.sum()) <= 0:
            impossible += int(n)
            continue
        result = g_test(row, row_law, min_expected=min_expected)
        impossible += result.impossible
        if result.impossible == 0:
            statistic += result.statistic
            dof += result.dof
    total = int(obs.sum())
    if impossible:
        return GTestResult(statistic=math.inf, dof=dof, p_value=0.0, impossible=impossible, n=total)
    return GTestResult(statistic=statistic, dof=dof, p_value=chi2_sf(statistic, dof), impossible=0, n=total)


def proportion_test(successes: int, n: int, p: float) -> float:
    """Two-sided normal-approximation p-value of ``successes`` out of ``n`` against probability ``p``."""
    if n <= 0:
        raise ValueError("n must be positive")
    sd = math.sqrt(max(p * (1.0 - p), 1e-300) / n)
    z = abs(successes / n - p) / sd
    return math.erfc(z / math.sqrt(2.0))


def joint_counts(first: torch.Tensor, second: torch.Tensor, vocab_size: int) -> torch.Tensor:  # [V, V]
    """Counts of the pairs ``(first[i], second[i])`` as a ``[V, V]`` float64 table."""
    flat = first.long() * vocab_size + second.long()
    return torch.bincount(flat, minlength=vocab_size * vocab_size).view(vocab_size, vocab_size).double()


def exact_first_two_law(target: ToyTarget, prev2: int, root: int, params: SamplingParams) -> torch.Tensor:  # [V, V]
    """Exact joint law of the next two tokens after a context ending in ``(prev2, root)``.

    ``law[a, b] = p(a | prev2, root) * p(b | root, a)``, both processed by :mod:`specframe.sampling`.
    """
    v = target.vocab_size
    first = probs(target.next_logits(torch.tensor(prev2), torch.tensor(root)), params).double()  # [V]
    second = probs(target.next_logits(torch.full((v,), root), torch.arange(v)), params).double()  # [V, V]
    return first[:, None] * second


def first_two_tokens(
    result: VerifyResult,
    tree: DraftTree,
    target: ToyTarget,
    params: SamplingParams,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:  # ([B], [B]) int64
    """The first two tokens each row emits after the root in the round that produced ``result``.

    When a row emits only its bonus token, the second token is drawn from the exact target conditional
    ``p(. | root, bonus)`` with ``generator`` (a stream separate from the verifier's), which is what the next
    round would emit if the pipeline is lossless.
    """
    tokens = tree.tokens.cpu()
    nodes = result.accepted_nodes.cpu()
    accepted = result.num_accepted.cpu()
    bonus = result.bonus_token.cpu()
    root = tokens[:, 0]

    def accepted_token(k: int) -> torch.Tensor:  # [B] token of the k-th accepted draft (bonus if none)
        if nodes.shape[1] <= k:
            return bonus
        return torch.gather(tokens, 1, nodes[:, k : k + 1].clamp(min=0)).squeeze(1)

    depth1, depth2 = accepted_token(1), accepted_token(2)
    first = torch.where(accepted >= 1, depth1, bonus)
    second_in_round = torch.where(accepted >= 2, depth2, bonus)
    logits = target.next_logits(root, first)  # [B, V]
    fresh = sample(logits, params, uniforms(tuple(logits.shape[:-1]), generator))  # [B]
    second = torch.where(accepted >= 1, second_in_round, fresh)
    return first, second
