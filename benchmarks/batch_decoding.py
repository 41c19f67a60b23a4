"""Batched decoding: tokens/s against batch size for transformers' batched ``generate()``, plain decoding and
DARTree with ``budget: auto``, SmolLM2 pair.

For each batch size of ``--batch-sizes`` (default 1, 2, 4, 8, 16), the same ``--n`` prompts (GSM8K test questions,
HumanEval prompts and Spec-Bench translation prompts, the out-of-distribution set, taken in turn from one split:
``tune`` by default, ``--split report`` for a published run with at least 20 per set; found where ``specframe
datasets`` finds them) are decoded greedily three ways, side by side in one process and alternating per repeat:

* ``hf_generate``: what a transformers user writes, static batching: ``B`` prompts left-padded into one
  ``generate()`` call (default kernels, :mod:`specframe_hf.reference`), each call as long as the longest row of
  its group needs, so it does the work a user's ``generate()`` with end-of-sequence stopping does;
* plain decoding and DARTree pruned under ``budget: auto`` through `Pipeline.generate_batch` (continuous
  batching: ``B`` rows in flight, waiting prompts take freed rows).

Throughput is the new tokens the plain loop produces (each row up to its end of sequence) over the wall time;
the table gives the median of ``--repeats`` runs and their spread (min-max). Every specframe output is checked
token for token against plain decoding at batch size 1; ``generate()``'s rows are compared too (left padding
changes fp32 rounding, so a batched ``generate()`` may differ after a near tie: reported, not required).
Memory per row is the peak CUDA memory above the model's own, divided by the batch size (CPU: not measured).
Reported targets: DARTree auto >= 1.15x batched plain decoding at batch 2 and >= 1.0x at batch 4 and 8, plain
decoding at batch 8 >= 3x batch 1, and the draft time of a drafted round at batch 4 at most twice that at batch 1
(the drafter proposes for every drafting row in one forward).

The script runs under the quiet rule (:mod:`specframe.bench.quiet`: refused unless quiet at the start, the load
sampled through the run) in a private cache, and the ``budget: auto`` controller is frozen after the warm-up and
restored before every timed call (:mod:`specframe.bench.learned_state`): no repeat or batch size starts from what
an earlier one learnt. All of it is the ``protocol`` record of the JSON. Writes a JSON file and, with matplotlib,
a plot next to it. Usage (a quiet GPU box)::

    .venv/bin/python benchmarks/batch_decoding.py --device cuda --n 64 --split report --max-new-tokens 128 \\
        --out docs/benchmarks/batch-decoding/results.json

A smoke run (CPU, seconds; not a measurement): ``--smoke`` (2 prompts, 4 tokens, batch sizes 1 and 2, one repeat, no
load check). Arguments are checked before anything is loaded (``_frame``).
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
    BenchParser,
    RunProtocol,
    apply_threads,
    count,
    counts,
    decoded,
    measured_run,
    own_threads,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import SPEED_SETS, data_dirs, pooled_speed_prompts, require_sets, warm_up_prompts
from rich.console import Console
from rich.table import Table
from specframe_smollm2.demo import repo_root

from specframe.cost.measure import save_profile
from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import load_average


def timed_batch(pipe: Any, prompts: list[str], max_new: int, batch_size: int) -> tuple[list[Any], float, float | None]:
    """Results, wall seconds and peak CUDA bytes per row above the memory held before (None off CUDA)."""
    cuda = torch.cuda.is_available() and str(getattr(pipe.target, "device", "cpu")).startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
    start = time.perf_counter()
    results = decoded(pipe.generate_batch(prompts, max_new, batch_size=batch_size),
                      f"{pipe.config.name} at batch {batch_size}")
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    per_row = (torch.cuda.max_memory_allocated() - held) / batch_size if cuda else None
    return results, wall, per_row


def timed_generate(target: Any, ids: list[torch.Tensor], reference: list[list[int]],
                   batch_size: int) -> tuple[list[list[int]], float]:
    """transformers' static batching over the prompts ``ids`` (each ``[P_i]``), ``batch_size`` per call: the rows'
    tokens cut to the plain loop's lengths, and the summed wall seconds."""
    from specframe.types import SamplingParams

    tokens: list[list[int]] = []
    wall_ns = 0
    for start in range(0, len(ids), batch_size):
        group = slice(start, start + batch_size)
        lengths = [len(r) for r in reference[group]]
        rows, ns, _ = target.native_generate_batch(ids[group], max(lengths), sampling=SamplingParams(), seed=0)
        tokens += [row[:n] for row, n in zip(rows, lengths, strict=True)]
        wall_ns += ns
    return tokens, wall_ns / 1e9


def generate_row(runs: list[tuple[list[list[int]], float]], batch_size: int,
                 reference: list[list[int]]) -> dict[str, Any]:
    """The ``hf_generate`` table row from repeated runs (median-time run, every wall time kept)."""
    tokens, wall = sorted(runs, key=lambda run: run[1])[len(runs) // 2]
    count = sum(len(t) for t in tokens)
    return {"method": "hf_generate (static batches)", "batch_size": batch_size, "tokens": count,
            "wall_s": round(wall, 3), "tokens_per_s": round(count / wall, 3), "tau": 1.0, "verified_nodes": 0.0,
            "draft_ms_per_round": 0.0, "plain_round_share": 1.0, "exact": tokens == reference,
            "memory_per_row_mib": None, "wall_s_repeats": [round(run[1], 3) for run in runs]}


def measure(label: str, runs: list[tuple[list[Any], float, float | None]], batch_size: int,
            reference: list[list[int]]) -> dict[str, Any]:
    """One table row from repeated runs: the median-time run, with every run's wall time kept."""
    results, wall, per_row = sorted(runs, key=lambda run: run[1])[len(runs) // 2]
    tokens = sum(len(r.tokens) for r in results)
    rounds = [r for res in results for r in res.rounds]
    drafted = [r for r in rounds if r.drafted]
    return {
        "method": label,
        "batch_size": batch_size,
        "tokens": tokens,
        "wall_s": round(wall, 3),
        "tokens_per_s": round(tokens / wall, 3),
        "rounds": len(rounds),
        "committed": sum(r.committed for r in rounds),
        "tau": round(sum(r.committed for r in rounds) / max(len(rounds), 1), 3),
        "verified_nodes": round(sum(r.nodes for r in drafted) / max(len(drafted), 1), 2),
        # Each row's record carries its round's stage times, so a round counts once per row that drafted in it.
        "draft_ms_per_round": round(sum(r.stage_ns.get("draft", 0) for r in drafted) / max(len(drafted), 1) / 1e6,
                                    2),
        "plain_round_share": round(1 - len(drafted) / max(len(rounds), 1), 3),
        "exact": [r.tokens for r in results] == reference,
        "memory_per_row_mib": None if per_row is None else round(per_row / 2**20, 1),
        "wall_s_repeats": [round(run[1], 3) for run in runs],
    }


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in dict.fromkeys(r["method"] for r in rows):
        pts = [(r["batch_size"], r["tokens_per_s"]) for r in rows if r["method"] == method]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=method)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("tokens / s (all rows)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


BOUND_NODES = (1, 3, 7, 15)  # node counts the physics bound considers


def cost_model(plain: Any, dart: Any, prompts: list[str], sizes: list[int], reps: int) -> Any:
    """The cost model ``C(B, n)`` measured here (:func:`specframe.cost.measure.measure_cost_model`, what `specframe
    profile` measures): the controller of the DARTree pipeline decides with it and the physics bound reads it."""
    from specframe.cost.measure import measure_cost_model
    from specframe.cost.setup import target_profile_key

    ids = plain.encode(prompts[0]).view(1, -1)
    return measure_cost_model(plain.target, ids, target_profile_key(dart.target, dart.config),
                              batches=sizes, nodes=(0, *BOUND_NODES), reps=reps)


def physics(profile: Any, dart: Any, prompts: list[str], sizes: list[int], max_new: int,
            console: Console) -> dict[str, Any]:
    """The physics bound (:mod:`specframe.bench.physics`) per batch size from the cost model ``profile`` (the one
    the controller decides with): tau at each fixed node count (DARTree pruned at that budget, batch 1), and the
    draft cost's fixed and per-row parts fitted to the draft + build + prune time of rounds in which all B rows
    draft."""
    from specframe.bench.physics import physics_bound
    from specframe.cost.draft_cost import DraftCost

    tau: dict[int, float] = {}
    for k in BOUND_NODES:
        fixed = dart.with_stage("pruner", {"type": "deferred_topb", "beta": -0.2}, budget=k)
        results = decoded(fixed.generate_batch(prompts, max_new, batch_size=1), "the fixed-budget τ run")
        tau[k] = sum(len(r.tokens) for r in results) / max(sum(r.num_rounds for r in results), 1)
    draft = DraftCost()
    draft_at: dict[int, float] = {}
    for b in sizes:
        fixed = dart.with_stage("pruner", {"type": "deferred_topb", "beta": -0.2}, budget=7)
        drafted = decoded(fixed.generate_batch((prompts * b)[:b], 16, batch_size=b), f"the draft timing at batch {b}")
        draft_at[b] = statistics.median([sum(r.stage_ns.get(s, 0) for s in ("draft", "build", "prune")) / 1e6
                                         for res in drafted for r in res.rounds if r.drafted] or [0.0])
        draft.observe(b, draft_at[b])
    split = draft.split()
    bounds: dict[str, Any] = {}
    for b in sizes:
        bound = physics_bound(b, profile, split, tau)
        forwards = {t: profile.cost(b, b * t) for t in (1, *(k + 1 for k in BOUND_NODES))}
        bounds[str(b)] = {"speedup": round(bound.speedup, 3), "nodes": bound.nodes, "draft_ms": round(draft_at[b], 2),
                          "forward_ms": {str(t): round(v, 2) for t, v in forwards.items()}}
        console.print(f"physics bound at batch {b}: {bound.speedup:.2f}x (k = {bound.nodes}), draft {draft_at[b]:.1f} "
                      f"ms, C(B, B t) {', '.join(f'{t}: {v:.1f}' for t, v in forwards.items())} ms", highlight=False)
    return {"tau_by_nodes": {str(k): round(v, 3) for k, v in tau.items()}, "by_batch": bounds,
            "draft_split_ms": [round(v, 3) for v in split], "cost_model": profile.to_json()}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=32, help="prompts (GSM8K, HumanEval, translation in turn)")
    ap.add_split(per_set=lambda args: args.n // len(SPEED_SETS))
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_argument("--batch-sizes", type=counts(), default=[1, 2, 4, 8, 16])
    ap.add_argument("--device", default=None, help="target device (default: the pipeline's)")
    ap.add_threads(0)
    ap.add_argument("--repeats", type=count(), default=3, help="alternating runs per method and batch size (median)")
    ap.add_protocol()
    ap.add_argument("--no-bound", dest="bound", action="store_false",
                    help="skip the physics bound (its tau and draft measurements take about a minute per batch size)")
    ap.add_smoke("2 prompts, 4 tokens, batch sizes 1 and 2, one repeat")
    ap.add_output("runs/batch-decoding.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.max_new_tokens, args.batch_sizes, args.repeats = 3, 4, [1, 2], 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(SPEED_SETS, data_dirs(args.data))
    with measured_run(args, own_threads(args.threads)) as run:
        return measure_all(args, run)


def measure_all(args: argparse.Namespace, run: RunProtocol) -> int:
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    console = Console(width=None if sys.stdout.isatty() else 170)
    load_before = run.start_load
    apply_threads(args.threads)
    use_shipped_checkpoints()
    root = repo_root() / "examples" / "smollm2"
    overrides = [f"target.device={args.device}"] if args.device else []
    host = PluginHost()
    plain = Pipeline.from_yaml(root / "plain.yaml", host=host, overrides=overrides)
    prompts = [text for _, text in pooled_speed_prompts(data_dirs(args.data), args.n, args.split)]
    sizes = args.batch_sizes
    warm = warm_up_prompts(data_dirs(args.data))
    plain.generate_batch(warm, 4, batch_size=2)  # warm-up on tune prompts
    dart = Pipeline.from_yaml(root / "dartree-pruned.yaml", target=plain.target, host=host)
    profile = cost_model(plain, dart, warm, sizes, 1 if args.smoke else 3)  # what the controller and bound read
    profile_file = args.out.with_suffix(".profile.json")
    save_profile(profile, profile_file)
    dart = Pipeline.from_yaml(root / "dartree-pruned.yaml", target=plain.target, host=host,
                              overrides=[f"auto_budget.profile={profile_file}"])
    dart.generate_batch(warm, 4, batch_size=2)  # the controller's warm-up, on tune prompts too
    freeze = run.freeze_controllers([plain, dart])
    run.set_plain_reference(plain, warm[0])
    reference = [r.tokens for r in decoded(plain.generate_batch(prompts, args.max_new_tokens, batch_size=1),
                                           "the plain reference")]
    ids = [plain.encode(p).view(-1) for p in prompts]
    native = getattr(plain.target, "native_generate_batch", None)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for b in sizes:  # the methods alternate, --repeats times; the median-time run of each is reported
        runs: dict[str, list[tuple[list[Any], float, float | None]]] = {"plain": [], "dart": []}
        hf_runs: list[tuple[list[list[int]], float]] = []
        for _ in range(args.repeats):
            if native is not None:
                hf_runs.append(timed_generate(plain.target, ids, reference, b))
            freeze.restore()
            runs["plain"].append(timed_batch(plain, prompts, args.max_new_tokens, b))
            freeze.restore()
            runs["dart"].append(timed_batch(dart, prompts, args.max_new_tokens, b))
        if hf_runs:
            rows.append(generate_row(hf_runs, b, reference))
        rows.append(measure("plain decoding", runs["plain"], b, reference))
        rows.append(measure("DARTree pruned, budget: auto", runs["dart"], b, reference))
        console.print(*rows[-3:], highlight=False)
        run.probe()  # the machine as fast after this batch size as before the first?
    bound = physics(profile, dart, prompts, sizes, args.max_new_tokens, console) if args.bound else None
    hf_at = {r["batch_size"]: r["tokens_per_s"] for r in rows if r["method"].startswith("hf_generate")}
    plain_at = {r["batch_size"]: r["tokens_per_s"] for r in rows if r["method"] == "plain decoding"}
    for r in rows:
        r["vs_plain_same_batch"] = round(r["tokens_per_s"] / plain_at[r["batch_size"]], 3)
        if r["batch_size"] in hf_at:
            r["vs_hf_generate_same_batch"] = round(r["tokens_per_s"] / hf_at[r["batch_size"]], 3)
        if bound is not None and r["method"].startswith("DARTree"):
            r["physics_bound"] = bound["by_batch"][str(r["batch_size"])]["speedup"]
            r["share_of_bound"] = round(r["vs_plain_same_batch"] / r["physics_bound"], 3)
    machine = machine_summary()
    table = Table(title=f"{len(prompts)} prompts, {args.max_new_tokens} new tokens, device "
                        f"{getattr(plain.target, 'device', 'cpu')}, {machine.get('cpu', '?')}, "
                        f"{torch.get_num_threads()} threads, median of {args.repeats}")
    for col in ("method", "batch", "tok/s", "spread s", "vs plain", "vs generate()", "bound", "τ", "nodes",
                "draft ms", "plain %", "MiB/row", "exact"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for r in rows:
        mem = "-" if r["memory_per_row_mib"] is None else f"{r['memory_per_row_mib']:.0f}"
        spread = f"{min(r['wall_s_repeats']):.1f}-{max(r['wall_s_repeats']):.1f}"
        vs_hf = f"{r['vs_hf_generate_same_batch']:.2f}x" if "vs_hf_generate_same_batch" in r else "-"
        of_bound = f"{r['physics_bound']:.2f}x ({100 * r['share_of_bound']:.0f} %)" if "physics_bound" in r else "-"
        table.add_row(r["method"], str(r["batch_size"]), f"{r['tokens_per_s']:.1f}", spread,
                      f"{r['vs_plain_same_batch']:.2f}x", vs_hf, of_bound,
                      f"{r['tau']:.2f}", f"{r['verified_nodes']:.1f}", f"{r['draft_ms_per_round']:.1f}",
                      f"{100 * r['plain_round_share']:.0f}", mem,
                      "yes" if r["exact"] else "NO")
    console.print(table)
    dart_at = {r["batch_size"]: r for r in rows if r["method"].startswith("DARTree")}
    targets: dict[str, Any] = {f"dartree_auto_vs_plain_b{b}": r["vs_plain_same_batch"] for b, r in dart_at.items()}
    line = "targets: DARTree auto vs batched plain " + ", ".join(
        f"B={b} {r['vs_plain_same_batch']:.2f}x" for b, r in dart_at.items()) + " (>= 1.15x at 2, >= 1.0x at 4, 8)"
    if 1 in dart_at and 4 in dart_at and dart_at[1]["draft_ms_per_round"]:
        targets["draft_ms_b4_over_b1"] = round(dart_at[4]["draft_ms_per_round"] / dart_at[1]["draft_ms_per_round"], 2)
        line += f"; draft ms B=4 / B=1 {targets['draft_ms_b4_over_b1']:.2f} (<= 2)"
    if 1 in plain_at and 8 in plain_at:
        targets["plain_b8_over_b1"] = round(plain_at[8] / plain_at[1], 3)
        line += f"; plain B=8 >= 3x B=1 -> {targets['plain_b8_over_b1']:.2f}x"
    console.print(line)
    report = {"smoke": args.smoke, "split": args.split, "sets": list(SPEED_SETS), "n": len(prompts),
              "max_new_tokens": args.max_new_tokens, "device": str(getattr(plain.target, "device",
              "cpu")), "machine": machine, "threads": torch.get_num_threads(), "load_before": load_before,
              "rows": rows, "targets": targets, "physics_bound": bound, "load_after": load_average(),
              "wall_seconds": round(time.perf_counter() - t0, 1),
              "protocol": run.record(prompts_per_set=len(prompts) // len(SPEED_SETS))}
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="--out file")
    png = args.out.with_suffix(".png")
    drew = plot(rows, png)
    console.print(f"wrote {args.out}{' and ' + str(png) if drew else ''} in {report['wall_seconds']:.0f}s "
                  f"(load {load_before} -> {report['load_after']})"
                  + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
