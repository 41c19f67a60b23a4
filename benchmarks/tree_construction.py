"""Per-round tree-construction latency: sequential correction + heap vs DARTree vs DDTree's heap.

All methods build a tree from the same random Domino-shaped proposal with the same random GRU correction
head (Qwen3-4B sizes by default: backbone hidden 2560, GRU hidden 1024, projection 256, vocabulary 151936
of which only the K candidate rows of ``W2`` are gathered per round):

* ``heap``: DDTree's best-first heap over the base marginals (no correction; reference);
* ``heap_sequential``: best-first heap with one corrector call per popped node;
* ``dartree``: depth-wise batched expansion (pruned, width W) followed by ``deferred_topb``;
* ``chain_then_heap``: the corrected greedy chain, then the heap over its rows.

Methods are interleaved round by round (rotating their order) so drifts in machine load hit all of them.
Each method gets its own proposal object, so no method reuses another's per-round tables. Besides wall-clock
latency the table reports the process CPU time of each build, which is less sensitive to other processes
competing for the cores of a shared machine.

Usage::

    .venv/bin/python benchmarks/tree_construction.py --rounds 30
    .venv/bin/python benchmarks/tree_construction.py --vocab 32000 --hidden 1024 --out runs/small.json
    python benchmarks/tree_construction.py --device cuda --threads 0     # on a GPU (benchmarks/accelerator_check.py)
    .venv/bin/python benchmarks/tree_construction.py --smoke             # seconds: small sizes, 3 rounds

On an accelerator every build is timed between two device synchronisations, so the time is the work's and not
its kernel launches'.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import torch
from _frame import BenchParser, apply_threads, count, name_list, run_script
from specframe_trees.builders import (
    ChainThenHeapBuilder,
    ChainThenHeapConfig,
    DARTreeBuilder,
    DARTreeConfig,
    HeapBuilder,
    HeapConfig,
    HeapSequentialBuilder,
    HeapSequentialConfig,
)
from specframe_trees.correctors import GRUCorrector, RandomGRUConfig, build_random_gru
from specframe_trees.pruners import DeferredTopBConfig, DeferredTopBPruner

from specframe.device_sync import synchronize
from specframe.files import write_text
from specframe.interfaces import Corrector, RoundContext
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree, check_tree
from specframe.types import DraftProposal, SamplingParams

METHODS = ("heap", "heap_sequential", "dartree", "chain_then_heap")
#: ``--smoke``: a small head and vocabulary, 3 timed rounds after 1 warm-up.
SMOKE = {"vocab": 4096, "hidden": 256, "gru_hidden": 128, "emb_dim": 64, "rounds": 3, "warmup": 1}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=count(), default=30, help="timed rounds per method")
    ap.add_argument("--warmup", type=count(0), default=3, help="untimed rounds per method first")
    ap.add_argument("--depth", type=count(), default=16, help="L: proposal depth and max tree depth")
    ap.add_argument("--candidates", type=count(), default=64, help="K: candidates per depth")
    ap.add_argument("--width", type=count(), default=12, help="W: dartree width per depth")
    ap.add_argument("--budget", type=count(), default=64, help="B: verification budget")
    ap.add_argument("--beta", type=float, default=-0.2, help="deferred_topb depth bonus")
    ap.add_argument("--hidden", type=count(), default=2560, help="H: backbone hidden size (Qwen3-4B: 2560)")
    ap.add_argument("--gru-hidden", type=count(), default=1024, help="G: GRU hidden size")
    ap.add_argument("--emb-dim", type=count(), default=256, help="E: projection width")
    ap.add_argument("--vocab", type=count(2), default=151936, help="V: vocabulary size")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="head dtype")
    ap.add_threads(1)  # 1 avoids OpenMP stalls on a shared, busy CPU
    ap.add_argument("--methods", type=name_list(METHODS), default=list(METHODS),
                    help="comma-separated subset of " + ", ".join(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="where the proposal, the head and the builders run (cpu, cuda)")
    ap.add_smoke("small head and vocabulary, 3 rounds")
    ap.add_output("runs/bench_tree_construction.json")
    args = ap.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    if args.vocab < args.candidates:
        ap.error(f"argument --vocab: {args.vocab} is fewer than --candidates {args.candidates}")
    return args


def random_proposal(args: argparse.Namespace, g: torch.Generator) -> DraftProposal:
    """A batch-1 proposal on ``args.device``: K distinct candidates per depth with peaked, sorted base log-probs."""
    tokens = torch.stack([torch.randperm(args.vocab, generator=g)[: args.candidates] for _ in range(args.depth)])
    logits = torch.randn(args.depth, args.candidates, generator=g) * 2.5
    logprobs = torch.log_softmax(logits, dim=-1) + torch.log(torch.tensor(0.95))  # 5% mass off the candidates
    logprobs = torch.sort(logprobs, dim=-1, descending=True).values
    dev = torch.device(args.device)
    return DraftProposal(
        root=torch.randint(args.vocab, (1,), generator=g).to(dev),
        tokens=tokens[None].to(dev),
        logprobs=logprobs[None].to(dev),
        features=torch.randn(1, args.depth, args.hidden, generator=g).to(dev),
    )


def make_methods(args: argparse.Namespace, corrector: Corrector) -> dict[str, Callable[[DraftProposal], DraftTree]]:
    noise = RoundNoise.from_seed(args.seed, device=args.device)
    ctx = RoundContext(budget=args.budget, sampling=SamplingParams(), noise=noise)
    shape = {"max_depth": args.depth, "candidates": args.candidates}
    heap = HeapBuilder(HeapConfig(**shape))
    sequential = HeapSequentialBuilder(HeapSequentialConfig(**shape))
    dartree = DARTreeBuilder(DARTreeConfig(mode="pruned", width=args.width, **shape))
    pruner = DeferredTopBPruner(DeferredTopBConfig(beta=args.beta))
    chain_heap = ChainThenHeapBuilder(ChainThenHeapConfig(**shape))
    table = {
        "heap": lambda p: heap.build(p, corrector, ctx),
        "heap_sequential": lambda p: sequential.build(p, corrector, ctx),
        "dartree": lambda p: pruner.prune(dartree.build(p, corrector, ctx), ctx),
        "chain_then_heap": lambda p: chain_heap.build(p, corrector, ctx),
    }
    return {m: table[m] for m in args.methods}


def summarize(samples_ms: list[float]) -> dict[str, float]:
    xs = sorted(samples_ms)
    q = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) > 1 else [xs[0]] * 9
    return {"median_ms": statistics.median(xs), "p10_ms": q[0], "p90_ms": q[8], "mean_ms": statistics.fmean(xs),
            "n": len(xs)}


def print_table(stats: dict[str, dict[str, float]], cpu: dict[str, dict[str, float]], nodes: dict[str, float],
                ratios: dict[str, float]) -> None:
    headers = ("method", "median ms", "p10 ms", "p90 ms", "median CPU ms", "mean nodes")
    rows = [(m, f"{s['median_ms']:.2f}", f"{s['p10_ms']:.2f}", f"{s['p90_ms']:.2f}", f"{cpu[m]['median_ms']:.2f}",
             f"{nodes[m]:.1f}") for m, s in stats.items()]
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="tree construction latency per round")
        for h in headers:
            table.add_column(h, justify="left" if h == "method" else "right")
        for r in rows:
            table.add_row(*r)
        Console().print(table)
    except ImportError:
        print(" | ".join(headers))
        for r in rows:
            print(" | ".join(r))
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}x")


def run(args: argparse.Namespace) -> dict[str, object]:
    """Build the trees, print the table and write ``args.out``; the result as written."""
    g = torch.Generator().manual_seed(args.seed)
    t0 = time.perf_counter()
    corrector = build_random_gru(RandomGRUConfig(
        seed=args.seed, hidden_size=args.hidden, gru_hidden=args.gru_hidden, emb_dim=args.emb_dim,
        vocab_size=args.vocab, pure_prefix_len=1, normalize="candidates", low_rank=True, dtype=args.dtype,
    ))
    if args.device != "cpu":
        corrector = GRUCorrector(corrector.head.to(args.device), corrector.embed_weight.to(args.device),
                                 pure_prefix_len=1, normalize="candidates", low_rank=True, name="random_gru")
    setup_s = time.perf_counter() - t0
    methods = make_methods(args, corrector)
    proposals = [random_proposal(args, g) for _ in range(args.warmup + args.rounds)]
    samples: dict[str, list[float]] = {m: [] for m in methods}
    cpu_samples: dict[str, list[float]] = {m: [] for m in methods}
    node_counts: dict[str, list[int]] = {m: [] for m in methods}
    names = list(methods)
    for r, proposal in enumerate(proposals):
        order = names[r % len(names):] + names[: r % len(names)]  # rotate which method runs first
        for name in order:
            own = dataclasses.replace(proposal)  # a distinct object: no shared per-round tables
            synchronize(args.device)
            start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
            tree = methods[name](own)
            synchronize(args.device)
            elapsed_ms = (time.perf_counter_ns() - start) / 1e6
            cpu_ms = (time.process_time_ns() - cpu_start) / 1e6
            if r >= args.warmup:
                samples[name].append(elapsed_ms)
                cpu_samples[name].append(cpu_ms)
                node_counts[name].append(int(tree.num_nodes[0]) - 1)
            if r == 0:
                errors = check_tree(tree, budget=args.budget)
                if errors:
                    raise RuntimeError(f"{name} built an invalid tree: {errors}")
    stats = {m: summarize(s) for m, s in samples.items()}
    cpu = {m: summarize(s) for m, s in cpu_samples.items()}
    nodes = {m: statistics.fmean(c) for m, c in node_counts.items()}
    ratios: dict[str, float] = {}
    for num, den, label in (("heap_sequential", "dartree", " (target >= 2.5)"), ("dartree", "heap", " (target <= 2)"),
                            ("heap_sequential", "chain_then_heap", "")):
        if num in stats and den in stats:
            ratios[f"{num} / {den}{label}"] = stats[num]["median_ms"] / stats[den]["median_ms"]
            ratios[f"{num} / {den} (CPU time)"] = cpu[num]["median_ms"] / cpu[den]["median_ms"]
    print_table(stats, cpu, nodes, ratios)
    result = {
        "benchmark": "tree_construction",
        "smoke": args.smoke,
        "config": {k: str(v) if k == "out" else v for k, v in vars(args).items()},
        "setup_seconds": setup_s,
        "environment": {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": args.device,
                        "machine": platform.machine(), "processor": platform.processor() or platform.platform()},
        "methods": {m: {**stats[m], "cpu": cpu[m], "mean_nodes": nodes[m], "samples_ms": samples[m],
                        "cpu_samples_ms": cpu_samples[m]} for m in stats},
        "ratios": ratios,
    }
    write_text(args.out, json.dumps(result, indent=2), what="benchmark results")
    print(f"wrote {args.out}" + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    before = torch.get_num_threads()
    apply_threads(args.threads)
    try:
        run(args)
    finally:
        torch.set_num_threads(before)
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
