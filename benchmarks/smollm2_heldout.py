"""Teacher-forced held-out acceptance of SmolLM2 drafters (and heads) per prompt kind, side by side.

Reads the held-out sequences of a recipe's data sections (prompt index % ``heldout_every`` == 0, never trained
on), groups them by the kind of prompt that produced them (word problems, stubs, instructions, two-turn chat,
MBPP, ...; :func:`section_prompt_kinds`), draws the same random anchors for every checkpoint and prints the chain
τ (1 + leading drafts equal to the target's greedy tokens) per kind for each checkpoint, with the number of
blocks behind each figure. Heads are scored on their own base drafter (``--head DIR:BASE``), with the base's τ
beside them. A JSON copy goes to ``--out`` (default ``runs/heldout.json``).

This is the comparison a new training stage has to win before its checkpoints replace the shipped ones: it
measures the drafter alone, on text the target wrote, with no decoding loop in between (``smollm2_eval.py``
measures τ and speed end to end on the benchmark sets).

Every argument is checked before a model is loaded (``_frame``): paths on the command line are read from the
current directory, else from the repository; the recipe's own relative paths (its data sections) from the
repository root, where the shipped recipes are written from, so the script runs from any directory.

Usage::

    .venv/bin/python benchmarks/smollm2_heldout.py recipes/smollm2/drafter-stage3.yaml \\
        --drafter stage2=runs/stage2/drafter --drafter stage3=runs/smollm2-drafter-stage3/export \\
        --out runs/heldout.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Literal

import torch
from _frame import BenchParser, count, in_repository, resolve_input, run_script
from specframe_smollm2.training.dataset import Sequence, load_sequences, make_batch, split
from specframe_smollm2.training.objectives import EvalResult, Objective
from specframe_smollm2.training.prompts import section_prompt_kinds
from specframe_smollm2.training.recipe import Recipe, load_recipe
from specframe_smollm2.training.trainer import build_objective

from specframe.files import write_text


def heldout_by_kind(recipe: Recipe) -> dict[str, list[Sequence]]:
    """Held-out sequences of every data section of ``recipe``, keyed by prompt kind."""
    groups: dict[str, list[Sequence]] = defaultdict(list)
    for section in (recipe.data, *recipe.data.include):
        kinds = section_prompt_kinds(section)
        _, held = split(load_sequences(Path(section.dir), section.max_shards), section.heldout_every)
        for seq in held:
            groups[kinds[seq.index]].append(seq)
    return dict(sorted(groups.items()))


def drafter_objective(recipe: Recipe, target: torch.nn.Module, checkpoint: str) -> Objective:
    """The exported drafter at ``checkpoint`` as a drafter objective (its tap scale is folded into its weights)."""
    from specframe_diffusion.checkpoint import open_checkpoint

    files = open_checkpoint(checkpoint)
    embed = target.get_input_embeddings().weight.detach().float()  # [V, H]
    backbone = files.load_backbone(dtype=torch.float32).eval()
    ones = torch.ones(files.config.num_taps * files.config.hidden_size)  # [n*H]
    return Objective(recipe, embed, backbone, ones, None)


def head_objective(recipe: Recipe, target: torch.nn.Module, head: str, base: str) -> Objective:
    """The exported head at ``head`` on the drafter at ``base``."""
    update = {"base": base, "init_from": head}
    objective, _ = build_objective(recipe.model_copy(update=update), target, [], torch.Generator().manual_seed(0))
    objective.trainable.eval()
    return objective


def evaluate(objective: Objective, groups: dict[str, list[Sequence]], anchors: int, seed: int,
             batch_seqs: int = 8) -> dict[str, EvalResult]:
    """Per-kind results on the same anchors for every objective (one generator per kind, seeded alike)."""
    out = {}
    for kind, seqs in groups.items():
        gen = torch.Generator().manual_seed(seed)
        batches = [make_batch(seqs[i:i + batch_seqs], anchors, objective.block_size, gen)
                   for i in range(0, len(seqs), batch_seqs)]
        out[kind] = objective.evaluate(batches)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = BenchParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_input("recipe", None, positional=True,
                 help="the recipe whose data sections (and held-out split) to read")
    ap.add_argument("--drafter", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--head", action="append", default=[], metavar="NAME=HEAD_DIR:BASE_DIR",
                    help="a head checkpoint on its base drafter; the head recipe kind comes from --head-recipe")
    ap.add_argument("--head-recipe", action="append", default=[], metavar="NAME=RECIPE",
                    help="the recipe (ar_head or markov_head kind) that describes head NAME")
    ap.add_argument("--anchors", type=count(), default=16, help="random anchors per held-out sequence")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_input("--target", None, kind="dir",
                 help="converted target directory (default: the recipe's, else the setup-target cache)")
    ap.add_output("runs/heldout.json")
    args = ap.parse_args(argv)

    def pair(item: str, sep: str, flag: str, form: str) -> tuple[str, str]:
        left, found, right = item.partition(sep)
        if not (left and found and right):
            ap.error(f"{flag} {item!r}: expected {form}")
        return left, right

    def existing(path: str, flag: str, kind: Literal["file", "dir"] = "dir") -> str:
        found, why = resolve_input(Path(path), kind)
        if found is None:
            ap.error(f"argument {flag}: {why}")
        return str(found)

    head_recipes = {name: existing(path, "--head-recipe", "file")
                    for name, path in (pair(item, "=", "--head-recipe", "NAME=RECIPE") for item in args.head_recipe)}
    drafters = [(name, existing(path, "--drafter"))
                for name, path in (pair(item, "=", "--drafter", "NAME=DIR") for item in args.drafter)]
    heads = []
    for item in args.head:
        name, paths = pair(item, "=", "--head", "NAME=HEAD_DIR:BASE_DIR")
        head, base = pair(paths, ":", "--head", "NAME=HEAD_DIR:BASE_DIR")
        if name not in head_recipes:
            ap.error(f"--head {name} needs --head-recipe {name}=RECIPE")
        heads.append((name, existing(head, "--head"), existing(base, "--head")))
    if not drafters and not heads:
        ap.error("name at least one checkpoint: --drafter NAME=DIR or --head NAME=HEAD_DIR:BASE_DIR")

    from specframe_hf.loading import load_model, model_directory
    from specframe_smollm2.cache import target_dir

    with in_repository():  # the recipe's relative data paths are written from the repository root
        recipe = load_recipe(args.recipe)
        groups = heldout_by_kind(recipe)
        if not any(groups.values()):
            ap.error(f"{args.recipe}: its data sections hold no held-out sequence (generate the data first)")
        model_dir = str(args.target) if args.target else recipe.target or str(target_dir())
        target = load_model(model_directory(model_dir), dtype=torch.float32, device=torch.device("cpu"),
                            role="target")
        results: dict[str, dict[str, EvalResult]] = {}
        for name, path in drafters:
            results[name] = evaluate(drafter_objective(recipe, target, path), groups, args.anchors, args.seed)
        for name, head, base in heads:
            head_recipe = load_recipe(Path(head_recipes[name]))
            results[name] = evaluate(head_objective(head_recipe, target, head, base), groups, args.anchors,
                                     args.seed)

    names = list(results)
    print(f"| kind | seqs | blocks | {' | '.join(names)} |")
    print("|---|---:|---:|" + "---:|" * len(names))
    table = []
    for kind, seqs in groups.items():
        blocks = len(seqs) * args.anchors
        cells = []
        for name in names:
            res = results[name][kind]
            base = f" (base {res.base_tau:.3f})" if res.base_tau is not None else ""
            cells.append(f"{res.tau:.3f}{base}")
        print(f"| {kind} | {len(seqs)} | {blocks} | {' | '.join(cells)} |")
        table.append({"kind": kind, "seqs": len(seqs), "blocks": blocks,
                      **{name: {"tau": results[name][kind].tau, "slot_acc": results[name][kind].slot_acc,
                                "base_tau": results[name][kind].base_tau} for name in names}})
    weights = {kind: len(seqs) for kind, seqs in groups.items()}
    total = sum(weights.values())
    overall = {name: sum(results[name][k].tau * w for k, w in weights.items()) / total for name in names}
    print(f"| all (sequence-weighted) | {total} | {total * args.anchors} | "
          + " | ".join(f"{overall[n]:.3f}" for n in names) + " |")
    write_text(args.out, json.dumps({"recipe": str(args.recipe), "anchors": args.anchors, "seed": args.seed,
                                     "kinds": table, "overall": overall}, indent=1), what="results")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
