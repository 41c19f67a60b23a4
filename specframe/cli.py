"""The ``specframe`` command line: plugins, components, schema, validate, run (plugins may add more).

Every command takes ``--json`` for machine-readable output. Bad input prints a one-screen error (what is
wrong, where, how to fix it) and exits with status 2; no traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specframe.config.pipeline import build_pipeline_model
from specframe.errors import SpecframeError
from specframe.plugins import REGISTRATION_HOOKS, PluginHost

console = Console()
err_console = Console(stderr=True)


def _host(ctx: click.Context) -> PluginHost:
    return ctx.find_root().obj["host"]


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="specframe")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """specframe: composable speculative decoding (drafter -> corrector -> tree builder -> pruner -> verifier)."""
    ctx.ensure_object(dict)
    ctx.obj.setdefault("host", PluginHost())


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """Installed plugins: distribution, version, hooks, components supplied; skipped and broken ones too."""
    host = _host(ctx)
    registry = host.registry
    unloaded = {u.name: u for u in host.unloaded}
    rows = []
    for info in host.plugins():
        d = info.as_dict()
        broken = unloaded.pop(info.name, None)  # imported, but one of its hooks raised
        d["status"] = "loaded" if broken is None else broken.status
        if broken is not None:
            d["reason"] = broken.reason
        d["components"] = [f"{r.spec.kind}:{r.spec.name}" for r in registry if r.plugin == info.name]
        rows.append(d)
    rows += [{**u.as_dict(), "hooks": [], "components": []} for u in unloaded.values()]
    if as_json:
        _emit_json(rows)
        return
    table = Table(title="specframe plugins")
    for col in ("plugin", "distribution", "version", "status", "hooks", "components"):
        table.add_column(col)
    for d in rows:
        status = d["status"] if d["status"] == "loaded" else f"{d['status']}: {d['reason']}"
        table.add_row(*(escape(str(v)) for v in (d["name"], d["distribution"], d["version"], status,
                                                  "\n".join(d["hooks"]), "\n".join(d["components"]))))
    console.print(table)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--kind", type=click.Choice(list(REGISTRATION_HOOKS)), help="Only this stage kind.")
@click.pass_context
def components(ctx: click.Context, as_json: bool, kind: str | None) -> None:
    """Every registered stage component by kind, with its summary, capabilities and provider."""
    registry = _host(ctx).registry
    grouped: dict[str, list[dict[str, Any]]] = {k: [] for k in REGISTRATION_HOOKS if kind in (None, k)}
    for rec in registry:
        if rec.spec.kind not in grouped:
            continue
        grouped[rec.spec.kind].append({
            "name": rec.spec.name, "summary": rec.spec.summary, "plugin": rec.plugin,
            "distribution": rec.distribution, "version": rec.version,
            "capabilities": rec.spec.capabilities.as_dict(),
            "fields": sorted(f for f in rec.spec.config.model_fields if f != "type"),
        })
    if as_json:
        _emit_json(grouped)
        return
    for k, items in grouped.items():
        table = Table(title=f"{k} ({len(items)})", title_justify="left")
        for col in ("name", "summary", "provider", "capabilities"):
            table.add_column(col)
        default = ""
        for item in items:
            caps = item["capabilities"]
            shown = ", ".join(f"{c}={v}" for c, v in caps.items() if v not in (False, [], ["deterministic"])
                              and not (c in ("lossless", "draft_regime") and v in (True, "deterministic")))
            table.add_row(item["name"], item["summary"], item["distribution"], shown or default)
        console.print(table)


@cli.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file.")
@click.option("--json", "as_json", is_flag=True, help="Accepted for symmetry; the schema is always JSON.")
@click.pass_context
def schema(ctx: click.Context, output: Path | None, as_json: bool) -> None:
    """JSON Schema of pipeline files, including every installed plugin's components."""
    model = build_pipeline_model(_host(ctx).registry)
    text = json.dumps(model.model_json_schema(), indent=2)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        err_console.print(f"wrote {output}")


@cli.command()
@click.argument("pipelines", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the resolved configs as JSON.")
@click.pass_context
def validate(ctx: click.Context, pipelines: tuple[Path, ...], overrides: tuple[str, ...], as_json: bool) -> None:
    """Check pipeline files (schema and cross-stage rules) and print the resolved config."""
    from specframe.config.loader import config_hash
    from specframe.config.validate import load_pipeline_config

    host = _host(ctx)
    results = []
    for path in pipelines:
        config, _ = load_pipeline_config(str(path), overrides, host=host)
        dump = config.model_dump(mode="json")
        results.append({"file": str(path), "valid": True, "config_hash": config_hash(dump), "config": dump})
        if not as_json:
            console.print(f"[green]ok[/green] {path}  ({config.name}, hash {config_hash(dump)})")
    if as_json:
        _emit_json(results)


def run_cli(args: list[str] | None = None, host: PluginHost | None = None) -> int:
    """Run the CLI and return its exit status; SpecframeError becomes a one-screen message and status 2."""
    host = host or PluginHost(skip_broken=True)  # a broken plugin is a warning; `plugins` lists it
    try:
        host.register_commands(cli)
        from specframe import cli_bench, cli_run  # noqa: F401  (register `run`, `bench`, `report`, `datasets`)

        cli.main(args=args, obj={"host": host}, standalone_mode=False)
    except SpecframeError as exc:
        err_console.print(f"[bold red]error:[/bold red] {escape(exc.render())}", highlight=False)
        return 2
    except click.exceptions.Abort:
        err_console.print("aborted")
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return 0


def main() -> None:
    """Console entry point."""
    sys.exit(run_cli())


if __name__ == "__main__":
    main()
