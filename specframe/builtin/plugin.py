"""Registration of the built-in stages (plugin ``builtin``, always registered by :class:`PluginHost`).

It registers stages only: the core's commands are added by :func:`specframe.cli.make_cli`, and the sections a
pipeline file may leave out are named in :data:`specframe.config.pipeline.STAGE_DEFAULTS`.
"""

from __future__ import annotations

from collections.abc import Iterator

from specframe.builtin.chain import ChainConfig, build_chain
from specframe.builtin.identity import IdentityConfig, build_identity
from specframe.builtin.no_drafter import NoDraftConfig, NoDrafter
from specframe.builtin.no_pruner import NoPruneConfig, build_no_pruner
from specframe.hookspecs import hookimpl
from specframe.registry import ComponentSpec, PrunerCapabilities, TreeBuilderCapabilities


@hookimpl
def specframe_drafters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="drafter", name="none", config=NoDraftConfig, factory=lambda cfg, ctx: NoDrafter(),
        summary="no draft: plain autoregressive decoding through the same loop (the speedup baseline)",
    )


@hookimpl
def specframe_correctors() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="corrector", name="identity", config=IdentityConfig, factory=build_identity,
        summary="no correction: the drafter's per-depth marginals for every node",
    )


@hookimpl
def specframe_tree_builders() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="tree_builder", name="chain", config=ChainConfig, factory=build_chain,
        capabilities=TreeBuilderCapabilities(produces_tree=False),
        summary="one path: the best corrected candidate at each depth",
    )


@hookimpl
def specframe_pruners() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="pruner", name="none", config=NoPruneConfig, factory=build_no_pruner,
        capabilities=PrunerCapabilities(keeps_child_prefix=True),
        summary="keep the tree as built",
    )
