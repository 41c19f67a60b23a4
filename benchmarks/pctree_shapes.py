"""PCTree's tree shape chosen on the tune split: τ of ``examples/smollm2/pctree.yaml`` over a grid of its settings
(a τ table, not a speed table).

PCTree (arXiv 2608.02123) leaves open how many children each node keeps per depth, how many nodes a depth keeps
and whether DSpark's chain is kept whole (:mod:`specframe_trees.builders.pctree`); the design notes give no values.
Every shape of :data:`SHAPES` (``children`` x ``keep_spine``, ``width`` :data:`WIDTH`) is decoded at the pipeline's
fixed budget of 16 nodes on the same prompts (math: GSM8K, code: HumanEval, chat: MT-Bench first turns; the ``tune``
split of :mod:`specframe.bench.splits`: a default is a tuned setting and must not see the held-out report split),
greedy, one shared target, and recorded per set: τ (tokens per verify round, bonus included), the rounds, and
whether every output equals the plain loop's. Every shape spends the same 16 verified nodes and one corrector call
per depth, so at a fixed budget τ is what the shapes trade; the shape with the highest τ pooled over the sets
(each set weighted alike) is the one the builder's defaults should carry, and the file names it (``best``).

Counts do not depend on timing, so the run does not wait for a quiet machine; it still runs under
:func:`_frame.measured_run` with ``--force`` implied (a private cache, the load, split, prompt count, CPU and
commit recorded in ``protocol``). Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pctree_shapes.py --n 8 \
        --out docs/benchmarks/pctree-shapes/tune.json
    .venv/bin/python benchmarks/pctree_shapes.py --smoke --out /tmp/shapes.json     # a smoke run
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _frame import (
    REPO,
    BenchParser,
    apply_threads,
    count,
    measured_run,
    plain_outputs,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import data_dirs, load_prompt_sets, require_sets

from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary

#: Prompt kind -> benchmark set.
KINDS = {"math": "gsm8k", "code": "humaneval", "chat": "mt_bench"}
#: (children per depth, keep_spine): the per-parent counts from a plain chain-with-siblings (2, 1) to a bushy top
#: (4, 2, 1), each with DSpark's chain kept whole or ranked with the alternatives.
SHAPES: tuple[tuple[tuple[int, ...], bool], ...] = tuple(
    (children, spine) for children in ((2, 1), (3, 1), (2, 2, 1), (3, 2, 1), (4, 2, 1)) for spine in (True, False))
PIPELINE = REPO / "examples" / "smollm2" / "pctree.yaml"
#: Nodes kept per depth, the same for every shape (the pipeline's own).
WIDTH = 8


def parse_args(argv: Sequence[str] | None) -> Any:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=8, help="prompts per set (tune split)")
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_output("runs/pctree-shapes.json")
    ap.add_threads(1)
    ap.add_smoke("1 prompt per set, 4 tokens, two shapes")
    args = ap.parse_args(argv)
    args.force, args.split = True, "tune"  # counts do not depend on the load; a default is tuned on tune only
    if args.smoke:
        args.n, args.max_new_tokens = 1, 4
    return args


def best_shape(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The shape the defaults should carry: the highest τ averaged over the sets (each set weighted alike); among
    equals the first in the grid's order (:data:`SHAPES`, the smaller shapes first).

    Example: rows with means 2.01, 2.07, 2.07 -> the second."""
    best = max(rows, key=lambda r: r["tau_mean_over_sets"])  # max keeps the first of equals
    return {"children": best["children"], "keep_spine": best["keep_spine"], "width": best["width"],
            "tau_mean_over_sets": best["tau_mean_over_sets"]}


def label(children: Sequence[int], spine: bool) -> str:
    return f"children {list(children)}, keep_spine {str(spine).lower()}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(tuple(KINDS.values()), data_dirs(args.data))
    with measured_run(args, args.threads or 1) as run:
        from specframe.pipeline import Pipeline

        apply_threads(args.threads)
        use_shipped_checkpoints()
        t0 = time.perf_counter()
        sets = load_prompt_sets(data_dirs(args.data), n=args.n, split="tune", names=tuple(KINDS.values()))
        plain = plain_outputs(sets, KINDS, args.max_new_tokens)
        shapes = SHAPES[:2] if args.smoke else SHAPES
        rows: list[dict[str, Any]] = []
        for children, spine in shapes:
            pipe = Pipeline.from_yaml(PIPELINE, target=plain.plain.target, host=plain.host, overrides=[
                f"tree_builder.children={list(children)}", f"tree_builder.keep_spine={str(spine).lower()}",
                f"tree_builder.width={WIDTH}"])
            per_set = {}
            for kind, texts in plain.prompts.items():
                results = [pipe.generate(text, args.max_new_tokens) for text in texts]
                rounds = sum(r.num_rounds for r in results)
                per_set[kind] = {
                    "rounds": rounds, "tau": round(sum(sum(r.accept_lengths()) for r in results) / rounds, 4),
                    "exact": all(r.tokens == ref for r, ref in zip(results, plain.tokens[kind], strict=True))}
            rows.append({"children": list(children), "keep_spine": spine, "width": WIDTH,
                         "budget": pipe.config.max_budget, "sets": per_set,
                         "tau_mean_over_sets": round(statistics.fmean(s["tau"] for s in per_set.values()), 4)})
            print(f"{label(children, spine)}: " + ", ".join(
                f"{k} τ {v['tau']:.3f}{'' if v['exact'] else ' DIFFERS'}" for k, v in per_set.items()), flush=True)
        best = best_shape(rows)
        report = {"what": "PCTree shapes at a fixed budget: τ per set (no speed)", "pipeline": str(
                      PIPELINE.relative_to(REPO)), "smoke": args.smoke, "split": "tune", "n": args.n,
                  "max_new_tokens": args.max_new_tokens, "threads": args.threads, "machine": machine_summary(),
                  "rows": rows, "best": best,
                  "every_output_exact": all(s["exact"] for r in rows for s in r["sets"].values()),
                  "wall_seconds": round(time.perf_counter() - t0, 1),
                  "protocol": run.record(prompts_per_set=args.n, controller={"memory": "none: fixed budgets"},
                                         timed=False)}
    write_text(Path(args.out), json.dumps(report, indent=2) + "\n", what="--out file")
    print(f"best: {label(best['children'], best['keep_spine'])} (mean τ {best['tau_mean_over_sets']:.3f}); wrote "
          f"{args.out} in {report['wall_seconds']:.0f}s" + ("; SMOKE: not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
