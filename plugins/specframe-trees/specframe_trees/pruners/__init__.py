"""Pruners: `deferred_topb` (DARTree's deferred global top-B), `depth_rank_histogram` (JetSpec's offline
profile), `taps` (TAPS); `none` is built into specframe."""

from specframe_trees.pruners.deferred_topb import DeferredTopBConfig, DeferredTopBPruner
from specframe_trees.pruners.depth_rank_histogram import DepthRankHistogramConfig, DepthRankHistogramPruner
from specframe_trees.pruners.taps import TapsConfig, TapsPruner, path_conditioned_log_acceptance

__all__ = ["DeferredTopBConfig", "DeferredTopBPruner", "DepthRankHistogramConfig", "DepthRankHistogramPruner",
           "TapsConfig", "TapsPruner", "path_conditioned_log_acceptance"]
