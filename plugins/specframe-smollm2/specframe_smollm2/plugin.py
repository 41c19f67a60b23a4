"""Entry point ``smollm2``: the ``smollm2`` target type and the ``setup-target``, ``train`` and ``demo`` commands."""

from __future__ import annotations

from collections.abc import Iterator

import click

import specframe
from specframe.registry import ComponentSpec, TargetCapabilities
from specframe_smollm2.target import SmolLM2TargetConfig, build_smollm2_target


@specframe.hookimpl
def specframe_target_adapters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="target", name="smollm2", config=SmolLM2TargetConfig, factory=build_smollm2_target,
        capabilities=TargetCapabilities(exposes_taps=True, shares_embeddings=True),
        summary="SmolLM2-135M-Instruct from the `specframe setup-target` cache (manifest-checked)",
    )


@specframe.hookimpl
def specframe_register_commands(cli: click.Group) -> None:
    from specframe_smollm2.commands import register

    register(cli)
