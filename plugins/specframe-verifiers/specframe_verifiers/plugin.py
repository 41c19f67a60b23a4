"""Registration of the verifiers and sampled tree builders (entry point ``verifiers`` in group ``specframe``).

Capabilities are declared honestly: ``greedy`` is exact only at temperature 0; ``walk`` needs no draft law and is
exact for any tree built independently of the target's draws; the rejection verifiers need ``child_q`` and
hence sampled trees.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import specframe
from specframe.config.base import ComponentConfig
from specframe.interfaces import BuildContext
from specframe.registry import ComponentSpec, TreeBuilderCapabilities, VerifierCapabilities
from specframe_verifiers.chain_rejection import ChainRejectionVerifier
from specframe_verifiers.sampled_builders import SampledChainConfig, SampledTreeBuilder, SampledTreeConfig
from specframe_verifiers.tree_rejection import TreeRejectionVerifier
from specframe_verifiers.walk import GreedyVerifier, WalkVerifier

BOTH_REGIMES = frozenset({"deterministic", "sampled"})


class GreedyConfig(ComponentConfig):
    """Accept the longest path that follows the target's argmax (temperature 0)."""

    type: Literal["greedy"] = "greedy"


class WalkConfig(ComponentConfig):
    """Sample the target at every node and follow the matching children (WALK)."""

    type: Literal["walk"] = "walk"


class ChainRejectionConfig(ComponentConfig):
    """Speculative sampling on a chain sampled from a known draft law: accept with min(1, p/q)."""

    type: Literal["chain_rejection"] = "chain_rejection"


class TreeRejectionConfig(ComponentConfig):
    """Recursive rejection sampling over siblings sampled without replacement from a known draft law."""

    type: Literal["tree_rejection"] = "tree_rejection"


def _vocab_size(ctx: BuildContext) -> int | None:
    return ctx.target.vocab_size if ctx.target is not None else None


@specframe.hookimpl
def specframe_verifiers() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="verifier", name="greedy", config=GreedyConfig, factory=lambda cfg, ctx: GreedyVerifier(),
        capabilities=VerifierCapabilities(lossless=True, supported_regimes=BOTH_REGIMES, greedy_only=True),
        summary="walk the tree along the target's argmax (exact at temperature 0)",
    )
    yield ComponentSpec(
        kind="verifier", name="walk", config=WalkConfig, factory=lambda cfg, ctx: WalkVerifier(),
        capabilities=VerifierCapabilities(lossless=True, supported_regimes=BOTH_REGIMES),
        summary="draw the target at every node, follow matching children (WALK)",
    )
    yield ComponentSpec(
        kind="verifier", name="chain_rejection", config=ChainRejectionConfig,
        factory=lambda cfg, ctx: ChainRejectionVerifier(),
        capabilities=VerifierCapabilities(lossless=True, supported_regimes=frozenset({"sampled"}), requires_q=True,
                                  chain_only=True),
        summary="speculative sampling on a sampled chain: accept w.p. min(1, p/q), else a residual token",
    )
    yield ComponentSpec(
        kind="verifier", name="tree_rejection", config=TreeRejectionConfig,
        factory=lambda cfg, ctx: TreeRejectionVerifier(),
        capabilities=VerifierCapabilities(lossless=True, supported_regimes=frozenset({"sampled"}), requires_q=True),
        summary="recursive rejection over siblings sampled without replacement",
    )


@specframe.hookimpl
def specframe_tree_builders() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="tree_builder", name="sampled_chain", config=SampledChainConfig,
        factory=lambda cfg, ctx: SampledTreeBuilder(
            None if cfg.depth is None else (1,) * cfg.depth, _vocab_size(ctx), config_field="tree_builder.depth"),
        capabilities=TreeBuilderCapabilities(draft_regime="sampled", produces_tree=False),
        summary="a chain of drafts sampled from the corrected draft law (records q)",
    )
    yield ComponentSpec(
        kind="tree_builder", name="sampled_tree", config=SampledTreeConfig,
        factory=lambda cfg, ctx: SampledTreeBuilder(cfg.branching, _vocab_size(ctx)),
        capabilities=TreeBuilderCapabilities(draft_regime="sampled"),
        summary="children sampled without replacement per depth, e.g. branching [3, 2, 1] (records q)",
    )
