"""τ, tokens/s and speedup of every SmolLM2 method on math, code, chat and translation prompts, and τ versus budget.

Reads the prompt sets where ``specframe datasets`` finds them (``--data DIR``, ``$SPECFRAME_DATA_DIR``,
``../shared/data``, packages; :mod:`prompt_sets`): the first ``--n`` prompts of one split (``--split tune`` by
default; ``--split report``, held out, for a published run with at least 20 per set) of GSM8K, HumanEval, MT-Bench
first turns and Spec-Bench translation (the out-of-distribution set), formatted as in the papers' protocol
(docs/concepts/benchmark-protocol.md). Every method runs on the same prompts with one shared target in one process;
plain decoding is the speedup denominator. Then the tree methods are swept over budgets. Results go to ``--out``
(JSON, with the CPU model and the ``protocol`` record: split, load at the start and through the run, private
cache) and a markdown summary is printed. The script runs under the quiet rule (:mod:`specframe.bench.quiet`).
Each prompt is measured once per method; ``budget: auto`` starts from a cold private cache and learns from the
earlier prompts of its method, as it would serving them (recorded).

Arguments are checked before anything is loaded (``_frame``). Usage::

    .venv/bin/python benchmarks/smollm2_eval.py --n 20 --split report --max-new-tokens 64 --out runs/smollm2-eval.json
    .venv/bin/python benchmarks/smollm2_eval.py --smoke --out /tmp/smollm2-eval.json      # a smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _frame import (
    BenchParser,
    RunProtocol,
    apply_threads,
    count,
    counts,
    measured_run,
    run_script,
    shipped_plain_pipeline,
    use_shipped_checkpoints,
)
from prompt_sets import OUT_OF_DISTRIBUTION, data_dirs, load_prompt_sets, require_sets
from rich.console import Console
from specframe_smollm2.demo import METHODS, QUICK_METHODS, repo_root, results_table, run_methods

from specframe.bench.splits import Split
from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import load_average

#: The sets of the end-to-end evaluation (τ per set, checkpoints/smollm2-135m/eval.json).
EVAL_SETS = ("gsm8k", "humaneval", "mt_bench", OUT_OF_DISTRIBUTION)
#: How ``budget: auto`` learns in a script that measures each prompt once per method (no repeats).
ONLINE_MEMORY = {"memory": "online", "learnt_from": "a cold private cache, then the earlier prompts of the same "
                 "method in this run (each prompt is measured once per method, never after itself)"}


def load_prompts(data: Path | None, n: int, names: tuple[str, ...] = EVAL_SETS, *,
                 split: Split) -> dict[str, list[tuple[str, str]]]:
    """The first ``n`` prompts of ``split`` of each set, as ``(set, text)`` pairs (``data``: ``--data``)."""
    sets = load_prompt_sets(data_dirs(data), n=n, split=split, names=names)
    return {name: [(name, item.text) for item in ps.prompts] for name, ps in sets.items()}


def budget_sweep(prompts: list[tuple[str, str]], budgets: list[int], max_new_tokens: int,
                 console: Console) -> list[dict]:
    """τ and tokens/s of the tree methods at each budget (plain decoding measured once, same process)."""
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    root = repo_root() / "examples" / "smollm2"
    host = PluginHost()
    plain = Pipeline.from_yaml(root / "plain.yaml", host=host)
    plain.generate(prompts[0][1], 4)
    base = [plain.generate(t, max_new_tokens) for _, t in prompts]
    base_tps = sum(len(r.tokens) for r in base) / (sum(r.total_ns for r in base) / 1e9)
    rows = []
    for file in ("ddtree.yaml", "domino-chain-ddtree.yaml", "dartree-fixed.yaml", "dartree-pruned.yaml"):
        pipe = Pipeline.from_yaml(root / file, target=plain.target, host=host)
        for b in budgets:
            p = pipe.with_stage("budget", None, budget=b)
            res = [p.generate(t, max_new_tokens) for _, t in prompts]
            rounds = sum(r.num_rounds for r in res)
            tau = sum(sum(r.accept_lengths()) for r in res) / rounds
            tps = sum(len(r.tokens) for r in res) / (sum(r.total_ns for r in res) / 1e9)
            exact = all(a.tokens == r.tokens for a, r in zip(base, res, strict=True))
            rows.append({"method": file.removesuffix(".yaml"), "budget": b, "tau": round(tau, 3),
                         "tokens_per_s": round(tps, 3), "speedup": round(tps / base_tps, 3), "exact": exact})
            console.print(f"  {file:<26} B={b:<3} τ {tau:5.2f}  {tps:6.2f} tok/s  {tps / base_tps:4.2f}x"
                          f"  {'exact' if exact else 'DIFFERENT'}", highlight=False)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=6, help="prompts per dataset")
    ap.add_split()
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_argument("--budgets", type=counts(), default=[4, 8, 16, 32])
    ap.add_argument("--sweep-n", type=count(), default=3, help="prompts per dataset in the budget sweep")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_output("runs/smollm2-eval.json")
    ap.add_threads(1)  # 1 is faster on shared 2-core machines
    ap.add_protocol()
    ap.add_smoke("1 prompt per set, 4 tokens, 4 methods, one budget")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.max_new_tokens, args.budgets, args.sweep_n = 1, 4, [4], 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(EVAL_SETS, data_dirs(args.data))
    with measured_run(args, args.threads) as run:
        return evaluate(args, run)


def evaluate(args: argparse.Namespace, run: RunProtocol) -> int:
    apply_threads(args.threads)
    use_shipped_checkpoints()
    console = Console(width=None if sys.stdout.isatty() else 160)
    t0 = time.perf_counter()
    sets = load_prompts(args.data, args.n, split=args.split)
    methods = [m for m in METHODS if not args.smoke or m[0] in QUICK_METHODS]
    report: dict = {"smoke": args.smoke, "split": args.split, "n": args.n,
                    "max_new_tokens": args.max_new_tokens, "threads": args.threads, "machine": machine_summary(),
                    "load_before": run.start_load, "datasets": {}}
    first_text = next(iter(sets.values()))[0][1]  # sets: name -> [(question id, text)]
    run.set_plain_reference(shipped_plain_pipeline(), first_text)
    for name, prompts in sets.items():
        console.rule(name)
        runs = run_methods(methods, prompts, max_new_tokens=args.max_new_tokens, stream_label=None, console=console)
        table, rows = results_table(runs, methods[0][0])
        console.print(table)
        report["datasets"][name] = rows
        run.probe()  # the machine as fast after this set as before the first?
    if not args.skip_sweep:
        console.rule("τ versus budget (GSM8K + HumanEval)")
        mixed = sets["gsm8k"][: args.sweep_n] + sets["humaneval"][: args.sweep_n]
        report["budget_sweep"] = budget_sweep(mixed, args.budgets, args.max_new_tokens, console)
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    report["load_after"] = load_average()
    report["protocol"] = run.record(prompts_per_set=args.n, controller=ONLINE_MEMORY)
    previous = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    if isinstance(previous, dict) and "corrector_ablation" in previous:  # corrector_ablation.py's, kept
        report["corrector_ablation"] = previous["corrector_ablation"]
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="--out file")
    console.print(f"wrote {args.out} in {report['wall_seconds']:.0f}s"
                  + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
