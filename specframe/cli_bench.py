"""``specframe bench``, ``specframe report`` and ``specframe datasets``: the benchmark harness on the command line.

``bench`` runs pipeline files (and their ``sweep:`` grids) over datasets next to the AR baseline and the target's
own ``generate()`` (method ``hf_generate``, :mod:`specframe.reference`) and appends
one JSON line per method, question and turn to ``--output``; run it again to resume. ``report`` turns result
files into the papers' tables, CSVs and sweep plots. ``datasets`` lists the registry and where each set is
found.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from specframe.builtin.baseline import BASELINE_NAME
from specframe.cli_output import console, emit_json, err_console, host_of
from specframe.config.bounds import MAX_DRAFT_DEPTH, check_max_new_tokens
from specframe.errors import ConfigError, GenerationError
from specframe.files import check_output_file
from specframe.seeds import MAX_SEED

DATA_OPTIONS_HELP = "Directory holding benchmark files as in ../shared/data (repeatable; also SPECFRAME_DATA_DIR)."


def _data_files(items: tuple[str, ...]) -> dict[str, Path]:
    from specframe.datasets import get_spec

    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise ConfigError(f"--data-file {item}: expected NAME=PATH", hint="example: --data-file gsm8k=test.jsonl")
        out[get_spec(name).name] = Path(path)
    return out


@click.command()
@click.argument("pipelines", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--dataset", "-d", "dataset_args", multiple=True, metavar="NAME[:N]",
              help="Dataset and sample count (default: the papers' count; N=all for every question). Repeatable.")
@click.option("--max-new-tokens", type=int, default=None, help="Defaults to the first pipeline's value.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=Path("bench-results.jsonl"),
              show_default=True, help="Result file (JSON lines); an existing file is resumed, never overwritten.")
@click.option("--data-dir", "data_dirs", multiple=True, type=click.Path(path_type=Path), help=DATA_OPTIONS_HELP)
@click.option("--data-file", "data_files", multiple=True, metavar="NAME=PATH", help="File of one dataset.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a field in every pipeline.")
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY=[V1,V2]", help="Add a sweep key (repeatable).")
@click.option("--warmup", type=click.IntRange(min=0, max=1000), default=1, show_default=True,
              help="Untimed runs of the first prompt per method.")
@click.option("--repeats", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="Timed runs per prompt; the median-time run is recorded.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None,
              help="Base seed, 0 to 2**63 - 1 (default: each pipeline's `seed:`, else 0): every question's turn "
                   "gets a seed derived from it and the question, the same for every method; records carry it.")
@click.option("--batch-size", type=click.IntRange(min=1, max=4096), default=1, show_default=True,
              help="Decode up to N questions at once per method (continuous batching; records say the size).")
@click.option("--baseline-name", default=BASELINE_NAME, show_default=True, help="Method name of the AR baseline.")
@click.option("--no-baseline", is_flag=True, help="Do not run the AR baseline (no speedups in reports).")
@click.option("--reference/--no-reference", default=True, show_default=True,
              help="Also time the target's own generate() (method hf_generate) for the same tokens, when the "
                   "target offers it (not with --batch-size > 1).")
@click.option("--progress/--no-progress", "show_progress", default=None, help="Progress bar (default: on a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.pass_context
def bench(ctx: click.Context, pipelines: tuple[Path, ...], dataset_args: tuple[str, ...], max_new_tokens: int | None,
          output: Path, data_dirs: tuple[Path, ...], data_files: tuple[str, ...], overrides: tuple[str, ...],
          sweeps: tuple[str, ...], warmup: int, repeats: int, seed: int | None, batch_size: int, baseline_name: str,
          no_baseline: bool, reference: bool, show_progress: bool | None, as_json: bool) -> None:
    """Benchmark PIPELINES (YAML files, with optional `sweep:`) against the AR baseline."""
    from specframe.bench import BenchRunner, ResultsFileError, ResultStore, build_methods, parse_cli_sweep, run_info
    from specframe.bench.provenance import git_revision, plugin_versions
    from specframe.bench.shards import check_merged_output, expected_keys, merge_shards, prepare_shard, shard_dir
    from specframe.datasets import DATASETS, load_dataset, parse_dataset_arg
    from specframe.distributed import check_launch, from_env

    check_launch()  # a launch torchrun did not make is refused before any model is loaded
    if not dataset_args:
        raise ConfigError("no dataset chosen", hint=f"add --dataset NAME[:N]; available: {', '.join(DATASETS)}")
    if max_new_tokens is not None:
        check_max_new_tokens(max_new_tokens, where="--max-new-tokens")
    check_output_file(output, what="result file")  # before loading models: a device or directory fails at once
    files = _data_files(data_files)
    requests = [parse_dataset_arg(arg) for arg in dataset_args]
    datasets = [load_dataset(name, n, path=files.get(name), data_dirs=data_dirs) for name, n in requests]
    for ds in datasets:
        note = f" ({ds.note})" if ds.note else ""
        err_console.print(f"{ds.name}: {len(ds)} of {ds.available} from {ds.source}{note}", highlight=False,
                          markup=False)
    host = host_of(ctx)
    methods = build_methods(pipelines, host=host, overrides=overrides, cli_sweep=parse_cli_sweep(sweeps),
                            baseline_name=None if no_baseline else baseline_name,
                            reference=reference and batch_size == 1)
    if reference and not any(m.reference for m in methods):
        why = "it is measured one request at a time (--batch-size 1)" if batch_size > 1 else \
            f"the target {type(methods[0].pipeline.target).__name__} has no generate()"
        err_console.print(f"no generate() reference (hf_generate): {why}", highlight=False, markup=False)
    first = next(m for m in methods if not m.baseline)
    for m in methods:
        m.pipeline.check_batch_size(batch_size)
    max_new = max_new_tokens or first.pipeline.config.generation.max_new_tokens
    plugins, git_rev = plugin_versions(host), git_revision()
    infos = {m.name: run_info(m, max_new_tokens=max_new, seed=seed, plugins=plugins, git_rev=git_rev,
                              batch_size=batch_size) for m in methods}
    dist = from_env()
    runner = BenchRunner(methods, ResultStore(output), max_new_tokens=max_new, infos=infos, warmup=warmup,
                         repeats=repeats, seed=seed, batch_size=batch_size)
    items = runner.schedule(datasets)
    if dist.distributed and any(getattr(m.pipeline.target, "tensor_parallel", False) for m in methods):
        raise ConfigError("bench under torchrun shares the prompts out by rank, but the target is sharded over "
                          "the same ranks (tensor_parallel: true)",
                          hint="benchmark a tensor-parallel target with one prompt stream: use `specframe run`, "
                               "or drop tensor_parallel for a data-parallel sweep")
    if dist.distributed:  # torchrun: this rank's questions into its own shard; rank 0 merges at the end
        shard, items = prepare_shard(output, items, dist)
        runner.store = ResultStore(shard)
    with runner.store as store:
        if store.repaired_bytes:
            err_console.print(f"{store.path}: removed a partial last line ({store.repaired_bytes} bytes) left by a "
                              "crash", highlight=False, markup=False)
        try:
            for m in methods:
                store.check_consistent(m.name, infos[m.name].consistency_fields())
            if dist.distributed and dist.is_main:
                check_merged_output(output, methods, infos)
        except ResultsFileError as exc:
            dist.agree(exc)
        dist.agree(None)
        total = runner.pending_turns(items)
        rank = f"rank {dist.rank}/{dist.world_size}: " if dist.distributed else ""
        err_console.print(f"{rank}{len(methods)} methods ({', '.join(m.name for m in methods)}); {total} turns to "
                          f"run, {len(store)} already in {store.path}", highlight=False, markup=False)
        show = err_console.is_terminal and dist.is_main if show_progress is None else show_progress
        columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=err_console, disable=not show) as progress:
            task = progress.add_task("bench", total=total)

            def advance(method: str, dataset: str, question: str, turn: int) -> None:
                progress.update(task, advance=1, description=f"{dataset} {question} t{turn} {method}")

            summary = runner.run_items(items, progress=advance)
    if dist.distributed:
        dist.barrier()  # every shard is complete (a rank that died ends the launch before this)
        error = None
        if dist.is_main:
            try:
                merged = merge_shards(output, shard_dir(output), dist.world_size,
                                      expected_keys(runner.schedule(datasets), methods, batch_size))
                err_console.print(f"merged {merged} records from {dist.world_size} shards into {output}",
                                  highlight=False, markup=False)
            except ResultsFileError as exc:
                error = exc
        dist.agree(error)
    result = {"output": str(output), "recorded": summary.recorded, "skipped": summary.skipped,
              "methods": [m.name for m in methods], "datasets": [ds.name for ds in datasets]}
    if summary.refused:
        result["refused"] = summary.refused
    if as_json:
        emit_json(result)
    else:
        err_console.print(f"recorded {summary.recorded} turns, skipped {summary.skipped} already done -> {output}\n"
                          f"next: specframe report {output}", highlight=False, markup=False)
    if summary.refused:
        raise GenerationError(f"{len(summary.refused)} turns refused (not recorded):\n  "
                              + "\n  ".join(summary.refused),
                              hint="the other turns were recorded; shorten the refused prompts")


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write report.md, CSVs and plots here.")
@click.option("--format", "formats", default="md,csv", show_default=True, help="Comma-separated: md, csv.")
@click.option("--speedup", type=click.Choice(["aggregate", "geomean", "tpot"]), default="aggregate", show_default=True,
              help="Speedup definition in the main table.")
@click.option("--tau", type=click.Choice(["per_response", "pooled"]), default="per_response", show_default=True)
@click.option("--baseline", default=None, help="Baseline method (default: the records marked as baseline).")
@click.option("--bootstrap", type=click.IntRange(min=100, max=100_000), default=2000, show_default=True,
              help="Bootstrap resamples.")
@click.option("--confidence", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Bootstrap seed.")
@click.option("--max-depth", type=click.IntRange(min=1, max=MAX_DRAFT_DEPTH), default=16, show_default=True,
              help="Depth columns shown.")
@click.option("--plots/--no-plots", default=True, help="Sweep plots (need matplotlib) when --out-dir is given.")
@click.option("--json", "as_json", is_flag=True, help="Print the long-format summary rows as JSON.")
def report(results: tuple[Path, ...], out_dir: Path | None, formats: str, speedup: str, tau: str,
           baseline: str | None, bootstrap: int, confidence: float, seed: int, max_depth: int, plots: bool,
           as_json: bool) -> None:
    """Tables (Markdown/CSV) and sweep plots from RESULTS files of `specframe bench`."""
    from specframe.bench import load_result_files
    from specframe.report import Report, SummaryOptions, summarize
    from specframe.report.render import set_aside_lines
    from specframe.report.tables import summary_rows

    chosen = tuple(f.strip() for f in formats.split(",") if f.strip())
    unknown = [f for f in chosen if f not in ("md", "csv")]
    if unknown or not chosen:
        raise ConfigError(f"--format {formats!r}: unknown or no format {', '.join(unknown)}",
                          hint="use md, csv or md,csv")
    records, warnings = load_result_files(results)
    for warning in warnings:
        err_console.print(f"warning: {warning}", highlight=False, markup=False)
    if not records:
        raise ConfigError(f"no records in {', '.join(map(str, results))}", hint="run `specframe bench` first")
    options = SummaryOptions(baseline=baseline, resamples=bootstrap, confidence=confidence, seed=seed)
    rep = Report(summarize(records, options), speedup=speedup, tau=tau, confidence=confidence,
                 max_depth=max_depth)
    for line in set_aside_lines(rep.summary):
        err_console.print(f"set aside: {line}", highlight=False, markup=False)
    for line in rep.summary.implausible:
        err_console.print(f"warning: {line}", highlight=False, markup=False)
    if as_json:
        rows = [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
                for row in summary_rows(rep.summary)]
        click.echo(json.dumps(rows, indent=2, default=str))
    else:
        click.echo(rep.markdown())
    if out_dir is not None:
        for path in rep.write(out_dir, formats=chosen, plots=plots):
            err_console.print(f"wrote {path}", highlight=False, markup=False)


@click.command()
@click.option("--data-dir", "data_dirs", multiple=True, type=click.Path(path_type=Path), help=DATA_OPTIONS_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def datasets(data_dirs: tuple[Path, ...], as_json: bool) -> None:
    """Benchmark datasets: paper sample count, prompt template, and where each is found here."""
    from specframe.datasets import DATASETS, DatasetError, load_dataset

    rows = []
    for spec in DATASETS.values():
        try:
            ds = load_dataset(spec.name, None, data_dirs=data_dirs)
            where = f"{ds.source} ({ds.available} questions){'; ' + ds.note if ds.note else ''}"
        except DatasetError as exc:
            where = f"missing: put {spec.files[0].relpath} under a --data-dir (--json shows the full hint)"
            if as_json:
                where = f"missing: {exc.hint}"
        rows.append({"name": spec.name, "title": spec.title, "paper_n": spec.default_n or "all",
                     "template": spec.template, "found": where})
    if as_json:
        emit_json(rows)
        return
    table = Table(title="benchmark datasets")
    for col in ("name", "paper_n", "template", "found"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["name"], str(row["paper_n"]), escape(row["template"]), escape(row["found"]))
    console.print(table)
