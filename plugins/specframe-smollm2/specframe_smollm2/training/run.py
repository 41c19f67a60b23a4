"""``run_recipe``: the whole of ``specframe train``: validate, make sure the data exists, train, summarise."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specframe.distributed import DistContext, from_env
from specframe.errors import ConfigError
from specframe.files import write_text
from specframe.files.outputs import check_output_dir
from specframe.tensor_files import read_json_object
from specframe_smollm2.cache import target_dir, verify_manifest
from specframe_smollm2.training.data_config import DataConfig
from specframe_smollm2.training.export import output_kind
from specframe_smollm2.training.recipe import Recipe, load_recipe

DATA_STATS = "stats.json"


def ensure_data(recipe: Recipe, model_dir: Path, *, progress: bool, log: Callable[[str], None],
                dist: DistContext | None = None) -> None:
    """Generate the shards of the recipe's data section and of its ``include`` sections unless they exist."""
    for section in (recipe.data, *recipe.data.include):
        _ensure_section(section, model_dir, progress=progress, log=log, dist=dist or DistContext())


def _ensure_section(d: DataConfig, model_dir: Path, *, progress: bool, log: Callable[[str], None],
                    dist: DistContext) -> None:
    """Generate one section's shards unless all of them exist (an interrupted generation resumes).

    Under ``torchrun`` the ranks share the missing shards out (shard ``i`` to rank ``i % W``) and wait for each
    other before anyone trains on them.
    """
    from specframe_smollm2.training.generate_data import generate_dataset
    from specframe_smollm2.training.prompt_files import banned_ngrams
    from specframe_smollm2.training.prompts import section_prompts
    from specframe_smollm2.training.self_chat import UserTurnWriter

    out = Path(d.dir)
    prompts = section_prompts(d)
    expected = -(-len(prompts) // d.batch_size)
    have = len(list(out.glob("shard-*.pt"))) if out.is_dir() else 0
    wanted = expected if d.max_shards is None else min(expected, d.max_shards)
    if not dist.any(have < wanted):  # one decision for all ranks (they meet in the barrier below)
        return
    import torch

    torch.set_num_threads(d.threads)
    cpu0 = time.process_time()
    log(f"generating target responses for {len(prompts)} prompts into {out} ({have}/{expected} shards exist)")
    writer = UserTurnWriter(banned_ngrams(d.decontaminate, d.decontaminate_ngram), d.decontaminate_ngram)
    generate_dataset(model_dir, out, prompts, d.generation_meta(), batch_size=d.batch_size,
                     max_new_tokens=d.max_new_tokens, taps=d.taps, topk=d.topk, log=log, progress=progress,
                     max_shards=d.max_shards, rank=dist.rank, world_size=dist.world_size, writer=writer)
    cpu = dist.mean(time.process_time() - cpu0) * dist.world_size  # every rank's generation CPU time
    dist.barrier()
    if not dist.is_main:
        return
    stats_path = out / DATA_STATS
    stats = read_json_object(stats_path, what="data statistics") if stats_path.exists() else {}
    before = stats.get("cpu_seconds", 0.0)
    if not isinstance(before, (int, float)):
        raise ConfigError(f"{stats_path}: cpu_seconds is {before!r}, not a number",
                          hint=f"fix or delete {stats_path}")
    stats["cpu_seconds"] = round(before + cpu, 1)
    text = json.dumps(stats, indent=2) + "\n"
    write_text(stats_path, text, what="data statistics")


def check_paths(recipe: Recipe, model_dir: Path) -> None:
    """Directories the run writes must be directories (or not exist yet), and the export must not land on an
    input: a file there, or an ``output`` that is the target, a data directory or ``base``, is named
    instead of being clobbered."""
    fields = {"output": recipe.output, "work_dir": recipe.work_dir, "data.dir": recipe.data.dir}
    fields.update({f"data.include[{i}].dir": d.dir for i, d in enumerate(recipe.data.include)})
    for field, value in fields.items():
        path = Path(value).expanduser()
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{field} is {path}, which is a file, not a directory", where=field,
                              hint="give a directory path (it is created when missing)")
    # init_from may be the output (continue a checkpoint in place: it is read once, before the first export).
    inputs = {"the target": model_dir, "base": recipe.base, **{k: v for k, v in fields.items() if k.startswith("data")}}
    output = Path(recipe.output).expanduser().resolve()
    for name, value in inputs.items():
        if value is not None and Path(value).expanduser().resolve() == output:
            raise ConfigError(f"output {recipe.output} is also {name}: the export would overwrite it",
                              where="output", hint="give the trained checkpoint its own output directory")
    # Another model, or another kind of run's export, is never replaced (specframe.files.outputs).
    check_output_dir(recipe.output, kind=output_kind(recipe.kind), what="output", inputs=inputs)


def check_data_topk(recipe: Recipe) -> None:
    """The top-k log-probabilities the data holds (each section's ``meta.json``, or what the recipe will generate)
    must be the ``topk`` the recipe declares, and the loss's ``soft_topk`` within the largest of them (a section
    with fewer is padded, as the stage-4 drafter recipe mixes top-32 and top-8 data on purpose). Complete data is not
    regenerated, so data written with top-4 was silently trained on by a recipe declaring top-32 (the soft labels
    past the 4th are padding)."""
    from specframe_smollm2.training.generate_data import META

    sections = [("data", recipe.data), *((f"data.include[{i}]", d) for i, d in enumerate(recipe.data.include))]
    for field, d in sections:
        meta_path = Path(d.dir) / META
        stored = read_json_object(meta_path, what="data settings").get("topk") if meta_path.is_file() else d.topk
        if isinstance(stored, int) and not isinstance(stored, bool) and stored != d.topk:
            raise ConfigError(f"{d.dir} holds the target's top-{stored} log-probabilities ({meta_path}), but the "
                              f"recipe declares {field}.topk {d.topk}", where=f"{field}.topk",
                              hint=f"set {field}.topk: {stored} (and loss.soft_topk at most {stored}), or give "
                                   f"another data.dir to generate top-{d.topk} data")
    most = max(d.topk for _, d in sections)  # sections with fewer are padded (they weigh nothing past their k)
    if recipe.loss.soft_topk > most:
        raise ConfigError(f"loss.soft_topk {recipe.loss.soft_topk} is more than the {most} log-probabilities per "
                          "position the data holds", where="loss.soft_topk",
                          hint=f"use loss.soft_topk: {most} or less (or data with a larger topk)")


def run_recipe(path: str | Path, overrides: dict | None = None, *, progress: bool = True,
               log: Callable[[str], None] = print, data_only: bool = False) -> dict[str, Any]:
    """Validate ``path``, generate its data if missing, then train (unless ``data_only``); returns the summary."""
    from specframe_smollm2.training.trainer import train

    recipe = load_recipe(path, overrides)
    model_dir = Path(recipe.target).expanduser() if recipe.target else target_dir()
    check_paths(recipe, model_dir)
    check_data_topk(recipe)
    verify_manifest(model_dir, checksums=False)
    dist = from_env(backend="gloo")  # torchrun: data generation and training shared out by rank (CPU, gloo)
    ensure_data(recipe, model_dir, progress=progress and dist.is_main, log=log, dist=dist)
    if data_only:
        return {"name": recipe.name, "data": [d.dir for d in (recipe.data, *recipe.data.include)]}
    return train(recipe, target_dir=model_dir, log=log, progress=progress, dist=dist)
