"""Registration of the tree stages (entry point ``trees`` in the ``specframe`` group).

Correctors: ``random_gru``, ``random_markov``, ``random_path_selector``, ``random_lilicorr``. Tree builders:
``heap``, ``heap_sequential``, ``dartree``, ``chain_then_heap``, ``pctree``, ``accum_logp``, ``top2gap_fanout``
(JetSpec). Pruners: ``deferred_topb``, ``depth_rank_histogram`` (JetSpec), ``taps`` (TAPS). Plus a
``specframe_validate_pipeline`` check (see :mod:`specframe_trees.validation`).

Capabilities of the learned correctors are the most any of their configurations needs: ``random_markov``
is ``stateful`` (its rnn variant) and ``needs_features`` (gated and rnn); vanilla needs neither. Neither
needs logits unless ``normalize: full_vocab``, which the validation hook checks against the drafter. The path
selector and the lattice reranker read the drafter's features and condition on the parent token (path-dependent)
without a per-node state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from specframe.plugins import hookimpl
from specframe.registry import ComponentRegistry, ComponentSpec, CorrectorCapabilities
from specframe_trees.builders.chain_then_heap import ChainThenHeapConfig, build_chain_then_heap
from specframe_trees.builders.dartree import DARTreeConfig, build_dartree
from specframe_trees.builders.fanout_cap import (
    AccumLogPConfig,
    Top2GapFanoutConfig,
    build_accum_logp,
    build_top2gap_fanout,
)
from specframe_trees.builders.heap import HeapConfig, build_heap
from specframe_trees.builders.heap_sequential import HeapSequentialConfig, build_heap_sequential
from specframe_trees.builders.pctree import PCTreeConfig, build_pctree
from specframe_trees.correctors.random_heads import (
    RandomGRUConfig,
    RandomLiLiCorrConfig,
    RandomMarkovConfig,
    RandomPathSelectorConfig,
    build_random_gru,
    build_random_lilicorr,
    build_random_markov,
    build_random_path_selector,
)
from specframe_trees.pruners.deferred_topb import DeferredTopBConfig, build_deferred_topb
from specframe_trees.pruners.depth_rank_histogram import DepthRankHistogramConfig, build_depth_rank_histogram
from specframe_trees.pruners.taps import TapsConfig, build_taps
from specframe_trees.validation import pipeline_problems

LEARNED_CORRECTOR = CorrectorCapabilities(stateful=True, needs_features=True, path_dependent=True)
#: The path selector and the lattice reranker: features in, the parent token as the only path information.
PARENT_CONDITIONED = CorrectorCapabilities(needs_features=True, path_dependent=True)


@hookimpl
def specframe_correctors() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="corrector", name="random_gru", config=RandomGRUConfig, factory=build_random_gru,
        capabilities=LEARNED_CORRECTOR,
        summary="Domino GRU correction head with random weights (tests, benchmarks)",
    )
    yield ComponentSpec(
        kind="corrector", name="random_markov", config=RandomMarkovConfig, factory=build_random_markov,
        capabilities=LEARNED_CORRECTOR,
        summary="DSpark Markov head (vanilla/gated/rnn) with random weights (tests, benchmarks)",
    )
    yield ComponentSpec(
        kind="corrector", name="random_path_selector", config=RandomPathSelectorConfig,
        factory=build_random_path_selector, capabilities=PARENT_CONDITIONED,
        summary="DFlash2 path selector (bilinear predecessor x candidate score) with random weights (tests)",
    )
    yield ComponentSpec(
        kind="corrector", name="random_lilicorr", config=RandomLiLiCorrConfig, factory=build_random_lilicorr,
        capabilities=PARENT_CONDITIONED,
        summary="LiLiCorr candidate-lattice reranker (2-layer lattice transformer) with random weights (tests)",
    )


@hookimpl
def specframe_tree_builders() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="tree_builder", name="heap", config=HeapConfig, factory=build_heap,
        summary="DDTree: top-B prefixes under the drafter's marginals (ignores the corrector)",
    )
    yield ComponentSpec(
        kind="tree_builder", name="heap_sequential", config=HeapSequentialConfig, factory=build_heap_sequential,
        summary="best-first heap calling the corrector once per popped node (slow baseline)",
    )
    yield ComponentSpec(
        kind="tree_builder", name="dartree", config=DARTreeConfig, factory=build_dartree,
        summary="DARTree: depth-wise batched expansion, one corrector call per depth",
    )
    yield ComponentSpec(
        kind="tree_builder", name="chain_then_heap", config=ChainThenHeapConfig, factory=build_chain_then_heap,
        summary="Domino-chain + DDTree: heap over the corrected rows along the greedy chain",
    )
    yield ComponentSpec(
        kind="tree_builder", name="pctree", config=PCTreeConfig, factory=build_pctree,
        summary="PCTree: a fixed number of parent-conditioned children per node, ranked by path score",
    )
    yield ComponentSpec(
        kind="tree_builder", name="accum_logp", config=AccumLogPConfig, factory=build_accum_logp,
        summary="JetSpec's baseline: best-first heap adding every next-depth candidate under the popped node",
    )
    yield ComponentSpec(
        kind="tree_builder", name="top2gap_fanout", config=Top2GapFanoutConfig, factory=build_top2gap_fanout,
        summary="JetSpec: fan-out per depth capped by the drafter's top-2 log-prob gap (sigmoid schedule)",
    )


@hookimpl
def specframe_pruners() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="pruner", name="deferred_topb", config=DeferredTopBConfig, factory=build_deferred_topb,
        summary="global top-B by path score + beta * depth (beta <= 0, Lemma 1)",
    )
    yield ComponentSpec(
        kind="pruner", name="depth_rank_histogram", config=DepthRankHistogramConfig,
        factory=build_depth_rank_histogram,
        summary="JetSpec's per-depth fan-out cap from an offline depth x rank acceptance profile (how many ranks "
                "reach tau), applied as a pruner over an over-expanded tree, then top-B by path log-prob; or top-B "
                "by the profile's path product",
    )
    yield ComponentSpec(
        kind="pruner", name="taps", config=TapsConfig, factory=build_taps,
        summary="TAPS (our reading of the abstract): global top-B by path-conditioned acceptance (marginals "
                "discounted below a non-top sibling)",
    )


@hookimpl
def specframe_validate_pipeline(config: Any, registry: ComponentRegistry) -> list[str]:
    return list(pipeline_problems(config, registry))
