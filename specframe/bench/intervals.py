"""The median of per-prompt (or per-repeat) figures with a percentile bootstrap interval.

A published speed figure is a median with its interval: the median because one slow prompt (a page fault, a
neighbour's burst) moves a mean but not a median, the interval because 20 prompts leave room for chance.

Method: draw ``resamples`` samples of ``n`` values with replacement (seeded, ``numpy.random.default_rng``), take
each sample's median, and report the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those
medians. Worked example: values ``[1.0, 1.2, 1.4]`` give the median 1.2; the resampled medians can only be 1.0,
1.2 or 1.4, so the 95 % interval is [1.0, 1.4].
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specframe.metrics.speedup import Estimate


def median_estimate(values: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95,
                    seed: int = 0) -> Estimate:
    """The median of ``values`` with its bootstrap interval (NaN for no values; the value itself for one)."""
    data = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)  # [n]
    if data.size == 0:
        return Estimate(math.nan)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, data.size, size=(resamples, data.size))  # [resamples, n]
    medians = np.median(data[draws], axis=1)  # [resamples]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(medians, [alpha, 1.0 - alpha])
    return Estimate(float(np.median(data)), float(low), float(high), int(data.size))
