"""``specframe profile-acceptance``: record the depth x rank acceptance profile of a pipeline on benchmark prompts.

The profile feeds the ``depth_rank_histogram`` pruner (:mod:`specframe.metrics.depth_rank` defines its counts).
It is recorded offline, by decoding the first turn of ``n`` questions of each ``--dataset`` from one split of
:mod:`specframe.bench.splits` (``tune`` by default: a profile is a tuned setting, so it must not see the report
split the published tables come from), and counting every drafted round's accepted path ranks. Record it with the
tree the pruner will cut (for example the builder it follows, without the pruner), so the ranks mean the same.

Everything that can be refused is refused before the models load: the output file must be writable, the datasets
found, the split known. The profile is written once, at the end, atomically.

Example::

    specframe profile-acceptance examples/smollm2/ddtree.yaml --set tree_builder.budget=48 \
        -d gsm8k:4 -d humaneval:4 -d mt_bench:4 --split tune --max-new-tokens 64 \
        -o checkpoints/smollm2-135m/depth-rank/dflash-heap48.json
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from specframe.cli_output import console, err_console, host_of

DATA_HELP = "Directory holding benchmark files as in ../shared/data (repeatable; also SPECFRAME_DATA_DIR)."


@click.command("profile-acceptance")
@click.argument("pipeline", type=click.Path(path_type=Path))
@click.option("--dataset", "-d", "dataset_args", multiple=True, required=True, metavar="NAME[:N]",
              help="Benchmark set and questions from the split (repeatable).")
@click.option("--split", type=click.Choice(["tune", "report"]), default="tune", show_default=True,
              help="Split of the questions (tune: never the held-out report split for a tuned setting).")
@click.option("--data-dir", "data_dirs", multiple=True, type=click.Path(path_type=Path), help=DATA_HELP)
@click.option("--max-new-tokens", type=int, default=None, help="Defaults to the pipeline's value.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field (repeatable).")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Profile file to write (JSON).")
@click.pass_context
def profile_acceptance(ctx: click.Context, pipeline: Path, dataset_args: tuple[str, ...], split: str,
                       data_dirs: tuple[Path, ...], max_new_tokens: int | None, overrides: tuple[str, ...],
                       output: Path) -> None:
    """Record PIPELINE's depth x rank acceptance profile (for the depth_rank_histogram pruner) on one split."""
    from specframe.bench.splits import REPORT, TUNE, select_split
    from specframe.config.bounds import check_max_new_tokens
    from specframe.datasets import load_dataset, parse_dataset_arg
    from specframe.errors import ConfigError, GenerationError
    from specframe.files import check_output_file, write_text
    from specframe.metrics.depth_rank import DepthRankCounts, dumps
    from specframe.pipeline import Pipeline

    if max_new_tokens is not None:
        check_max_new_tokens(max_new_tokens, where="--max-new-tokens")
    check_output_file(output, what="profile output")
    chosen = []
    for name, n in (parse_dataset_arg(arg) for arg in dataset_args):
        loaded = load_dataset(name, None, data_dirs=data_dirs)
        samples = select_split(loaded.samples, TUNE if split == "tune" else REPORT, n)
        if not samples:
            raise ConfigError(f"--dataset {name}: no question of {loaded.source} is in the {split} split",
                              hint="give more questions of the set (or another set)")
        chosen.append((loaded.name, samples))
    pipe = Pipeline.from_yaml(pipeline, overrides=overrides, host=host_of(ctx))
    counts = DepthRankCounts(meta={"pipeline": pipe.config.name, "file": str(pipeline), "overrides": list(overrides),
                                   "split": split, "datasets": {name: len(s) for name, s in chosen},
                                   "max_new_tokens": max_new_tokens or pipe.config.generation.max_new_tokens})
    rounds = 0
    for name, samples in chosen:
        for i, sample in enumerate(samples):
            result = pipe.generate(sample.turns[0], max_new_tokens)
            counts.add_rounds(result.rounds)
            rounds += len(result.rounds)
            err_console.print(f"{name} {i + 1}/{len(samples)}: {len(result.rounds)} rounds, τ {result.tau:.2f}",
                              highlight=False, markup=False)
    if not counts.trials:
        raise GenerationError(f"no round of {pipe.config.name} drafted a tree: there is nothing to profile "
                              f"({rounds} rounds, all plain)", hint="profile a pipeline with a drafter and a tree "
                                                                   "builder; nothing was written")
    counts.meta["rounds"] = rounds
    write_text(output, dumps(counts), what="profile")
    table = Table(title=f"{pipe.config.name}: P(accepted child has rank r | parent accepted) on the {split} split")
    table.add_column("depth", justify="right")
    table.add_column("trials", justify="right")
    width = max(len(row) for row in counts.accepted) if counts.accepted else 0
    for r in range(min(width, 4)):
        table.add_column(f"rank {r}", justify="right")
    for d, (t, row) in enumerate(zip(counts.trials, counts.accepted, strict=True), start=1):
        rates = [f"{row[r] / t:.2f}" if t and r < len(row) else "—" for r in range(min(width, 4))]
        table.add_row(str(d), str(t), *rates)
    console.print(table)
    err_console.print(f"wrote {output}", highlight=False, markup=False)
