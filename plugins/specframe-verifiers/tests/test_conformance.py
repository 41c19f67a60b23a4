"""The conformance kit on every component of specframe-verifiers: the verifiers (including the G-test of each
lossless one in its declared regimes) and the sampled tree builders."""

from __future__ import annotations

from specframe.testing.conformance import ConformanceCase, ConformanceSuite


class TestVerifiersConformance(ConformanceSuite):
    plugin = "verifiers"
    cases = (
        ConformanceCase("tree_builder", "sampled_tree"),
        ConformanceCase("tree_builder", "sampled_tree", config={"branching": [2, 2]}, variant="2x2"),
        ConformanceCase("tree_builder", "sampled_chain", config={"depth": 3}, variant="depth3"),
        ConformanceCase("tree_builder", "sampled_chain"),
    )
