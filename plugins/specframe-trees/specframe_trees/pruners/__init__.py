"""Pruners: `deferred_topb` (DARTree's deferred global top-B), `depth_rank_histogram` (JetSpec's offline
profile); `none` is built into specframe."""

from specframe_trees.pruners.deferred_topb import DeferredTopBConfig, DeferredTopBPruner
from specframe_trees.pruners.depth_rank_histogram import DepthRankHistogramConfig, DepthRankHistogramPruner

__all__ = ["DeferredTopBConfig", "DeferredTopBPruner", "DepthRankHistogramConfig", "DepthRankHistogramPruner"]
