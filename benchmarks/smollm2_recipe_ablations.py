"""Recipe ablations for the SmolLM2 drafter: held-out acceptance of each choice against the shipped recipe.

Each variant is ``recipes/smollm2/drafter.yaml`` (stage-1 data) with one change, trained for the same short budget
(``--steps``, a full warm-up + cosine schedule) in its own ``runs/ablate/<variant>`` work directory, one after
another in subprocesses (one torch job at a time). A finished variant is skipped and an interrupted one resumes,
so the script can be rerun until the table is complete. It prints held-out chain τ and per-slot acceptance at
every evaluation and writes ``runs/ablate/ablations.json``.

Usage::

    .venv/bin/python benchmarks/smollm2_recipe_ablations.py --steps 400
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from specframe.files import write_text

RECIPE = "recipes/smollm2/drafter.yaml"
#: variant -> (what it tests, recipe overrides)
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "base": ("shipped recipe: 2 layers from target layers 28-29, block 8, soft weight 0.5", []),
    "random-init": ("draft layers randomly initialised", ["drafter.init_layers=null"]),
    "one-layer": ("1 draft layer (from target layer 29)", ["drafter.num_layers=1", "drafter.init_layers=[29]"]),
    "hard-only": ("no soft (target top-k) loss", ["loss.soft_weight=0"]),
    "block4": ("block size 4 (4 draft slots)", ["drafter.block_size=4"]),
}


def run_variant(name: str, overrides: list[str], steps: int, out: Path) -> None:
    work = out / name
    if (work / "summary.json").exists():
        return
    sets = [f"optim.steps={steps}", f"eval.every={steps // 2}", f"checkpoint_every={steps // 2}",
            f"work_dir={work}", f"output={work / 'ckpt'}", *overrides]
    cmd = [sys.executable, "-m", "specframe.cli", "train", RECIPE, "--no-progress"]
    for s in sets:
        cmd += ["--set", s]
    with (out / f"{name}.log").open("a") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--out", type=Path, default=Path("runs/ablate"))
    ap.add_argument("--only-table", action="store_true", help="print the table of what exists; train nothing")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.only_table:
        for name, (_, overrides) in VARIANTS.items():
            run_variant(name, overrides, args.steps, args.out)
    rows = collect(args.out)
    print("| variant | change | step | held-out chain τ | per-slot acceptance |")
    print("|---|---|---|---|---|")
    for r in rows:
        for e in r["evals"]:
            slots = " ".join(f"{a:.2f}" for a in e["eval_slot_acc"])
            print(f"| {r['variant']} | {r['what']} | {e['step']} | {e['eval_tau']:.3f} | {slots} |")
    write_text(args.out / "ablations.json", json.dumps({"steps": args.steps, "rows": rows}, indent=2) + "\n",
               what="ablation results")


if __name__ == "__main__":
    main()
