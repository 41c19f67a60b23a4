"""Hook specifications: the complete contract between specframe and its plugins.

Plugins implement these with ``@specframe.hookimpl`` and are found through the ``specframe`` entry-point
group. Every hook runs while a pipeline or the CLI is being built; none runs inside the decode loop.

Each docstring follows one template: what the hook is for, its parameters, what it returns and how results
are combined, an example plugin, and the version it was added in. ``docs/plugins/hooks.md`` is generated
from these docstrings and a test fails when a hook is undocumented or untested.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from specframe.registry import ComponentRegistry, ComponentSpec

hookspec = pluggy.HookspecMarker("specframe")
#: Marks a plugin's hook implementations (``specframe.hookimpl``; defined beside the specs so the built-in
#: plugin, which :class:`specframe.plugins.PluginHost` registers, does not import the host).
hookimpl = pluggy.HookimplMarker("specframe")


# ------------------------------------------------------------------------------------- registration
@hookspec
def specframe_target_adapters() -> Iterable[ComponentSpec]:
    """Register target-model adapters (the ``target:`` stage).

    Returns:
        An iterable of ``ComponentSpec(kind="target", ...)``. Results of all plugins are collected.

    Example plugin::

        @specframe.hookimpl
        def specframe_target_adapters():
            yield ComponentSpec(kind="target", name="hf", config=HFTargetConfig,
                                factory=build_hf_target, summary="Hugging Face causal LM")

    versionadded: 0.1
    """


@hookspec
def specframe_drafters() -> Iterable[ComponentSpec]:
    """Register drafters (the ``drafter:`` stage).

    Returns:
        An iterable of ``ComponentSpec(kind="drafter", ...)``. Results of all plugins are collected.

    Example plugin::

        @specframe.hookimpl
        def specframe_drafters():
            yield ComponentSpec(kind="drafter", name="ngram", config=NgramConfig,
                                factory=lambda cfg, ctx: NgramDrafter(cfg), summary="prompt lookup")

    versionadded: 0.1
    """


@hookspec
def specframe_correctors() -> Iterable[ComponentSpec]:
    """Register correctors (the ``corrector:`` stage), which rescore candidates along a path.

    Returns:
        An iterable of ``ComponentSpec(kind="corrector", ...)``. Results of all plugins are collected.

    Example plugin::

        @specframe.hookimpl
        def specframe_correctors():
            yield ComponentSpec(kind="corrector", name="identity", config=IdentityConfig,
                                factory=lambda cfg, ctx: IdentityCorrector(), summary="marginals")

    versionadded: 0.1
    """


@hookspec
def specframe_tree_builders() -> Iterable[ComponentSpec]:
    """Register tree builders (the ``tree_builder:`` stage).

    Returns:
        An iterable of ``ComponentSpec(kind="tree_builder", ...)``. Results of all plugins are collected.

    Example plugin::

        @specframe.hookimpl
        def specframe_tree_builders():
            yield ComponentSpec(kind="tree_builder", name="chain", config=ChainConfig,
                                factory=lambda cfg, ctx: ChainBuilder(cfg), summary="one greedy path")

    versionadded: 0.1
    """


@hookspec
def specframe_pruners() -> Iterable[ComponentSpec]:
    """Register pruners (the ``pruner:`` stage), which cut a tree to the verification budget.

    Returns:
        An iterable of ``ComponentSpec(kind="pruner", ...)``. Results of all plugins are collected.

    Example plugin::

        @specframe.hookimpl
        def specframe_pruners():
            yield ComponentSpec(kind="pruner", name="none", config=NoPruneConfig,
                                factory=lambda cfg, ctx: NoPruner(), summary="keep the tree as built")

    versionadded: 0.1
    """


@hookspec
def specframe_verifiers() -> Iterable[ComponentSpec]:
    """Register verifiers (the ``verifier:`` stage). Declare ``VerifierCapabilities(lossless=...)`` (required) and
    ``supported_regimes`` honestly.

    Returns:
        An iterable of ``ComponentSpec(kind="verifier", ...)``. Results of all plugins are collected.

    Example plugin::

        @specframe.hookimpl
        def specframe_verifiers():
            yield ComponentSpec(kind="verifier", name="greedy", config=GreedyConfig,
                                factory=lambda cfg, ctx: GreedyVerifier(),
                                capabilities=VerifierCapabilities(lossless=True, greedy_only=True),
                                summary="argmax walk")

    versionadded: 0.1
    """


# ---------------------------------------------------------------------------------------- lifecycle
@hookspec
def specframe_validate_pipeline(config: Any, registry: ComponentRegistry) -> Iterable[str]:
    """Check a validated pipeline config across stages, beyond what each component's schema can say.

    Args:
        config: the validated ``PipelineConfig``.
        registry: the component registry, to read other stages' capabilities.

    Returns:
        An iterable of problems, each one sentence naming the fields and how to fix them. Results of all
        plugins are collected; any problem makes the pipeline invalid.

    Example plugin::

        @specframe.hookimpl
        def specframe_validate_pipeline(config, registry):
            if config.drafter.type == "mine" and config.tree_builder.type != "chain":
                yield "drafter 'mine' only supports tree_builder.type: chain"

    versionadded: 0.1
    """


# ---------------------------------------------------------------------------------------------- CLI
@hookspec
def specframe_register_commands(cli: click.Group) -> None:
    """Add commands to the ``specframe`` command-line interface.

    Args:
        cli: the top-level ``click.Group``; call ``cli.command()`` or ``cli.add_command()``.

    Returns:
        Nothing; all implementations are called.

    Example plugin::

        @specframe.hookimpl
        def specframe_register_commands(cli):
            @cli.command()
            def hello():
                click.echo("hello from my plugin")

    versionadded: 0.1
    """
