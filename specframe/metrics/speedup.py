"""Speedup of a method over the autoregressive baseline, from paired runs on the same prompts.

Both arms count generated token ids identically (the decode loop's ``new_tokens``) and run on the same
prompts and hardware. Three definitions (docs/metrics.md, docs/concepts/benchmark-protocol.md):

* **aggregate** = (Σ tokens_m / Σ time_m) / (Σ tokens_b / Σ time_b) — total throughput ratio (DARTree);
* **geometric mean of paired ratios** — ratio_i = (tokens_m,i / time_m,i) / (tokens_b,i / time_b,i) per
  prompt, summarised by exp(mean(log ratio_i)); robust to a few long responses dominating the sums;
* **TPOT** = mean_i TPOT_b,i / mean_i TPOT_m,i with TPOT = decode time / decoded tokens (prefill and its token
  excluded) — DFlash / DDTree's definition.

Confidence intervals are percentile bootstrap intervals over prompts (pairs resampled with replacement) from a
seeded ``numpy.random.Generator``, so a report is reproducible.

Worked example: two prompts whose method/baseline throughput ratios are 2 and 8 have a geometric-mean
speedup of 4; with 100 tokens each in 1 s and 2 s for the method and 2 s and 16 s for the baseline, the
aggregate speedup is (200 / 3) / (200 / 18) = 6.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairedRun:
    """One prompt run by the method and by the baseline."""

    tokens: int  # method's generated tokens
    seconds: float  # method's wall time
    base_tokens: int
    base_seconds: float

    @property
    def ratio(self) -> float:
        """Per-prompt throughput ratio, method over baseline."""
        return (self.tokens / self.seconds) / (self.base_tokens / self.base_seconds)


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a bootstrap confidence interval (NaN bounds when not computed)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    n: int = 0

    def format(self, digits: int = 2, suffix: str = "×") -> str:
        if math.isnan(self.value):
            return "—"
        text = f"{self.value:.{digits}f}{suffix}"
        if not math.isnan(self.low):
            text += f" [{self.low:.{digits}f}, {self.high:.{digits}f}]"
        return text


def _valid(pairs: Sequence[PairedRun]) -> list[PairedRun]:
    return [p for p in pairs if min(p.tokens, p.base_tokens) > 0 and min(p.seconds, p.base_seconds) > 0]


def aggregate_speedup(pairs: Sequence[PairedRun]) -> float:
    pairs = _valid(pairs)
    if not pairs:
        return math.nan
    method = sum(p.tokens for p in pairs) / sum(p.seconds for p in pairs)
    base = sum(p.base_tokens for p in pairs) / sum(p.base_seconds for p in pairs)
    return method / base


def geometric_mean(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_speedup(pairs: Sequence[PairedRun]) -> float:
    return geometric_mean([p.ratio for p in _valid(pairs)])


def tpot_speedup(method_tpot: Sequence[float], base_tpot: Sequence[float]) -> float:
    """mean(TPOT baseline) / mean(TPOT method); NaN if either side is empty."""
    if not method_tpot or not base_tpot:
        return math.nan
    return (sum(base_tpot) / len(base_tpot)) / (sum(method_tpot) / len(method_tpot))


def bootstrap_interval(pairs: Sequence[PairedRun], statistic: Callable[[np.ndarray], np.ndarray], *,
                       resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over prompt resamples.

    ``statistic`` maps a ``[resamples, n, 4]`` array (tokens, seconds, base_tokens, base_seconds per drawn
    pair) to ``[resamples]`` values; all resamples are evaluated in one vectorised call.
    """
    if not pairs:
        return math.nan, math.nan
    data = np.array([[p.tokens, p.seconds, p.base_tokens, p.base_seconds] for p in pairs], dtype=np.float64)  # [n, 4]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(pairs), size=(resamples, len(pairs)))  # [resamples, n]
    values = statistic(data[draws])  # [resamples]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _aggregate_stat(sample: np.ndarray) -> np.ndarray:  # [R, n, 4] -> [R]
    totals = sample.sum(axis=1)  # [R, 4]
    return (totals[:, 0] / totals[:, 1]) / (totals[:, 2] / totals[:, 3])


def _geomean_stat(sample: np.ndarray) -> np.ndarray:  # [R, n, 4] -> [R]
    log_ratio = np.log(sample[..., 0] / sample[..., 1]) - np.log(sample[..., 2] / sample[..., 3])  # [R, n]
    return np.exp(log_ratio.mean(axis=1))


def aggregate_estimate(pairs: Sequence[PairedRun], *, resamples: int = 2000, confidence: float = 0.95,
                       seed: int = 0) -> Estimate:
    pairs = _valid(pairs)
    low, high = bootstrap_interval(pairs, _aggregate_stat, resamples=resamples, confidence=confidence, seed=seed)
    return Estimate(aggregate_speedup(pairs), low, high, len(pairs))


def geomean_estimate(pairs: Sequence[PairedRun], *, resamples: int = 2000, confidence: float = 0.95,
                     seed: int = 0) -> Estimate:
    pairs = _valid(pairs)
    low, high = bootstrap_interval(pairs, _geomean_stat, resamples=resamples, confidence=confidence, seed=seed)
    return Estimate(geomean_speedup(pairs), low, high, len(pairs))


def expected_speedup(tau: float, ar_step_seconds: float, round_seconds: float) -> float:
    """τ · T_ar / T_round: the speedup the measured τ and round time imply (explains "τ up, speedup down")."""
    if round_seconds <= 0 or math.isnan(tau):
        return math.nan
    return tau * ar_step_seconds / round_seconds
