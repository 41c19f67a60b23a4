"""Pruners: `deferred_topb` (DARTree's deferred global top-B); `none` is built into specframe."""

from specframe_trees.pruners.deferred_topb import DeferredTopBConfig, DeferredTopBPruner

__all__ = ["DeferredTopBConfig", "DeferredTopBPruner"]
