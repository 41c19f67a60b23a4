"""Recipe ablations for the SmolLM2 drafter: held-out acceptance of each choice against the shipped recipe.

Each variant is ``recipes/smollm2/drafter.yaml`` (stage-1 data) with one change, trained for the same short budget
(``--steps``, a full warm-up + cosine schedule) in its own ``runs/ablate/<variant>`` work directory, one after
another in subprocesses (one torch job at a time). A finished variant is skipped and an interrupted one resumes,
so the script can be rerun until the table is complete. It prints held-out chain τ and per-slot acceptance at
every evaluation and writes ``runs/ablate/ablations.json``.

Arguments are checked before any training starts (``_frame``); the recipe's relative paths are read from the
repository root, where the shipped recipes are written from, so the script runs from any directory. ``--smoke``
trains the base variant for 2 steps (on ``--recipe``, e.g. a tiny test recipe): it checks that the script works.

Usage::

    .venv/bin/python benchmarks/smollm2_recipe_ablations.py --steps 400
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from _frame import REPO, BenchParser, count, name_list, run_script

from specframe.files import write_text

RECIPE = REPO / "recipes" / "smollm2" / "drafter.yaml"
#: variant -> (what it tests, recipe overrides)
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "base": ("shipped recipe: 2 layers from target layers 28-29, block 8, soft weight 0.5", []),
    "random-init": ("draft layers randomly initialised", ["drafter.init_layers=null"]),
    "one-layer": ("1 draft layer (from target layer 29)", ["drafter.num_layers=1", "drafter.init_layers=[29]"]),
    "hard-only": ("no soft (target top-k) loss", ["loss.soft_weight=0"]),
    "block4": ("block size 4 (4 draft slots)", ["drafter.block_size=4"]),
}


def run_variant(recipe: Path, name: str, overrides: list[str], steps: int, out: Path) -> None:
    """Train one variant in a subprocess, from the repository root (the recipes' relative paths start there)."""
    work = out / name
    if (work / "summary.json").exists():
        return
    sets = [f"optim.steps={steps}", f"eval.every={steps // 2}", f"checkpoint_every={steps // 2}",
            f"work_dir={work}", f"output={work / 'ckpt'}", *overrides]
    cmd = [sys.executable, "-m", "specframe.cli", "train", str(recipe), "--no-progress"]
    for s in sets:
        cmd += ["--set", s]
    with (out / f"{name}.log").open("a") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    if done.returncode:
        raise SystemExit(f"variant {name}: `specframe train` failed (exit status {done.returncode}); see "
                         f"{out / f'{name}.log'}")


def collect(out: Path) -> list[dict]:
    rows = []
    for name, (what, overrides) in VARIANTS.items():
        metrics = out / name / "metrics.jsonl"
        if not metrics.exists():
            continue
        evals = {e["step"]: e for e in map(json.loads, metrics.read_text().splitlines()) if "eval_tau" in e}
        summary = out / name / "summary.json"
        cpu = json.loads(summary.read_text())["cpu_seconds"] if summary.exists() else None
        rows.append({"variant": name, "what": what, "overrides": overrides, "cpu_seconds": cpu,
                     "evals": [evals[k] for k in sorted(evals)]})
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_input("--recipe", RECIPE, help="the recipe every variant changes")
    ap.add_argument("--steps", type=count(2), default=400, help="training steps per variant (evaluated at half)")
    ap.add_argument("--variants", type=name_list(list(VARIANTS)), default=list(VARIANTS),
                    help=f"comma-separated, of: {', '.join(VARIANTS)}")
    ap.add_output("runs/ablate", kind="dir", help="one work directory per variant, logs and ablations.json")
    ap.add_argument("--only-table", action="store_true", help="print the table of what exists; train nothing")
    ap.add_smoke("the base variant, 2 steps")
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps, args.variants = 2, ["base"]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.only_table:
        for name in args.variants:
            run_variant(args.recipe, name, VARIANTS[name][1], args.steps, args.out)
    rows = collect(args.out)
    print("| variant | change | step | held-out chain τ | per-slot acceptance |")
    print("|---|---|---|---|---|")
    for r in rows:
        for e in r["evals"]:
            slots = " ".join(f"{a:.2f}" for a in e["eval_slot_acc"])
            print(f"| {r['variant']} | {r['what']} | {e['step']} | {e['eval_tau']:.3f} | {slots} |")
    write_text(args.out / "ablations.json", json.dumps({"steps": args.steps, "rows": rows}, indent=2) + "\n",
               what="ablation results")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
