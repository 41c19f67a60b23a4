"""``specframe profile``: the measured cost of a round on this device (the numbers `budget: auto` decides with).

Everything that can be checked is checked before the measurement (which takes a while) and before the cache is
touched: the prompt must fit the target's context, ``--out-dir`` must be a writable directory whose
``profile.json`` and ``profile.png`` can be files, and the cache directory must accept files. The measured
profile then replaces the cached one only when it is plausible, was measured while no other process kept the CPUs
busy, and covers it (:func:`specframe.cost.measure.cache_profile`); otherwise the notice says why and the cached
one is kept. A run stopped at any point (Ctrl-C, a timeout's kill) leaves the cache as it was: the cache file is
replaced atomically and only after the whole measurement.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from specframe.cli_output import console, err_console, host_of
from specframe.files import check_output_file, check_writable_dir, write_text


@click.command()
@click.argument("pipeline", type=click.Path(path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field (repeatable).")
@click.option("--prompt", default="Explain step by step how to compute the area of a circle of radius 3.",
              show_default=True, help="Prompt whose cache the forwards run on.")
@click.option("--reps", type=click.IntRange(1, 100), default=5, show_default=True, help="Timed runs per size.")
@click.option("--out-dir", "-o", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write profile.json and profile.png here.")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
@click.pass_context
def profile(ctx: click.Context, pipeline: Path, overrides: tuple[str, ...], prompt: str, reps: int,
            out_dir: Path | None, as_json: bool) -> None:
    """Measure PIPELINE's cost model C(B, n) and stage costs, cache them for `budget: auto`, print tables."""
    from specframe.cost.measure import profile_path
    from specframe.cost.setup import target_profile_key
    from specframe.pipeline import Pipeline
    from specframe.profile_report import (
        batch_rows,
        measure_pipeline_profile,
        memory_line,
        profile_rows,
        save_to_cache,
        write_plot,
    )

    pipe = Pipeline.from_yaml(pipeline, overrides=overrides, host=host_of(ctx))
    if out_dir is not None:  # refused now, not after the measurement
        check_writable_dir(out_dir, what="profile directory")
        for name in ("profile.json", "profile.png"):
            check_output_file(out_dir / name, what="profile output")
    cache_dir = profile_path(target_profile_key(pipe.target, pipe.config)).parent
    check_writable_dir(cache_dir, what="cost-profile cache directory")
    taken = measure_pipeline_profile(pipe, prompt, reps=reps)
    measured = taken.profile
    rows = profile_rows(measured)
    extra = {"tau": taken.tau, "tokens_per_s": taken.tokens_per_s, "memory": taken.memory}
    if out_dir is not None:
        write_text(out_dir / "profile.json", json.dumps({**measured.to_json(), "rows": rows, **extra}, indent=2)
                   + "\n", what="profile")
        write_plot(measured, out_dir / "profile.png")
    cached = save_to_cache(taken)
    if as_json:
        click.echo(json.dumps({**measured.to_json(), "rows": rows, **extra,
                               "cache": None if cached is None else str(cached)}, indent=2))
        return
    table = Table(title=f"{pipe.config.name}: {measured.key['device']}, {measured.key['dtype']}, "
                        f"{measured.key['threads']} threads")
    for column in ("tokens per forward", "target ms", "ms per token", "τ to break even"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(str(r["tokens"]), f"{r['verify_ms']:.1f}", f"{r['ms_per_token']:.1f}",
                      f"{r['break_even_tau']:.2f}")
    console.print(table)
    if measured.batch_ms:
        batches = Table(title="C(B, n): B rows carrying n tokens in all (a plain round is n = B)")
        for column in ("rows B", "tokens n", "forward ms", "plain tokens/ms at B"):
            batches.add_column(column, justify="right")
        for r in batch_rows(measured):
            batches.add_row(str(r["batch"]), str(r["tokens"]), f"{r['forward_ms']:.1f}",
                            f"{r['plain_tokens_per_ms']:.3f}")
        console.print(batches)
    stages = ", ".join(f"{k} {v:.1f} ms" for k, v in measured.overhead_ms.items())
    err_console.print(f"per-round stages (median): {stages}", markup=False, highlight=False)
    err_console.print(memory_line(taken), markup=False, highlight=False)
    if cached is not None:
        err_console.print(f"cached for budget: auto in {cached}", markup=False, highlight=False)
