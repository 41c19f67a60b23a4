"""``specframe simulate``: predict tokens per second of recorded runs under another cost model.

Replays the rounds of `specframe bench` result files (:mod:`specframe.bench.simulate`) under a measured cost profile
(``--costs``, written by `specframe profile -o DIR` on any machine) or the roofline model of a named accelerator
(``--accelerator`` with ``--target-params``), and prints, per method and batch size, the measured and the predicted
tokens per second. ``--budget K`` (repeatable, or a list ``4,8,16``) adds the same rounds replayed as if the verifier
had seen only the top ``K`` nodes of every recorded tree (greedy records only; the model and its approximation are in
:mod:`specframe.bench.simulate`), beside the rows as recorded (a fixed budget, or `budget: auto`'s own choices).
Everything is checked before anything is read: exactly one cost model, a known accelerator, a positive parameter
count, a ``--draft-ms`` of two non-negative numbers, budgets of positive integers.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from specframe.cli_output import console
from specframe.errors import ConfigError


def _draft(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        fixed, per_row = (float(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"--draft-ms {text!r} is not two numbers",
                          hint="give FIXED,PER_ROW in ms, e.g. 4,1") from None
    if not (fixed >= 0 and per_row >= 0):
        raise ConfigError(f"--draft-ms {text!r} has a negative part", hint="give FIXED,PER_ROW in ms, e.g. 4,1")
    return fixed, per_row


def _budgets(texts: tuple[str, ...]) -> list[int]:
    budgets: list[int] = []
    for text in texts:
        for part in text.split(","):
            try:
                value = int(part)
            except ValueError:
                raise ConfigError(f"--budget {text!r} is not a list of integers",
                                  hint="give draft nodes per round, e.g. --budget 4 or --budget 4,8,16") from None
            if value < 1:
                raise ConfigError(f"--budget {value} is below 1", hint="a replayed budget verifies at least 1 node")
            if value not in budgets:
                budgets.append(value)
    return budgets


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--costs", type=click.Path(path_type=Path), default=None,
              help="A cost profile JSON (`specframe profile -o DIR` writes DIR/profile.json).")
@click.option("--accelerator", default=None, help="Roofline model of a named accelerator instead of --costs "
              "(h100-sxm, h200, a100-80gb, l4).")
@click.option("--target-params", type=float, default=None, help="The target's parameter count (with --accelerator).")
@click.option("--bytes-per-param", type=float, default=2.0, show_default=True,
              help="Bytes per weight (with --accelerator; 2 for bf16).")
@click.option("--draft-ms", default=None, metavar="FIXED,PER_ROW",
              help="The draft cost of a round (default: the records' own measured draft time).")
@click.option("--budget", "budget_texts", multiple=True, metavar="K[,K...]",
              help="Also replay the rounds at these budgets (draft nodes per round; greedy records written with "
                   "path_order). Repeatable, or a comma list: --budget 4,8,16.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def simulate(results: tuple[Path, ...], costs: Path | None, accelerator: str | None, target_params: float | None,
             bytes_per_param: float, draft_ms: str | None, budget_texts: tuple[str, ...], as_json: bool) -> None:
    """Predict tokens/s of the rounds in RESULTS (bench files) under a cost model."""
    from specframe.bench import load_result_files
    from specframe.bench.simulate import ACCELERATORS, roofline_profile
    from specframe.bench.simulate import simulate as replay
    from specframe.cost.measure import read_profile

    if (costs is None) == (accelerator is None):
        raise ConfigError("give exactly one cost model", hint="--costs PROFILE.json, or --accelerator NAME with "
                                                              "--target-params N")
    draft = _draft(draft_ms)
    budgets = _budgets(budget_texts)
    if accelerator is not None:
        if accelerator not in ACCELERATORS:
            raise ConfigError(f"--accelerator {accelerator!r} is not known", hint=f"use {', '.join(ACCELERATORS)}")
        if target_params is None or not target_params > 0 or not bytes_per_param > 0:
            raise ConfigError("--accelerator needs --target-params (a positive parameter count)",
                              hint="e.g. --target-params 4.0e9 for Qwen3-4B")
        profile = roofline_profile(accelerator, target_params, bytes_per_param)
    else:
        assert costs is not None
        profile = read_profile(costs)
    records, warnings = load_result_files(results)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if not records:
        raise ConfigError(f"no records in {', '.join(map(str, results))}", hint="run `specframe bench` first")
    rows = replay(records, profile, draft)
    try:
        for budget in budgets:
            rows += replay(records, profile, draft, budget=budget)
    except ValueError as exc:
        raise ConfigError(str(exc), hint="--budget replays greedy records written with path_order") from None
    largest = max((int(n) for r in records if not r.get("reference") for n in r["tree_nodes"]), default=0)
    for budget in budgets:
        if budget > largest:
            click.echo(f"warning: --budget {budget} is above every recorded tree ({largest} nodes at most): the "
                       "replay cannot verify nodes that were never drafted, so it repeats the recording", err=True)
    rows.sort(key=lambda r: (r.method, r.batch_size, -1 if r.budget is None else r.budget))
    if as_json:  # a replayed row's measured figure is the recording's, at its own budget: no ratio
        click.echo(json.dumps([{**r.__dict__, "ratio": round(r.ratio, 3) if r.budget is None else None}
                               for r in rows], indent=2))
        return
    table = Table(title=f"predicted under {'the roofline of ' + accelerator if accelerator else str(costs)} "
                        "(a model, not a measurement)")
    for column in ("method", "batch", "budget", "requests", "nodes/round", "τ", "measured tok/s", "predicted tok/s",
                   "ratio"):
        table.add_column(column, justify="left" if column == "method" else "right")
    for r in rows:  # a replayed budget was not measured: its measured and ratio cells stay empty
        measured = (f"{r.measured_tokens_per_s:.1f}", f"{r.ratio:.2f}") if r.budget is None else ("-", "-")
        table.add_row(r.method, str(r.batch_size), "recorded" if r.budget is None else str(r.budget),
                      str(r.requests), f"{r.nodes_per_round:.2f}", f"{r.tau:.2f}", measured[0],
                      f"{r.predicted_tokens_per_s:.1f}", measured[1])
    console.print(table)
