"""``specframe plugins``, ``components``, ``schema`` and ``validate``: what is installed and what a pipeline
file resolves to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from specframe.cli_output import console, emit_json, err_console, host_of
from specframe.config.pipeline import build_pipeline_model
from specframe.files import write_text
from specframe.plugins import REGISTRATION_HOOKS


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """Installed plugins: distribution, version, hooks, components supplied; skipped and broken ones too."""
    host = host_of(ctx)
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
        emit_json(rows)
        return
    table = Table(title="specframe plugins")
    for col in ("plugin", "distribution", "version", "status", "hooks", "components"):
        table.add_column(col)
    for d in rows:
        status = d["status"] if d["status"] == "loaded" else f"{d['status']}: {d['reason']}"
        table.add_row(*(escape(str(v)) for v in (d["name"], d["distribution"], d["version"], status,
                                                  "\n".join(d["hooks"]), "\n".join(d["components"]))))
    console.print(table)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--kind", type=click.Choice(list(REGISTRATION_HOOKS)), help="Only this stage kind.")
@click.pass_context
def components(ctx: click.Context, as_json: bool, kind: str | None) -> None:
    """Every registered stage component by kind, with its summary, capabilities and provider."""
    registry = host_of(ctx).registry
    grouped: dict[str, list[dict[str, Any]]] = {k: [] for k in REGISTRATION_HOOKS if kind in (None, k)}
    for rec in registry:
        if rec.spec.kind not in grouped:
            continue
        grouped[rec.spec.kind].append({
            "name": rec.spec.name, "summary": rec.spec.summary, "plugin": rec.plugin,
            "distribution": rec.distribution, "version": rec.version,
            "capabilities": rec.spec.record.as_dict(),
            "fields": sorted(f for f in rec.spec.config.model_fields if f != "type"),
        })
    if as_json:
        emit_json(grouped)
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
            table.add_row(*(escape(str(v)) for v in (item["name"], item["summary"], item["distribution"],
                                                      shown or default)))
        console.print(table)


@click.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file.")
@click.pass_context
def schema(ctx: click.Context, output: Path | None) -> None:
    """JSON Schema of pipeline files, including every installed plugin's components (always JSON)."""
    model = build_pipeline_model(host_of(ctx).registry)
    text = json.dumps(model.model_json_schema(), indent=2)
    if output is None:
        click.echo(text)
    else:
        write_text(output, text + "\n", what="schema file")
        err_console.print(f"wrote {output}", highlight=False, markup=False)


@click.command()
@click.argument("pipelines", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the resolved configs as JSON.")
@click.pass_context
def validate(ctx: click.Context, pipelines: tuple[Path, ...], overrides: tuple[str, ...], as_json: bool) -> None:
    """Check pipeline files (schema and cross-stage rules) and print the resolved config."""
    from specframe.config.loader import config_hash
    from specframe.config.validate import load_pipeline_config

    host = host_of(ctx)
    results = []
    for path in pipelines:
        config, _ = load_pipeline_config(str(path), overrides, host=host)
        dump = config.model_dump(mode="json")
        results.append({"file": str(path), "valid": True, "config_hash": config_hash(dump), "config": dump})
        if not as_json:
            console.print(f"[green]ok[/green] {escape(str(path))}  ({escape(config.name)}, hash {config_hash(dump)})")
    if as_json:
        emit_json(results)
