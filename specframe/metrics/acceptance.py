"""Acceptance metrics from per-round records (docs/metrics.md).

Inputs are plain per-round lists so the same code serves live ``GenerationResult`` objects and result files:

* ``committed`` — tokens a round added to the output, bonus included (``a_r + 1``, trimmed at EOS or the
  length limit): Spec-Bench's ``accept_lengths``;
* ``accepted`` — draft tokens the verifier accepted (``a_r``, bonus excluded, untrimmed).

Definitions, over R rounds:

* **τ pooled** = Σ_r committed_r / R; **τ per response** = mean over responses of each response's pooled τ
  (what DFlash / DDTree / DARTree report). The token sampled from the prefill belongs to no round.
* **unconditional depth rate** u_d = #{r : a_r ≥ d} / R (vLLM's per-position acceptance);
* **conditional depth rate** c_d = #{r : a_r ≥ d} / #{r : a_r ≥ d − 1} (EAGLE's ``alpha``), NaN when no round
  reached depth d − 1. Without trimming, τ = 1 + Σ_d u_d.

Worked example: accepted = [0, 2, 3, 1], committed = [1, 3, 4, 2] → τ = 10 / 4 = 2.5;
u = [3/4, 2/4, 1/4], c = [3/4, 2/3, 1/2], and 1 + Σ u = 2.5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def tau_pooled(committed_per_response: Sequence[Sequence[int]]) -> float:
    """Σ committed / Σ rounds over all responses (NaN when there is no round)."""
    rounds = sum(len(c) for c in committed_per_response)
    return sum(sum(c) for c in committed_per_response) / rounds if rounds else math.nan


def tau_per_response(committed_per_response: Sequence[Sequence[int]]) -> float:
    """Mean over responses (with at least one round) of each response's Σ committed / rounds."""
    taus = [sum(c) / len(c) for c in committed_per_response if len(c)]
    return sum(taus) / len(taus) if taus else math.nan


@dataclass(frozen=True)
class DepthRates:
    """Per-depth acceptance: index ``d - 1`` holds depth ``d``."""

    rounds: int
    reached: tuple[int, ...]  # reached[d - 1] = rounds that accepted at least d draft tokens
    unconditional: tuple[float, ...]  # u_d
    conditional: tuple[float, ...]  # c_d (NaN where no round reached d - 1)

    @property
    def expected_tau(self) -> float:
        """1 + Σ_d u_d: τ if no round had been trimmed at EOS or the length limit."""
        return 1.0 + sum(self.unconditional)


def depth_rates(accepted: Sequence[int], max_depth: int | None = None) -> DepthRates:
    """Per-depth rates of a pooled list of per-round accepted counts, up to ``max_depth`` (default: deepest)."""
    rounds = len(accepted)
    deepest = max(accepted, default=0)
    depth = deepest if max_depth is None else max_depth
    histogram = [0] * (max(deepest, depth) + 1)
    for a in accepted:
        histogram[a] += 1
    reached = []
    running = rounds
    for d in range(1, depth + 1):
        running -= histogram[d - 1]  # rounds with a_r >= d
        reached.append(running)
    previous = [rounds, *reached][: len(reached)]
    unconditional = tuple(r / rounds if rounds else math.nan for r in reached)
    conditional = tuple(r / p if p else math.nan for r, p in zip(reached, previous, strict=True))
    return DepthRates(rounds=rounds, reached=tuple(reached), unconditional=unconditional, conditional=conditional)


def accept_histogram(accepted: Sequence[int]) -> list[int]:
    """``h[k]`` = rounds that accepted exactly ``k`` draft tokens (the accepted-depth histogram)."""
    histogram = [0] * (max(accepted, default=0) + 1)
    for a in accepted:
        histogram[a] += 1
    return histogram
