"""The conformance kit on every component of specframe-trees (builders, pruners, correctors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specframe.metrics.depth_rank import DepthRankCounts, dumps
from specframe.testing.conformance import ConformanceCase, ConformanceSuite


def depth_rank_profile(workdir: Path) -> dict[str, Any]:
    """A profile that prefers a first-level sibling to the chain (so the kept set is not the heap's)."""
    path = workdir / "profile.json"
    path.write_text(dumps(DepthRankCounts(trials=[10, 8, 6], accepted=[[4, 5, 1], [6, 1], [3]])))
    return {"profile": str(path)}


def depth_rank_path_product(workdir: Path) -> dict[str, Any]:
    """The same profile under the path-product rule."""
    return {**depth_rank_profile(workdir), "rule": "path_product"}


def depth_rank_tight_cap(workdir: Path) -> dict[str, Any]:
    """JetSpec's fan-out cap with a tau that caps every depth (caps [2, 1, 1])."""
    return {**depth_rank_profile(workdir), "rule": "fanout_cap", "tau": 0.2}


class TestTreesConformance(ConformanceSuite):
    plugin = "trees"
    cases = (
        ConformanceCase("corrector", "random_gru"),
        ConformanceCase("corrector", "random_gru", config={"low_rank": False, "dtype": "float64"}, variant="direct"),
        ConformanceCase("corrector", "random_markov"),
        ConformanceCase("corrector", "random_markov", config={"variant": "rnn"}, variant="rnn"),
        ConformanceCase("corrector", "random_path_selector"),
        ConformanceCase("corrector", "random_path_selector", config={"top_k": 2}, variant="top2"),
        ConformanceCase("corrector", "random_lilicorr"),
        ConformanceCase("corrector", "random_lilicorr", config={"candidate_topk": 2, "num_slots": 4},
                        variant="k2-s4"),
        ConformanceCase("tree_builder", "dartree"),
        ConformanceCase("tree_builder", "dartree", config={"mode": "pruned", "width": 3}, variant="pruned"),
        ConformanceCase("tree_builder", "pctree"),
        ConformanceCase("tree_builder", "pctree", config={"children": [1], "keep_spine": False, "width": 2},
                        variant="chain-by-score"),
        ConformanceCase("tree_builder", "accum_logp"),
        ConformanceCase("tree_builder", "top2gap_fanout"),
        ConformanceCase("tree_builder", "top2gap_fanout", config={"beta": 4.0, "gap0": 0.0, "candidates": 3},
                        variant="narrow"),
        ConformanceCase("pruner", "deferred_topb"),
        ConformanceCase("pruner", "deferred_topb", config={"beta": 0.0}, variant="beta0"),
        ConformanceCase("pruner", "taps"),
        ConformanceCase("pruner", "taps", config={"sibling_discount": 1.0}, variant="marginals"),
        ConformanceCase("pruner", "depth_rank_histogram", config=depth_rank_profile),
        ConformanceCase("pruner", "depth_rank_histogram", config=depth_rank_tight_cap, variant="tight-cap"),
        ConformanceCase("pruner", "depth_rank_histogram", config=depth_rank_path_product, variant="path-product"),
    )
