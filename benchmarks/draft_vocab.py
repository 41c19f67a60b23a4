"""Reduced draft vocabulary: drafter time per round and τ at 8k, 16k, 32k and the full vocabulary, side by side.

One process, one shared SmolLM2 target. For every GSM8K, HumanEval and translation prompt (the first ``--n`` of
each, formatted as in ``smollm2_eval.py``) every variant of ``--pipeline`` and the plain loop (the speedup's
denominator and the greedy-equality check; transformers' ``generate()`` right after it, for as many tokens)
decode the prompt, in an order rotated per prompt, before the next prompt: the run is **interleaved** and each
prompt is one **block** (:mod:`specframe.bench.steadiness`), timed around by the reference workload (the plain
loop on a fixed tune prompt) and measured again when the machine's speed moved within it. Every ratio the
script reports compares decodes of the same blocks. Per variant it reports

* the drafter's time per round (the ``draft`` stage: backbone forward + LM head + top-K), median over every round
  with the 10th-90th percentile spread, and its ratio to the full vocabulary's;
* τ (pooled: committed tokens / rounds) and its change against the full vocabulary's, in percent;
* tokens/s; speculation's gain over the plain loop (Σ tokens / Σ time, paired by prompt, with its 95 % bootstrap
  interval over prompts: ``vs_plain_loop``); whether every greedy output equals plain decoding's; and, once for
  the run, the plain loop's own gain over ``generate()`` (``plain_loop_vs_generate``: the kernel gain, quoted apart
  from speculation's) and whether the plain loop's outputs equal ``generate()``'s;
* the LM head alone (``DraftVocabHead`` on fixed random features, ``--head-reps`` interleaved calls, one more
  block after the prompts'): the part of the drafter that the subset shrinks, free of the backbone's and the
  tree's noise;
* the machine load during the variant's requests (:mod:`specframe.metrics.machine_load`).

The script runs under the quiet rule (:mod:`specframe.bench.quiet`; ``--force`` runs anyway, recorded as not quiet)
in a private cache, on the ``tune`` split unless ``--split report`` (at least 20 per set) is given, on GSM8K,
HumanEval and Spec-Bench translation (the out-of-distribution set); the ``budget: auto`` controllers are frozen
after the warm-up and restored before every measured request. Arguments
(the mapping of every size included) are checked before anything is loaded (``_frame``).

Usage (on a quiet machine; the shipped mappings are in checkpoints/smollm2-135m/draft-vocab)::

    .venv/bin/python benchmarks/draft_vocab.py --n 10 --max-new-tokens 96 --out runs/draft-vocab.json
    .venv/bin/python benchmarks/draft_vocab.py --smoke --out /tmp/draft-vocab.json     # a smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from _frame import (
    REPO,
    BenchParser,
    RunProtocol,
    apply_threads,
    count,
    measured_run,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import SPEED_SETS, data_dirs, require_sets
from rich.console import Console
from rich.table import Table
from smollm2_eval import load_prompts  # the same prompts as the end-to-end evaluation

from specframe.files import write_text
from specframe.metrics.gains import estimate_to_json, paired_gain
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import LoadWindow, MachineLoad
from specframe.reference import reference_result

FULL = "full"
#: The key of transformers' generate() among the run's sides.
GENERATE = "generate()"
#: What one block of the run holds (recorded as the run's ``pairing``).
BLOCK_CONTENTS = ("one prompt decoded by the plain loop (generate() right after it) and every draft vocabulary, "
                  "in an order rotated per prompt")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def _mapping(vocab_dir: Path, size: str) -> str:
    """The draft-vocabulary file of ``size`` under ``vocab_dir`` (``full``: none)."""
    if size == FULL:
        return FULL
    n = int(size)
    name = f"fr{n // 1024}k.safetensors" if n % 1024 == 0 else f"fr{n}.safetensors"
    return str(vocab_dir / name)


def _sizes(text: str) -> list[str]:
    """``--sizes``: comma-separated vocabulary sizes (whole numbers >= 1) and/or ``full``."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    bad = [item for item in items if item != FULL and not (item.isdigit() and int(item) >= 1)]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"expected sizes >= 1 and/or `full`, got {text!r}")
    return items


def head_times(pipes: dict[str, Any], reps: int, slots: int) -> dict[str, dict[str, float]]:
    """Milliseconds per LM-head call of each variant's drafter on the same random features, interleaved."""
    heads = {name: pipe.stages.drafter.head for name, pipe in pipes.items()}
    width = next(iter(pipes.values())).stages.drafter.config.hidden_size
    x = torch.randn(1, slots, width, generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {name: [] for name in heads}
    names = list(heads)
    for name in names:  # warm-up
        heads[name](x, 32)
    for i in range(reps):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            t0 = time.perf_counter_ns()
            heads[name](x, 32)
            times[name].append((time.perf_counter_ns() - t0) / 1e6)
    return {name: {"median_ms": statistics.median(v), "p10_ms": _percentile(v, 0.1), "p90_ms": _percentile(v, 0.9)}
            for name, v in times.items()}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=10, help="prompts per set (GSM8K, HumanEval, translation)")
    ap.add_split()
    ap.add_argument("--max-new-tokens", type=count(), default=96)
    ap.add_input("--pipeline", REPO / "examples" / "smollm2" / "dartree-pruned.yaml", help="the pipeline file")
    ap.add_argument("--sizes", type=_sizes, default=["8192", "16384", "32768", FULL],
                    help="comma-separated sizes and/or `full`")
    ap.add_input("--vocab-dir", REPO / "checkpoints" / "smollm2-135m" / "draft-vocab", kind="dir",
                 help="where the fr<N>k.safetensors mappings are")
    ap.add_argument("--head-reps", type=count(0), default=200, help="LM-head-only calls per variant (0: skip)")
    ap.add_threads(1)
    ap.add_protocol()
    ap.add_smoke("1 prompt per dataset, 4 tokens, the 8k and full vocabularies, 2 head calls")
    ap.add_output("runs/draft-vocab.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.max_new_tokens, args.sizes, args.head_reps = 1, 4, ["8192", FULL], 2
    mappings = [_mapping(args.vocab_dir, size) for size in args.sizes]
    missing = [m for m in mappings if m != FULL and not Path(m).is_file()]
    if missing:
        ap.error(f"argument --sizes: no mapping {missing[0]}; build it with `specframe vocab-subset ... --size N`")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(SPEED_SETS, data_dirs(args.data))
    with measured_run(args, args.threads or 1) as run:
        return compare(args, run)


def compare(args: argparse.Namespace, run: RunProtocol) -> int:
    console = Console(width=None if sys.stdout.isatty() else 160)
    load1 = run.start_load
    console.print(f"1-minute load average before starting: {load1 if load1 is not None else 'unknown'}")
    apply_threads(args.threads)
    use_shipped_checkpoints()

    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    sets = load_prompts(args.data, args.n, names=SPEED_SETS, split=args.split)
    prompts = [pair for name in SPEED_SETS for pair in sets[name]]
    host = PluginHost()
    plain = Pipeline.from_yaml(REPO / "examples" / "smollm2" / "plain.yaml", host=host)
    base = Pipeline.from_yaml(args.pipeline, target=plain.target, host=host)
    drafter = base.config.drafter.model_dump(mode="python", exclude_none=True)
    sizes = args.sizes
    pipes = {size: base.with_stage("drafter", drafter | {"draft_vocab": _mapping(args.vocab_dir, size)})
             for size in sizes}
    warm = load_prompts(args.data, 1, names=("gsm8k",), split="tune")["gsm8k"][0][1]
    plain.generate(warm, 4)
    for pipe in pipes.values():
        pipe.generate(warm, 8)  # warm-up on a tune prompt (first-call allocations, auto's profile)
    freeze = run.freeze_controllers([plain, *pipes.values()])
    run.set_plain_reference(plain, warm)
    run.interleave(BLOCK_CONTENTS)
    variants = ["plain", *sizes]
    results: dict[str, list[Any]] = {v: [] for v in (*variants, GENERATE)}
    loads: dict[str, list[MachineLoad]] = {v: [] for v in variants}
    t0 = time.perf_counter()
    run.open_block()
    for i, (kind, text) in enumerate(prompts):
        for attempt in run.blocks():  # one block: this prompt on every side; a try whose machine moved is dropped
            shift = i % len(variants)
            block: dict[str, tuple[Any, MachineLoad | None]] = {}
            for v in variants[shift:] + variants[:shift]:
                pipe = plain if v == "plain" else pipes[v]
                freeze.restore()
                with LoadWindow() as window:
                    result = pipe.generate(text, args.max_new_tokens)
                block[v] = (result, window.load)
                if v == "plain":  # generate() on the same prompt for as many tokens, right after
                    block[GENERATE] = (reference_result(plain, plain.encode(text), new_tokens=len(result.tokens),
                                                        seed=result.seed or 0)[0], None)
            if attempt.close():
                for v, (result, load) in block.items():
                    results[v].append(result)
                    if load is not None:
                        loads[v].append(load)
        console.print(f"  prompt {i + 1}/{len(prompts)} ({kind}) done", highlight=False)
    slots = base.stages.drafter.max_depth()
    assert slots is not None  # the block drafter: one depth per slot
    heads: dict[str, dict[str, float]] = {}
    if args.head_reps:
        for attempt in run.blocks():  # the LM heads' interleaved calls: one more block
            timed = head_times(pipes, args.head_reps, slots)
            if attempt.close():
                heads = timed

    plain_tps = sum(len(r.tokens) for r in results["plain"]) / (sum(r.total_ns for r in results["plain"]) / 1e9)
    rows: list[dict[str, Any]] = []
    for v in sizes:
        res = results[v]
        # the drafted rounds only (`budget: auto` decodes some rounds plainly, whose draft time is zero)
        draft_ms = [rd.stage_ns.get("draft", 0) / 1e6 for r in res for rd in r.rounds if rd.drafted] or [0.0]
        round_ms = [rd.round_ns / 1e6 for r in res for rd in r.rounds]
        rounds = sum(r.num_rounds for r in res)
        tps = sum(len(r.tokens) for r in res) / (sum(r.total_ns for r in res) / 1e9)
        load = MachineLoad.merge(loads[v])
        rows.append({
            "draft_vocab": v, "rounds": rounds,
            "draft_ms_median": statistics.median(draft_ms), "draft_ms_p10": _percentile(draft_ms, 0.1),
            "draft_ms_p90": _percentile(draft_ms, 0.9), "round_ms_median": statistics.median(round_ms),
            "draft_share": sum(draft_ms) / sum(round_ms),
            "tau": sum(sum(r.accept_lengths()) for r in res) / rounds,
            "tau_per_prompt": [round(r.tau, 3) for r in res],
            "tokens_per_s": tps,
            "vs_plain_loop": estimate_to_json(paired_gain(res, results["plain"])),
            "exact": all(a.tokens == b.tokens for a, b in zip(res, results["plain"], strict=True)),
            "head": heads.get(v), "machine_load": load.to_dict() if load else None,
        })
    ref = next((r for r in rows if r["draft_vocab"] == FULL), None)
    table = Table(title=f"{args.pipeline.name}: {len(prompts)} prompts x {args.max_new_tokens} tokens, "
                        f"{args.threads} thread(s)", title_justify="left")
    for col in ("draft vocab", "draft ms/round [p10-p90]", "vs full", "LM head ms", "τ", "τ vs full", "tok/s",
                "vs plain loop [95 %]", "exact", "contended"):
        table.add_column(col, justify="left" if col == "draft vocab" else "right")
    for r in rows:
        if ref is not None:
            r["draft_time_ratio_vs_full"] = (ref["draft_ms_median"] / r["draft_ms_median"]
                                             if r["draft_ms_median"] > 0 else None)
            r["tau_change_vs_full_pct"] = 100 * (r["tau"] / ref["tau"] - 1)
        head = r["head"]
        table.add_row(
            r["draft_vocab"], f"{r['draft_ms_median']:.2f} [{r['draft_ms_p10']:.2f}-{r['draft_ms_p90']:.2f}]",
            f"{r.get('draft_time_ratio_vs_full') or float('nan'):.2f}x faster",
            f"{head['median_ms']:.2f}" if head else "—", f"{r['tau']:.3f}",
            f"{r.get('tau_change_vs_full_pct', float('nan')):+.1f}%", f"{r['tokens_per_s']:.2f}",
            "{value:.2f}x [{low:.2f}, {high:.2f}]".format(**r["vs_plain_loop"]), "yes" if r["exact"] else "NO",
            str((r["machine_load"] or {}).get("contended")))
    console.print(table)
    if any((r["machine_load"] or {}).get("contended") for r in rows):
        console.print("warning: other processes loaded the machine during the measurement; rerun on a quiet "
                      "machine", style="bold yellow")
    kernel_gain = paired_gain(results["plain"], results[GENERATE])
    kernel_exact = all(a.tokens == b.tokens for a, b in zip(results["plain"], results[GENERATE], strict=True))
    console.print(f"plain loop vs generate(): {kernel_gain.format()} (outputs {'equal' if kernel_exact else 'DIFFER'})",
                  highlight=False)
    machine = machine_summary()  # every speed figure names its CPU (a timed file without one is not published)
    console.print(f"{machine['cpu']} ({machine['cores']} cores), {args.threads} thread(s)", highlight=False)
    report = {"smoke": args.smoke, "pipeline": str(args.pipeline), "n": args.n, "max_new_tokens": args.max_new_tokens,
              "machine": machine, "threads": args.threads, "loadavg_at_start": load1, "split": args.split,
              "plain_tokens_per_s": plain_tps,
              "plain_loop_vs_generate": estimate_to_json(kernel_gain), "plain_equals_generate": kernel_exact,
              "variants": rows, "wall_seconds": round(time.perf_counter() - t0, 1),
              "protocol": run.record(prompts_per_set=args.n)}
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="benchmark results")
    console.print(f"wrote {args.out}" + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
