"""How often and how early greedy outputs of bf16 pipelines differ from plain decoding at the same precision, with
the LM head in bf16 and in float32 (``target.logits_dtype``).

In float32 every lossless pipeline reproduces plain decoding token for token. In bf16 it does not always: a verify
forward over q tokens and a one-token forward sum in different orders and round to bf16 differently, so where the
two best logits are closer than that rounding, the tree decode and plain decoding can take different tokens from
there on. This script measures it on the SmolLM2 pair:

* for each ``--logits`` setting (``auto``: the bf16 head; ``float32``: :mod:`specframe_hf.head_precision`, the
  cheap fix), one bf16 target (``--dtype``, ``--device``) shared by plain decoding and every ``--methods``
  pipeline (drafters follow the target's dtype);
* on ``--n`` prompts per set (:mod:`prompt_sets`, split ``--split``, held out by default);
* per method and set: how many outputs differ from plain decoding at the same precision (mismatch rate) and the
  first position where each differs (first divergence, 0 = the first new token), plus how many of plain bf16
  decoding's outputs differ from plain float32 decoding's (how far the precision itself moves the text);
* tokens/s and speedup over plain decoding at the same precision (for the row of plain bf16 decoding itself: its
  speed over plain float32 decoding, measured before it in the same process), labelled with whether the device
  has native bf16 (:func:`specframe.metrics.machine_info.native_bf16`): elsewhere bf16 speeds say nothing.

It runs under the quiet rule (:mod:`specframe.bench.quiet`; ``--smoke`` skips the check) in a private cache, on
the ``tune`` split unless ``--split report`` is given (at least 20 prompts per set); the prompt sets are found where
``specframe datasets`` finds them, and include Spec-Bench translation (the out-of-distribution set).
Arguments are checked before anything is loaded (``_frame``).

Usage::

    .venv/bin/python benchmarks/bf16_exactness.py --n 20 --out runs/bf16-exactness.json
    .venv/bin/python benchmarks/bf16_exactness.py --smoke --out /tmp/bf16-smoke.json      # a smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from _frame import (
    BenchParser,
    RunProtocol,
    apply_threads,
    count,
    measured_run,
    name_list,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import OUT_OF_DISTRIBUTION, SETS, PromptSet, data_dirs, load_prompt_sets, require_sets
from rich.console import Console
from rich.table import Table
from specframe_smollm2.demo import repo_root

from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary, native_bf16
from specframe.metrics.machine_load import load_average
from specframe.metrics.records import GenerationResult

DEFAULT_METHODS = ["prompt-lookup-chain", "dartree-pruned-b16", "dartree-pruned"]
#: The fp32 pipeline files of ``examples/smollm2`` a method may name.
PIPELINES = sorted(p.stem for p in (repo_root() / "examples" / "smollm2").glob("*.yaml")
                   if not p.stem.endswith("-bf16"))
LOGITS = ("auto", "float32")


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where two outputs differ (a shorter output differs where it ends); None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def mismatch(results: Sequence[GenerationResult], base: Sequence[GenerationResult]) -> dict[str, Any]:
    """Mismatch rate and first-divergence positions of ``results`` against ``base`` (paired by prompt)."""
    where = [first_divergence(r.tokens, b.tokens) for r, b in zip(results, base, strict=True)]
    hits = [w for w in where if w is not None]
    return {"prompts": len(where), "differ": len(hits), "rate": round(len(hits) / max(len(where), 1), 4),
            "first_divergence": where, "median_divergence": statistics.median(hits) if hits else None,
            "earliest_divergence": min(hits) if hits else None}


def speed(results: Sequence[GenerationResult]) -> float:
    return sum(len(r.tokens) for r in results) / (sum(r.total_ns for r in results) / 1e9)


def build(args: argparse.Namespace, logits: str | None) -> tuple[Any, dict[str, Any]]:
    """Plain decoding and the methods on one target: ``--dtype`` with ``logits`` (None: float32)."""
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    root = repo_root() / "examples" / "smollm2"
    host = PluginHost()
    dtype = "float32" if logits is None else args.dtype
    overrides = [f"target.dtype={dtype}", f"target.device={args.device}",
                 f"target.logits_dtype={logits or 'auto'}"]
    plain = Pipeline.from_yaml(root / "plain.yaml", overrides=overrides, host=host)
    methods = {} if logits is None else {
        name: Pipeline.from_yaml(root / f"{name}.yaml", target=plain.target, host=host)
        for name in args.methods}
    return plain, methods


def decode(plain: Any, methods: dict[str, Any], sets: dict[str, PromptSet], max_new: int) -> dict[str, Any]:
    """``{set: {label: [results]}}`` with ``plain`` under the label ``plain``; methods interleaved per prompt."""
    plain.generate(next(iter(sets.values())).prompts[0].text, 4)  # warm-up
    out: dict[str, dict[str, list[GenerationResult]]] = {}
    for name, prompts in sets.items():
        runs: dict[str, list[GenerationResult]] = {"plain": [], **{m: [] for m in methods}}
        for item in prompts.prompts:
            runs["plain"].append(plain.generate(item.text, max_new))
            for label, pipe in methods.items():
                runs[label].append(pipe.generate(item.text, max_new))
        out[name] = runs
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=20, help="prompts per set")
    ap.add_split()
    ap.add_argument("--sets", type=name_list(SETS),
                    default=["gsm8k", "humaneval", "mt_bench", "alpaca", OUT_OF_DISTRIBUTION])
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_argument("--methods", type=name_list(PIPELINES, allow_empty=True), default=DEFAULT_METHODS,
                    help="pipeline files of examples/smollm2 (fp32 names)")
    ap.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--logits", type=name_list(LOGITS), default=list(LOGITS), help="logits_dtype settings compared")
    ap.add_threads(1)
    ap.add_protocol()
    ap.add_smoke("2 GSM8K prompts, 8 tokens, DARTree pruned B=16")
    ap.add_output("runs/bf16-exactness.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.max_new_tokens, args.methods, args.sets = 2, 8, ["dartree-pruned-b16"], ["gsm8k"]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(args.sets, data_dirs(args.data))
    with measured_run(args, args.threads or 1) as run:
        return compare(args, run)


def compare(args: argparse.Namespace, run: RunProtocol) -> int:
    load_before = run.start_load
    console = Console(width=None if sys.stdout.isatty() else 180)
    apply_threads(args.threads)
    use_shipped_checkpoints()
    sets = load_prompt_sets(data_dirs(args.data), n=args.n, split=args.split, names=args.sets)
    native = native_bf16(args.device)
    report: dict[str, Any] = {"smoke": args.smoke, "machine": machine_summary(), "device": args.device,
                              "dtype": args.dtype, "native_bf16": native, "threads": args.threads,
                              "split": args.split, "n": args.n, "max_new_tokens": args.max_new_tokens,
                              "load_before": load_before, "settings": {}}
    t0 = time.perf_counter()
    plain32, _ = build(args, None)
    fp32 = decode(plain32, {}, sets, args.max_new_tokens)
    del plain32
    for logits in args.logits:
        plain, methods = build(args, logits)
        runs = decode(plain, methods, sets, args.max_new_tokens)
        rows = []
        for name, by_label in runs.items():
            base = by_label["plain"]
            rows.append({"set": name, "method": f"plain {args.dtype} vs plain float32",
                         **mismatch(base, fp32[name]["plain"]), "tokens_per_s": round(speed(base), 3),
                         "speedup_vs_plain": round(speed(base) / speed(fp32[name]["plain"]), 3)})
            for label in methods:
                rows.append({"set": name, "method": label, **mismatch(by_label[label], base),
                             "tokens_per_s": round(speed(by_label[label]), 3),
                             "speedup_vs_plain": round(speed(by_label[label]) / speed(base), 3)})
        report["settings"][logits] = rows
        table = Table(title=f"{args.dtype}, logits_dtype: {logits}; outputs against plain decoding at the same "
                            f"precision ({len(next(iter(sets.values())).prompts)} {args.split} prompts per set, "
                            f"{args.max_new_tokens} tokens)", title_justify="left")
        for col in ("set", "method", "differ", "rate", "first divergence (median, earliest)", "tok/s",
                    "speedup" + ("" if native else " (no native bf16!)")):
            table.add_column(col, justify="left" if col in ("set", "method") else "right")
        for r in rows:
            where = "-" if r["differ"] == 0 else f"{r['median_divergence']}, {r['earliest_divergence']}"
            table.add_row(r["set"], r["method"], f"{r['differ']}/{r['prompts']}", f"{100 * r['rate']:.0f}%", where,
                          f"{r['tokens_per_s']:.2f}", f"{r['speedup_vs_plain']:.2f}x")
        console.print(table)
        del plain, methods
    report["load_after"] = load_average()
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    report["protocol"] = run.record(prompts_per_set=args.n)
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="benchmark results")
    machine = report["machine"]
    console.print(f"{machine['cpu']}, device {args.device} ({'native' if native else 'NO native'} {args.dtype} "
                  f"support: speeds {'comparable' if native else 'meaningless'}); wrote {args.out} in "
                  f"{report['wall_seconds']:.0f}s" + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
