"""The ``specframe`` command line: a fresh click group per invocation holding the core's commands
(:data:`CORE_COMMANDS`, added by :func:`make_cli`) and those every plugin adds through its
``specframe_register_commands`` hook.

Every command that prints a report takes ``--json`` for machine-readable output. Bad input prints a
one-screen error (what is wrong, where, how to fix it) and exits with status 2; no traceback. A component that
breaks its contract (:class:`~specframe.errors.ContractError`) is a plugin bug: its traceback and the
component's name and distribution are printed, exit status 1.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from typing import Any

import click
from rich.markup import escape

from specframe.cli_acceptance import profile_acceptance
from specframe.cli_bench import bench, datasets, report
from specframe.cli_core import components, plugins, schema, validate
from specframe.cli_output import err_console
from specframe.cli_profile import profile
from specframe.cli_run import run
from specframe.cli_simulate import simulate
from specframe.config.bounds import SizeWarning
from specframe.errors import ContractError, SpecframeError
from specframe.plugins import PluginHost
from specframe.startup import INTERRUPTED, started

#: The core's commands, in help order.
CORE_COMMANDS: tuple[click.Command, ...] = (plugins, components, schema, validate, run, bench, report, datasets,
                                             profile, profile_acceptance, simulate)


def make_cli(host: PluginHost) -> click.Group:
    """A new ``specframe`` group holding the core's commands, then every plugin's (nothing global is changed)."""

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(package_name="specframe")
    def cli() -> None:
        """specframe: composable speculative decoding (drafter -> corrector -> tree builder -> pruner -> verifier)."""

    for command in CORE_COMMANDS:
        cli.add_command(command)
    host.register_commands(cli)
    return cli


def run_cli(args: list[str] | None = None, host: PluginHost | None = None) -> int:
    """Run the CLI and return its exit status; SpecframeError becomes a one-screen message and status 2."""
    try:
        host = host or PluginHost(skip_broken=True)  # a broken plugin is a warning; `plugins` lists it
        with warnings.catch_warnings():
            warnings.simplefilter("always", SizeWarning)
            warnings.showwarning = _show_warning
            return _run(args, host)
    except KeyboardInterrupt:  # outside a command (click turns one inside into Abort)
        err_console.print("interrupted")
        return INTERRUPTED


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    err_console.print(f"warning: {message}", highlight=False, markup=False)


def _run(args: list[str] | None, host: PluginHost) -> int:
    try:
        make_cli(host).main(args=args, prog_name="specframe", obj={"host": host}, standalone_mode=False)
    except SpecframeError as exc:
        err_console.print(f"[bold red]error:[/bold red] {escape(exc.render())}", highlight=False)
        return 2
    except click.exceptions.Abort:
        err_console.print("aborted")
        return INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except ContractError as exc:
        err_console.print(traceback.format_exc(), highlight=False, markup=False)
        err_console.print(f"[bold red]bug:[/bold red] {escape(exc.render())}", highlight=False)
        return 1
    return 0


def main() -> None:
    """Console entry point (an interrupt while the package was imported ended the process already:
    :mod:`specframe.startup`)."""
    started()
    sys.exit(run_cli())


if __name__ == "__main__":
    main()
