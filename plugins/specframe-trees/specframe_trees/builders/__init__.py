"""Tree builders: `heap` (DDTree), `heap_sequential`, `dartree`, `chain_then_heap`, `pctree` (`chain` is built in)."""

from specframe_trees.builders.chain_then_heap import ChainThenHeapBuilder, ChainThenHeapConfig
from specframe_trees.builders.dartree import DARTreeBuilder, DARTreeConfig
from specframe_trees.builders.heap import HeapBuilder, HeapConfig, best_first_prefixes
from specframe_trees.builders.heap_sequential import HeapSequentialBuilder, HeapSequentialConfig
from specframe_trees.builders.pctree import PCTreeBuilder, PCTreeConfig

__all__ = [
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
    "best_first_prefixes",
]
