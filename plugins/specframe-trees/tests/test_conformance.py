"""The conformance kit on every component of specframe-trees (builders, pruners, correctors)."""

from __future__ import annotations

from specframe.testing.conformance import ConformanceCase, ConformanceSuite


class TestTreesConformance(ConformanceSuite):
    plugin = "trees"
    cases = (
        ConformanceCase("corrector", "random_gru"),
        ConformanceCase("corrector", "random_gru", config={"low_rank": False, "dtype": "float64"}, variant="direct"),
        ConformanceCase("corrector", "random_markov"),
        ConformanceCase("corrector", "random_markov", config={"variant": "rnn"}, variant="rnn"),
        ConformanceCase("tree_builder", "dartree"),
        ConformanceCase("tree_builder", "dartree", config={"mode": "pruned", "width": 3}, variant="pruned"),
        ConformanceCase("pruner", "deferred_topb"),
        ConformanceCase("pruner", "deferred_topb", config={"beta": 0.0}, variant="beta0"),
    )
