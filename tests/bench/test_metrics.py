"""Metric formulas on hand-made rounds: τ (pooled and per response), per-depth rates, speedups, bootstrap CIs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specframe.metrics.acceptance import accept_histogram, depth_rates, tau_per_response, tau_pooled
from specframe.metrics.records import GenerationResult, RoundRecord
from specframe.metrics.speedup import (
    PairedRun,
    aggregate_estimate,
    aggregate_speedup,
    expected_speedup,
    geomean_estimate,
    geomean_speedup,
    geometric_mean,
    tpot_speedup,
)


def test_tau_worked_example_and_agreement_with_generation_result() -> None:
    accepted, committed = [0, 2, 3, 1], [1, 3, 4, 2]
    assert tau_pooled([committed]) == 2.5
    rounds = [RoundRecord(nodes=4, depth=4, accepted=a, committed=c) for a, c in zip(accepted, committed, strict=True)]
    result = GenerationResult(tokens=list(range(11)), text=None, prompt_len=3, rounds=rounds, prefill_ns=1,
                              total_ns=2, stop_reason="length")
    assert result.tau == tau_pooled([result.accept_lengths()])


def test_tau_pooled_versus_per_response() -> None:
    short, long = [4], [1, 1, 1, 1, 1, 1, 1, 1, 1]  # τ 4 over one round, τ 1 over nine
    assert tau_pooled([short, long]) == pytest.approx(13 / 10)
    assert tau_per_response([short, long]) == pytest.approx((4 + 1) / 2)
    assert tau_per_response([[], short]) == 4  # a response without rounds has no τ
    assert math.isnan(tau_pooled([])) and math.isnan(tau_per_response([[]]))


def test_depth_rates_worked_example() -> None:
    rates = depth_rates([0, 2, 3, 1])
    assert rates.rounds == 4 and rates.reached == (3, 2, 1)
    assert rates.unconditional == pytest.approx((3 / 4, 2 / 4, 1 / 4))
    assert rates.conditional == pytest.approx((3 / 4, 2 / 3, 1 / 2))
    assert rates.expected_tau == pytest.approx(2.5)  # = τ when no round was trimmed


def test_depth_rates_padding_and_empty_depths() -> None:
    rates = depth_rates([1, 1, 0], max_depth=3)
    assert rates.unconditional == pytest.approx((2 / 3, 0.0, 0.0))
    assert rates.conditional[:2] == pytest.approx((2 / 3, 0.0)) and math.isnan(rates.conditional[2])
    assert depth_rates([0, 0]).unconditional == ()  # plain decoding: no depth is ever reached
    assert accept_histogram([0, 2, 2, 3]) == [1, 0, 2, 1]


def test_tau_equals_one_plus_sum_of_unconditional_rates_on_random_rounds() -> None:
    rng = np.random.default_rng(5)
    accepted = rng.integers(0, 9, size=500).tolist()
    committed = [a + 1 for a in accepted]
    assert tau_pooled([committed]) == pytest.approx(depth_rates(accepted).expected_tau)


def test_speedup_worked_example() -> None:
    pairs = [PairedRun(100, 1.0, 100, 2.0), PairedRun(100, 2.0, 100, 16.0)]  # ratios 2 and 8
    assert [p.ratio for p in pairs] == [2.0, 8.0]
    assert geomean_speedup(pairs) == pytest.approx(4.0)
    assert aggregate_speedup(pairs) == pytest.approx((200 / 3) / (200 / 18))
    assert geometric_mean([1.0, 4.0, 16.0]) == pytest.approx(4.0)


def test_speedup_counts_tokens_of_both_arms() -> None:
    # The method produced half the tokens in the same time: half the throughput, whatever its wall time says.
    assert aggregate_speedup([PairedRun(50, 1.0, 100, 1.0)]) == pytest.approx(0.5)
    assert math.isnan(aggregate_speedup([PairedRun(0, 1.0, 100, 1.0)]))  # unusable pairs are dropped


def test_tpot_and_expected_speedup() -> None:
    assert tpot_speedup([0.01, 0.03], [0.04, 0.08]) == pytest.approx(0.06 / 0.02)
    assert math.isnan(tpot_speedup([], [0.1]))
    assert expected_speedup(tau=4.0, ar_step_seconds=0.02, round_seconds=0.04) == pytest.approx(2.0)


def test_bootstrap_intervals_are_seeded_and_bracket_the_estimate() -> None:
    rng = np.random.default_rng(0)
    pairs = [PairedRun(100, float(t), 100, float(t * r)) for t, r in zip(rng.uniform(1, 3, 40),
                                                                         rng.lognormal(1.0, 0.3, 40), strict=True)]
    first = geomean_estimate(pairs, seed=7)
    assert first == geomean_estimate(pairs, seed=7)
    assert first != geomean_estimate(pairs, seed=8)
    assert first.low < first.value < first.high and first.n == 40
    agg = aggregate_estimate(pairs, seed=7)
    assert agg.low < agg.value < agg.high
    constant = geomean_estimate([PairedRun(10, 1.0, 10, 3.0)] * 5)
    assert (constant.low, constant.value, constant.high) == pytest.approx((3.0, 3.0, 3.0))


def test_bootstrap_interval_coverage_is_near_nominal() -> None:
    """Over many simulated benchmarks with a known geometric-mean speedup, ~95% of the CIs contain it."""
    rng = np.random.default_rng(1)
    truth, trials, hits = 2.5, 300, 0
    for trial in range(trials):
        ratios = np.exp(rng.normal(math.log(truth), 0.4, size=40))
        pairs = [PairedRun(100, 1.0, 100, float(r)) for r in ratios]
        est = geomean_estimate(pairs, resamples=500, seed=trial)
        hits += est.low <= truth <= est.high
    assert 0.88 <= hits / trials <= 0.99


def test_estimate_format() -> None:
    pairs = [PairedRun(10, 1.0, 10, 2.0), PairedRun(10, 1.0, 10, 4.0)]
    text = geomean_estimate(pairs).format()
    assert text.startswith("2.83× [") and text.endswith("]")
    assert aggregate_estimate([]).format() == "—"
