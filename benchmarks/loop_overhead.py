"""Loop overhead: what a decode round costs besides its model forwards, for every pipeline shape and batch size.

A round of the decode loop runs the target forward, the drafter's forwards (block forward, context extension,
head, and a correction head's calls) and everything else: build, prune, choose, verify, commit, bookkeeping,
host reads, allocation. With tiny models (forwards of a fraction of a millisecond) the round is almost all
"everything else", the cost an engine must keep small on a GPU, where a whole speculative step takes a few
milliseconds. Per round this script reports, as medians over the rounds of ``--repeats`` runs, with the spread
(10th-90th percentile):

* ``round``: the wall time of one round of the loop (every row advanced once);
* ``target``: time inside the target model's forward (outermost calls of the model module);
* ``draft``: time inside the drafter's forwards and the correction head (outside a target forward);
* ``else``: ``round - target - draft`` per round: the framework's own cost, the figure to drive down.

Two model sets:

* ``tiny`` (default): a random 4-layer, 64-wide Llama target (vocabulary 512), made two-way
  (:func:`specframe_hf.testing.two_way_lm`: greedy tokens alternate between two ids, so drafts are accepted and
  commits move cache entries) and random DFlash / Domino drafters of the same width
  (:func:`specframe_diffusion.testing.random_checkpoint`), 1 thread; pipelines: plain, DFlash chain (7 drafts),
  DDTree heap (16 nodes), DARTree fixed (16) and DARTree pruned under ``budget: auto``, and at T = 0.7 a DDTree
  heap under WALK and a sampled tree under tree rejection; batch sizes 1, 2, 4, 8, 16, 32, 64.
* ``smollm2`` (``--models smollm2``): the shipped SmolLM2 pair (examples/smollm2: plain, DFlash chain, DDTree,
  DARTree fixed and pruned ``budget: auto``) at batch sizes 1-8 on held-out GSM8K / HumanEval prompts.

Every speculative output is checked token for token against plain decoding's (greedy pipelines) and the table
says so. The machine is named (``lscpu``); the run is under the quiet rule (:mod:`specframe.bench.quiet`) in a
private cache, all of it recorded (``protocol``). The SmolLM2 prompts are ``tune``-split GSM8K, HumanEval and
Spec-Bench translation prompts in turn.
Usage::

    .venv/bin/python benchmarks/loop_overhead.py --out docs/benchmarks/loop-overhead/tiny.json
    .venv/bin/python benchmarks/loop_overhead.py --models smollm2 --batch-sizes 1,2,4,8 --max-new-tokens 48 \\
        --out docs/benchmarks/loop-overhead/smollm2.json
    .venv/bin/python benchmarks/loop_overhead.py --smoke          # seconds: every shape at batch 1 and 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from _frame import (
    REPO,
    BenchParser,
    RunProtocol,
    apply_threads,
    count,
    counts,
    decoded,
    measured_run,
    name_list,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import SPEED_SETS, data_dirs, interleaved, load_prompt_sets, require_sets
from rich.console import Console
from rich.table import Table

from specframe.device_sync import synchronize
from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import load_average

TINY_BATCHES = (1, 2, 4, 8, 16, 32, 64)
PIPELINES = ("plain", "dflash-chain", "ddtree", "dartree-fixed", "dartree-auto", "ddtree-walk-t0.7",
             "sampled-tree-t0.7")
SMOLLM2_BATCHES = (1, 2, 4, 8)


# --------------------------------------------------------------------------------------------- timing
class ForwardTimer:
    """Nanoseconds spent inside model forwards, by category; only the outermost timed call counts (the target's
    LM head called inside the target's forward is the target's; called by the drafter's head, the drafter's)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.syncing = False  # wait for the device at each reading (while a round_log records)
        self.totals: dict[str, int] = {"target": 0, "draft": 0}
        self._depth = 0
        self._start = 0
        self._category = ""

    def clock(self) -> int:
        """``perf_counter_ns``, while recording once the device's queued work is done (on an accelerator a reading
        right after a call would time the kernel launches, not the work)."""
        if self.syncing:
            synchronize(self.device)
        return time.perf_counter_ns()

    def enter(self, category: str) -> None:
        if self._depth == 0:
            self._start, self._category = self.clock(), category
        self._depth += 1

    def leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.totals[self._category] += self.clock() - self._start

    def snapshot(self) -> dict[str, int]:
        return dict(self.totals)

    def hook_module(self, module: torch.nn.Module, category: str) -> None:
        """Time every call of ``module`` as ``category``."""
        module.register_forward_pre_hook(lambda *_: self.enter(category))
        module.register_forward_hook(lambda *_: self.leave())

    def wrap_method(self, obj: Any, name: str, category: str) -> None:
        """Time every call of the bound method ``obj.name`` as ``category`` (an instance attribute shadows it)."""
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.enter(category)
            try:
                return inner(*args, **kwargs)
            finally:
                self.leave()

        setattr(obj, name, timed)


def instrument(pipe: Any, timer: ForwardTimer) -> None:
    """Time the target's forwards (the lean engine's and transformers' alike) and the drafter's and corrector's
    (once per object)."""
    from specframe_hf.decoder import DecoderForward
    from specframe_hf.runner import ModelRunner

    seen: set[int] = getattr(timer, "_seen", set())
    timer._seen = seen  # type: ignore[attr-defined]
    for cls in (DecoderForward, ModelRunner):  # every target forward goes through one of these
        if id(cls) not in seen:
            seen.add(id(cls))
            _wrap_class_method(timer, cls, "forward", "target")
    drafter = pipe.stages.drafter
    backbone = getattr(drafter, "backbone", None)
    if backbone is not None and id(backbone) not in seen:
        seen.add(id(backbone))
        for method in ("run_block", "extend"):
            timer.wrap_method(backbone, method, "draft")
        head = getattr(drafter, "head", None)
        for module in (getattr(head, "lm_head", None), getattr(head, "sub_head", None),
                       getattr(drafter, "embed_tokens", None)):
            if isinstance(module, torch.nn.Module) and id(module) not in seen:
                seen.add(id(module))
                timer.hook_module(module, "draft")
    corrector = pipe.stages.corrector
    if id(corrector) not in seen:
        seen.add(id(corrector))
        for method in ("init_state", "child_logprobs", "advance"):
            if hasattr(type(corrector), method) and type(corrector).__name__ != "IdentityCorrector":
                timer.wrap_method(corrector, method, "draft")


def _wrap_class_method(timer: ForwardTimer, cls: type, name: str, category: str) -> None:
    inner = getattr(cls, name)

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        timer.enter(category)
        try:
            return inner(self, *args, **kwargs)
        finally:
            timer.leave()

    setattr(cls, name, timed)


@dataclass
class RoundLog:
    """Per-round wall and forward times of one decode call."""

    wall: list[int] = field(default_factory=list)
    target: list[int] = field(default_factory=list)
    draft: list[int] = field(default_factory=list)


@contextmanager
def round_log(timer: ForwardTimer) -> Iterator[RoundLog]:
    """Record every round the decode loop runs inside the block."""
    import specframe.decode.loop as loop

    log = RoundLog()
    inner: Callable[..., Any] = loop.run_round

    def timed_round(*args: Any, **kwargs: Any) -> Any:
        before = timer.snapshot()
        t0 = timer.clock()
        out = inner(*args, **kwargs)
        log.wall.append(timer.clock() - t0)
        after = timer.snapshot()
        log.target.append(after["target"] - before["target"])
        log.draft.append(after["draft"] - before["draft"])
        return out

    loop.run_round = timed_round
    timer.syncing = True
    try:
        yield log
    finally:
        timer.syncing = False
        loop.run_round = inner


# ------------------------------------------------------------------------------------------- pipelines
def tiny_models(workdir: Path) -> tuple[Any, dict[str, Path]]:
    """The tiny two-way Llama target and random DFlash / Domino drafters for it."""
    from specframe_diffusion.testing import random_checkpoint
    from specframe_hf.testing import tiny_causal_lm, two_way_lm

    model = two_way_lm(tiny_causal_lm("llama", seed=3, num_layers=4, hidden_size=64, max_position_embeddings=1024))
    drafters = {family: random_checkpoint(workdir / family, target=model, family=family, block_size=8,
                                          taps=(1, 3), seed=5) for family in ("dflash", "domino")}
    return model, drafters


def tiny_pipelines(drafters: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Pipeline dicts (no target section: the tiny model is passed in) for every shape."""
    dflash = {"type": "dflash", "checkpoint": str(drafters["dflash"]), "top_k": 4}
    domino = {"type": "domino", "checkpoint": str(drafters["domino"]), "top_k": 4}
    base = {"sampling": {"temperature": 0.0}, "corrector": {"type": "identity"}, "pruner": {"type": "none"},
            "verifier": {"type": "auto"}, "seed": 0}
    t07 = {"sampling": {"temperature": 0.7}}
    return {
        "plain": {**base, "name": "plain", "budget": 1, "drafter": {"type": "none"}, "tree_builder": {"type": "chain"}},
        "dflash-chain": {**base, "name": "dflash-chain", "budget": 7, "drafter": dflash,
                         "tree_builder": {"type": "chain"}},
        "ddtree": {**base, "name": "ddtree", "budget": 16, "drafter": dflash, "tree_builder": {"type": "heap"}},
        "dartree-fixed": {**base, "name": "dartree-fixed", "budget": 16, "drafter": domino,
                          "corrector": {"type": "ar"}, "tree_builder": {"type": "dartree", "mode": "fixed"}},
        "dartree-auto": {**base, "name": "dartree-auto", "budget": "auto", "auto_budget": {"max_budget": 16},
                         "drafter": domino, "corrector": {"type": "ar"},
                         "tree_builder": {"type": "dartree", "mode": "pruned", "width": 4},
                         "pruner": {"type": "deferred_topb", "beta": -0.2}},
        "ddtree-walk-t0.7": {**base, **t07, "name": "ddtree-walk-t0.7", "budget": 16, "drafter": dflash,
                             "tree_builder": {"type": "heap"}, "verifier": {"type": "walk"}},
        "sampled-tree-t0.7": {**base, **t07, "name": "sampled-tree-t0.7", "budget": 8, "drafter": dflash,
                              "tree_builder": {"type": "sampled_tree", "branching": [2, 2, 1, 1]},
                              "verifier": {"type": "tree_rejection"}},
    }


def smollm2_pipelines() -> dict[str, Path]:
    ex = REPO / "examples" / "smollm2"
    return {"plain": ex / "plain.yaml", "dflash-chain": ex / "dflash-chain.yaml", "ddtree": ex / "ddtree.yaml",
            "dartree-fixed": ex / "dartree-fixed.yaml", "dartree-auto": ex / "dartree-pruned.yaml"}


# ------------------------------------------------------------------------------------------ measuring
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = q * (len(ordered) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarise(log: RoundLog) -> dict[str, Any]:
    """Medians and 10-90 % spread in milliseconds of each per-round figure."""
    series = {"round": log.wall, "target": log.target, "draft": log.draft,
              "else": [w - t - d for w, t, d in zip(log.wall, log.target, log.draft, strict=True)]}
    out: dict[str, Any] = {"rounds": len(log.wall)}
    for name, values in series.items():
        ms = [v / 1e6 for v in values]
        out[name] = {"median_ms": statistics.median(ms) if ms else float("nan"),
                     "p10_ms": percentile(ms, 0.1), "p90_ms": percentile(ms, 0.9)}
    return out


def measure(pipe: Any, prompts: list[Any], batch: int, max_new: int, repeats: int, timer: ForwardTimer,
            reference: list[list[int]] | None) -> dict[str, Any]:
    """Decode ``prompts`` at ``batch`` rows ``repeats`` times (after one warm-up run); per-round figures."""
    pipe.generate_batch(prompts, max_new, batch_size=batch)  # warm-up: kernels, caches, `budget: auto` profile
    log = RoundLog()
    tokens = taus = 0.0
    outputs: list[list[int]] = []
    for _ in range(repeats):
        with round_log(timer) as one:
            results = decoded(pipe.generate_batch(prompts, max_new, batch_size=batch), f"batch {batch}")
        log.wall += one.wall
        log.target += one.target
        log.draft += one.draft
        outputs = [list(r.tokens) for r in results]
        tokens += sum(len(r.tokens) for r in results)
        taus += sum(r.tau for r in results) / len(results)
    row = summarise(log)
    row["tau"] = taus / repeats
    row["tokens_per_round"] = tokens / max(len(log.wall), 1)
    row["exact"] = None if reference is None else outputs == reference
    return row


def run_tiny(batches: list[int], max_new: int, repeats: int, only: list[str] | None,
             console: Console, compile_forward: bool = False, device: str = "cpu",
             run: RunProtocol | None = None) -> list[dict[str, Any]]:
    from specframe_hf import HFTarget

    from specframe.pipeline import Pipeline

    rows: list[dict[str, Any]] = []
    timer = ForwardTimer(device)
    with tempfile.TemporaryDirectory() as tmp:
        model, drafters = tiny_models(Path(tmp))
        target = HFTarget.from_model(model.to(device), compile=compile_forward)
        configs = tiny_pipelines(drafters)
        pipes = {name: Pipeline.from_dict(cfg, target=target) for name, cfg in configs.items()
                 if only is None or name in only or name == "plain"}
        for pipe in pipes.values():
            instrument(pipe, timer)
        gen = torch.Generator().manual_seed(0)
        if run is not None:  # the reference decodes outside round_log, untimed by the forward timer, as warm-ups do
            run.set_plain_reference(pipes["plain"], torch.randint(3, 500, (32,), generator=gen).tolist())
        for batch in batches:
            prompts = [torch.randint(3, 500, (32,), generator=gen).tolist() for _ in range(batch)]
            plain = decoded(pipes["plain"].generate_batch(prompts, max_new, batch_size=batch), "plain decoding")
            reference = [list(r.tokens) for r in plain]
            for name, pipe in pipes.items():
                greedy = pipe.sampling.temperature == 0
                row = measure(pipe, prompts, batch, max_new, repeats, timer, reference if greedy else None)
                row |= {"models": "tiny", "pipeline": name, "batch": batch}
                rows.append(row)
                console.print(_line(row))
            if run is not None:
                run.probe()
    return rows


def run_smollm2(batches: list[int], max_new: int, repeats: int, n: int, only: list[str] | None,
                console: Console, compile_forward: bool = False, device: str | None = None,
                data: Path | None = None, run: RunProtocol | None = None) -> list[dict[str, Any]]:

    from specframe.pipeline import Pipeline

    files = {k: v for k, v in smollm2_pipelines().items() if only is None or k in only or k == "plain"}
    overrides = (["target.compile=true"] if compile_forward else []) + ([f"target.device={device}"] if device else [])
    base = Pipeline.from_yaml(files["plain"], overrides=overrides)
    timer = ForwardTimer(base.target.device)
    pipes = {"plain": base}
    for name, path in files.items():
        if name != "plain":
            pipes[name] = Pipeline.from_yaml(path, target=base.target)
    for pipe in pipes.values():
        instrument(pipe, timer)
    wanted = max(n, max(batches))  # tune prompts: a per-round time publishes no per-set figure
    sets = load_prompt_sets(data_dirs(data), n=-(-wanted // len(SPEED_SETS)), split="tune", names=SPEED_SETS)
    prompt_sets = [text for _, text in interleaved(sets, wanted)]
    rows: list[dict[str, Any]] = []
    if run is not None:  # the reference decodes outside round_log, untimed by the forward timer, as warm-ups do
        run.set_plain_reference(pipes["plain"], prompt_sets[0])
    for batch in batches:
        prompts = prompt_sets[: max(n, batch)]
        plain = decoded(pipes["plain"].generate_batch(prompts, max_new, batch_size=batch), "plain decoding")
        reference = [list(r.tokens) for r in plain]
        for name, pipe in pipes.items():
            row = measure(pipe, prompts, batch, max_new, repeats, timer, reference)
            row |= {"models": "smollm2", "pipeline": name, "batch": batch}
            rows.append(row)
            console.print(_line(row))
        if run is not None:
            run.probe()
    return rows


def _line(row: dict[str, Any]) -> str:
    return (f"{row['models']:8s} {row['pipeline']:18s} batch {row['batch']:3d}: round {row['round']['median_ms']:.2f}"
            f" ms, target {row['target']['median_ms']:.2f}, draft {row['draft']['median_ms']:.2f}, else "
            f"{row['else']['median_ms']:.2f}, tau {row['tau']:.2f}, exact {row['exact']}")


def table(rows: list[dict[str, Any]], title: str) -> Table:
    t = Table(title=title)
    for col in ("models", "pipeline", "batch", "round ms", "target ms", "draft ms", "else ms (p10-p90)", "τ",
                "tokens/round", "exact"):
        t.add_column(col)
    for r in rows:
        e = r["else"]
        t.add_row(r["models"], r["pipeline"], str(r["batch"]), f"{r['round']['median_ms']:.2f}",
                  f"{r['target']['median_ms']:.2f}", f"{r['draft']['median_ms']:.2f}",
                  f"{e['median_ms']:.2f} ({e['p10_ms']:.2f}-{e['p90_ms']:.2f})", f"{r['tau']:.2f}",
                  f"{r['tokens_per_round']:.2f}", "-" if r["exact"] is None else ("yes" if r["exact"] else "NO"))
    return t


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", choices=("tiny", "smollm2"), default="tiny")
    ap.add_argument("--batch-sizes", type=counts(), default=None, help="default: tiny 1..64, smollm2 1..8")
    ap.add_argument("--pipelines", type=name_list(PIPELINES), default=None,
                    help="a subset of the pipeline names (plain always runs)")
    ap.add_argument("--max-new-tokens", type=count(), default=None, help="default: tiny 96, smollm2 48")
    ap.add_argument("--repeats", type=count(), default=3)
    ap.add_argument("--device", default=None, help="where the target runs (tiny: cpu; smollm2: the pipeline's)")
    ap.add_argument("--n", type=count(), default=8, help="smollm2: prompts (at least the batch size)")
    ap.add_data()
    ap.add_threads(1)
    ap.add_protocol()
    ap.add_argument("--compile", action="store_true", help="torch.compile the target's lean forward (target "
                                                          "compile: true); the warm-up run includes the compilation")
    ap.add_smoke("batch 1 and 2, 8 tokens, one repeat")
    ap.add_output("runs/loop-overhead.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.batch_sizes = args.batch_sizes or [1, 2]
        args.max_new_tokens = args.max_new_tokens or 8
        args.repeats = 1
    default_batches = TINY_BATCHES if args.models == "tiny" else SMOLLM2_BATCHES
    args.batches = list(args.batch_sizes or default_batches)
    args.max_new = args.max_new_tokens or (96 if args.models == "tiny" else 48)
    args.only = args.pipelines
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.models == "smollm2":
        require_sets(SPEED_SETS, data_dirs(args.data))
    with measured_run(args, args.threads or 1) as run:
        return measure_all(args, run)


def measure_all(args: argparse.Namespace, run: RunProtocol) -> int:
    console = Console(width=None if sys.stdout.isatty() else 170)
    load_before = run.start_load
    apply_threads(args.threads)
    use_shipped_checkpoints()
    machine = machine_summary()
    console.print(f"machine: {machine.get('cpu')} ({machine.get('cores')} cores), {torch.get_num_threads()} "
                  f"thread(s), load {load_before}")
    if args.models == "tiny":
        rows = run_tiny(args.batches, args.max_new, args.repeats, args.only, console, args.compile,
                        args.device or "cpu", run)
    else:
        rows = run_smollm2(args.batches, args.max_new, args.repeats, args.n, args.only, console, args.compile,
                           args.device, args.data, run)
    console.print(table(rows, f"Loop overhead per round ({machine.get('cpu')}, {torch.get_num_threads()} "
                              "thread(s))"))
    doc = {"machine": machine, "device": args.device or ("cpu" if args.models == "tiny" else "pipeline's"),
           "threads": torch.get_num_threads(), "compile": args.compile, "smoke": args.smoke,
           "load_before": load_before, "load_after": load_average(),
           "max_new_tokens": args.max_new, "repeats": args.repeats, "rows": rows,
           "protocol": {**run.record(controller={"memory": "online: budget: auto learns across the repeats of a "
                                                           "round-time measurement"}), "split": "tune"}}
    write_text(args.out, json.dumps(doc, indent=2) + "\n", what="loop overhead results")
    console.print(f"wrote {args.out}")
    inexact = [r for r in rows if r["exact"] is False]
    if inexact:
        console.print(f"[red]{len(inexact)} pipeline(s) did not reproduce plain decoding[/red]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
