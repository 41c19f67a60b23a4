"""Entry point ``vllm`` of the ``specframe`` group: the ``specframe vllm-export`` command (main environment)."""

from __future__ import annotations

import click

import specframe


@specframe.hookimpl
def specframe_register_commands(cli: click.Group) -> None:
    from specframe_vllm.commands import register

    register(cli)
