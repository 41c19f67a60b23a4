"""What every ``specframe`` command shares: the consoles, JSON output and the plugin host of the invocation."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console

from specframe.plugins import PluginHost

# No emoji codes (":-1:" in a dataset argument would print as an emoji); user text is passed with markup=False or
# through rich.markup.escape.
#: Command output (stdout).
console = Console(emoji=False)
#: Progress, summaries and errors (stderr).
err_console = Console(stderr=True, emoji=False)


def host_of(ctx: click.Context) -> PluginHost:
    """The plugin host this invocation was started with (see :func:`specframe.cli.run_cli`)."""
    return ctx.find_root().obj["host"]


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    click.echo(json.dumps(data, indent=2, default=str))
