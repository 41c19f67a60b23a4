"""Registration of the built-in stages and the core's commands (plugin ``builtin``, always registered by
:class:`PluginHost`).

``STAGE_DEFAULTS`` are the sections a pipeline file may leave out; they name built-in components only.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from specframe.builtin.chain import ChainConfig, build_chain
from specframe.builtin.identity import IdentityConfig, build_identity
from specframe.builtin.no_drafter import NoDraftConfig, NoDrafter
from specframe.builtin.no_pruner import NoPruneConfig, build_no_pruner
from specframe.config.base import ComponentConfig
from specframe.plugins import hookimpl
from specframe.registry import ComponentSpec, PrunerCapabilities, TreeBuilderCapabilities

#: Stage sections used when a pipeline file leaves the stage out (the verifier default ``auto`` is core).
STAGE_DEFAULTS: dict[str, type[ComponentConfig]] = {
    "corrector": IdentityConfig,
    "tree_builder": ChainConfig,
    "pruner": NoPruneConfig,
}


@hookimpl
def specframe_register_commands(cli: click.Group) -> None:
    from specframe.cli import register_core_commands

    register_core_commands(cli)


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
