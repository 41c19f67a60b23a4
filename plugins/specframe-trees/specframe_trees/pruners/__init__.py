"""Pruners: `none` and `deferred_topb` (DARTree's deferred global top-B)."""

from specframe_trees.pruners.deferred_topb import DeferredTopBConfig, DeferredTopBPruner
from specframe_trees.pruners.none import NoPruneConfig, NoPruner

__all__ = ["DeferredTopBConfig", "DeferredTopBPruner", "NoPruneConfig", "NoPruner"]
