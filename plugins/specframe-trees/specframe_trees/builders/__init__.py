"""Tree builders: `heap` (DDTree), `heap_sequential`, `dartree`, `chain_then_heap`, `pctree`, `accum_logp` and
`top2gap_fanout` (JetSpec) (`chain` is built in)."""

from specframe_trees.builders.chain_then_heap import ChainThenHeapBuilder, ChainThenHeapConfig
from specframe_trees.builders.dartree import DARTreeBuilder, DARTreeConfig
from specframe_trees.builders.fanout_cap import (
    AccumLogPBuilder,
    AccumLogPConfig,
    Top2GapFanoutBuilder,
    Top2GapFanoutConfig,
)
from specframe_trees.builders.heap import HeapBuilder, HeapConfig, best_first_prefixes
from specframe_trees.builders.heap_sequential import HeapSequentialBuilder, HeapSequentialConfig
from specframe_trees.builders.pctree import PCTreeBuilder, PCTreeConfig

__all__ = [
    "AccumLogPBuilder",
    "AccumLogPConfig",
    "ChainThenHeapBuilder",
    "ChainThenHeapConfig",
    "DARTreeBuilder",
    "DARTreeConfig",
    "HeapBuilder",
    "HeapConfig",
    "HeapSequentialBuilder",
    "HeapSequentialConfig",
    "PCTreeBuilder",
    "PCTreeConfig",
    "Top2GapFanoutBuilder",
    "Top2GapFanoutConfig",
    "best_first_prefixes",
]
