"""`budget: auto` against fixed budgets and plain decoding on the SmolLM2 pair, side by side in one process.

For each prompt set (the first ``--n`` GSM8K test questions and HumanEval prompts from ``../shared/data``):
plain decoding, DARTree pruned at each fixed budget of ``--budgets``, and every learned method with
``budget: auto``, interleaved per prompt (the method order rotates by one each prompt, so drift of the machine
hits every method alike). Every run decodes the same prompts greedily and is checked token for token against
plain decoding. Reported per row: τ, tokens/s, speedup (median over prompts of the per-prompt ratio,
with the spread as min-max), the mean verified nodes per drafted round and the share of plain rounds.

The script refuses to start on a busy machine (1-minute load average above ``--max-load``) and records the
load before and after. Usage::

    .venv/bin/python benchmarks/auto_budget.py --n 6 --max-new-tokens 64 --out docs/benchmarks/auto-budget/results.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from smollm2_eval import load_prompts
from specframe_smollm2.demo import repo_root

from specframe.metrics.machine_load import load_average, refuse_when_busy

LEARNED = ["dflash-chain", "ddtree", "domino-chain", "domino-chain-ddtree", "dspark-chain", "dartree-fixed",
           "dartree-pruned"]


def row(label: str, results: list[Any], base: list[Any]) -> dict[str, Any]:
    rounds = [r for res in results for r in res.rounds]
    drafted = [r for r in rounds if r.drafted]
    ratios = [(len(r.tokens) / r.total_ns) / (len(b.tokens) / b.total_ns) for r, b in zip(results, base, strict=True)]
    tokens = sum(len(r.tokens) for r in results)
    seconds = sum(r.total_ns for r in results) / 1e9
    return {
        "method": label,
        "tau": round(sum(r.committed for r in rounds) / max(len(rounds), 1), 3),
        "tokens_per_s": round(tokens / seconds, 3),
        "speedup_total": round((tokens / seconds) / (sum(len(b.tokens) for b in base)
                                                      / (sum(b.total_ns for b in base) / 1e9)), 3),
        "speedup_median": round(statistics.median(ratios), 3),
        "speedup_min": round(min(ratios), 3),
        "speedup_max": round(max(ratios), 3),
        "exact": all(r.tokens == b.tokens for r, b in zip(results, base, strict=True)),
        "verified_nodes": round(sum(r.nodes for r in drafted) / max(len(drafted), 1), 2),
        "plain_round_share": round(1 - len(drafted) / max(len(rounds), 1), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=repo_root().parent / "shared" / "data")
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--budgets", default="4,8,16,32")
    ap.add_argument("--max-budget", type=int, default=32, help="auto's upper bound")
    ap.add_argument("--methods", default=",".join(LEARNED), help="methods run with budget: auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-load", type=float, default=0.6)
    ap.add_argument("--out", type=Path, default=Path("runs/auto-budget.json"))
    args = ap.parse_args()
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    console = Console(width=None if sys.stdout.isatty() else 170)
    load_before = refuse_when_busy(args.max_load)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("SPECFRAME_CHECKPOINTS", str(repo_root() / "checkpoints" / "smollm2-135m"))
    root = repo_root() / "examples" / "smollm2"
    host = PluginHost()
    plain = Pipeline.from_yaml(root / "plain.yaml", host=host)
    target = plain.target
    sets = load_prompts(args.data, args.n)
    report: dict[str, Any] = {"n": args.n, "max_new_tokens": args.max_new_tokens, "threads": args.threads,
                              "load_before": load_before, "datasets": {}}
    t0 = time.perf_counter()
    dart = Pipeline.from_yaml(root / "dartree-pruned.yaml", target=target, host=host)
    methods: dict[str, Any] = {"plain decoding": plain}
    for b in [int(x) for x in args.budgets.split(",")]:
        methods[f"dartree-pruned B={b}"] = dart.with_stage("budget", None, budget=b)
    for method in args.methods.split(","):
        methods[f"{method} auto"] = Pipeline.from_yaml(
            root / f"{method}.yaml", target=target, host=host,
            overrides=["budget=auto", f"auto_budget.max_budget={args.max_budget}"])
    for pipe in methods.values():  # warm-up: first-call allocations, and auto's profile
        pipe.generate(sets["gsm8k"][0][1], 4)
    labels = list(methods)
    for name, pairs in sets.items():
        results: dict[str, list[Any]] = {label: [] for label in labels}
        for i, (_, prompt) in enumerate(pairs):  # methods interleaved per prompt, order rotated by one each time
            for label in labels[i % len(labels):] + labels[: i % len(labels)]:
                results[label].append(methods[label].generate(prompt, args.max_new_tokens))
        base = results["plain decoding"]
        rows = [row(label, results[label], base) for label in labels]
        report["datasets"][name] = rows
        table = Table(title=f"{name}: {args.n} prompts, {args.max_new_tokens} new tokens, {args.threads} thread(s)")
        for col in ("method", "τ", "tok/s", "speedup (total)", "median [min, max]", "exact", "nodes", "plain %"):
            table.add_column(col, justify="left" if col == "method" else "right")
        for r in rows:
            table.add_row(r["method"], f"{r['tau']:.2f}", f"{r['tokens_per_s']:.2f}", f"{r['speedup_total']:.2f}x",
                          f"{r['speedup_median']:.2f} [{r['speedup_min']:.2f}, {r['speedup_max']:.2f}]",
                          "yes" if r["exact"] else "NO", f"{r['verified_nodes']:.1f}",
                          f"{100 * r['plain_round_share']:.0f}")
        console.print(table)
    report["load_after"] = load_average()
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {args.out} in {report['wall_seconds']:.0f}s (load {load_before} -> "
                  f"{report['load_after']})")


if __name__ == "__main__":
    main()
