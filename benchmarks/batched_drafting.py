"""Draft time per round against batch size: the block drafter's native rows against one fork per row (SmolLM2).

For each batch size ``B`` of ``--batch-sizes`` (default 1, 2, 4, 8), ``B`` prompts (GSM8K test questions, HumanEval
prompts and Spec-Bench translation prompts in turn, from the ``tune`` split: a draft-time measurement publishes no
per-set figure; found where ``specframe datasets`` finds them) are decoded greedily by
``examples/smollm2/dflash-chain.yaml`` (the shipped drafter ``checkpoints/smollm2-135m/drafter``, a fixed budget, so
every row drafts every round) with `Pipeline.generate_batch`, ``B`` rows in flight, in two ways, alternating
``--repeats`` times:

* ``native``: the drafter's own ``rows()`` (`BlockRows`): one backbone forward and one head call for all rows;
* ``forked``: `ForkedRows`, one drafter fork per row drafted one after another (batched decoding before it).

Every ``propose`` and drafter ``commit`` of the loop is timed, with the device synchronised before and after
each. Reported per way and batch size: the median draft ms of the rounds in which all ``B`` rows drafted (rows
that end early leave smaller rounds, which are not counted), its ratio to batch 1, and the median commit ms.
The issue's target: native draft time at batch 4 at most 2x that at batch 1. Both ways must give the tokens of
batch 1 (``exact``).

The script runs under the quiet rule (:mod:`specframe.bench.quiet`) in a private cache (the ``protocol`` record of
the JSON). Usage (a quiet machine)::

    .venv/bin/python benchmarks/batched_drafting.py --out runs/batched-drafting.json

``--smoke`` (alias ``--quick``) is a smoke run (batch sizes 1 and 2, 4 new tokens, one repeat, no load check): it
checks that the script works, its times mean nothing. Arguments are checked before anything is loaded (``_frame``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
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
from prompt_sets import SPEED_SETS, data_dirs, interleaved, load_prompt_sets, require_sets
from rich.console import Console
from rich.table import Table
from specframe_smollm2.demo import repo_root

from specframe.device_sync import synchronize
from specframe.files import write_text
from specframe.interfaces import DecodeState, Drafter, DrafterRows, ForkedRows
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import load_average
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput, VerifyResult


class TimedRows(DrafterRows):
    """Forwards to the rows it wraps and records each propose as (drafting rows, rows held, ns) and each commit's ns."""

    def __init__(self, inner: DrafterRows, device: torch.device) -> None:
        self.inner, self.device = inner, device
        self.held = 0
        self.proposes: list[tuple[int, int, int]] = []
        self.commits: list[int] = []

    def add_row(self, state: DecodeState, prefill: TargetOutput) -> None:
        self.inner.add_row(state, prefill)
        self.held += 1

    def keep_rows(self, rows: Sequence[int]) -> None:
        self.inner.keep_rows(rows)
        self.held = len(rows)

    def propose(self, rows: Sequence[int], states: Sequence[DecodeState]) -> DraftProposal:
        synchronize(self.device)
        start = time.perf_counter_ns()
        proposal = self.inner.propose(rows, states)
        synchronize(self.device)
        self.proposes.append((len(rows), self.held, time.perf_counter_ns() - start))
        return proposal

    def commit(self, states: Sequence[DecodeState], tree: DraftTree, result: VerifyResult,
               target_out: TargetOutput) -> None:
        synchronize(self.device)
        start = time.perf_counter_ns()
        self.inner.commit(states, tree, result, target_out)
        synchronize(self.device)
        self.commits.append(time.perf_counter_ns() - start)


class TimedDrafter(Drafter):
    """The pipeline's drafter for the decode loop, its rows made by ``make_rows`` and timed (`TimedRows`)."""

    def __init__(self, drafter: Drafter, make_rows: Callable[[], DrafterRows], device: torch.device) -> None:
        self.drafter, self.make_rows, self.device = drafter, make_rows, device
        self.target_layers, self.supports_batch = drafter.target_layers, drafter.supports_batch
        self.made: list[TimedRows] = []

    def rows(self) -> DrafterRows:
        self.made.append(TimedRows(self.make_rows(), self.device))
        return self.made[-1]

    def propose(self, state: DecodeState) -> DraftProposal:  # the loop drafts through rows() only
        raise NotImplementedError("TimedDrafter drafts through rows()")


def timed_run(pipe: Any, make_rows: Callable[[], DrafterRows], prompts: list[str], max_new: int,
              batch_size: int) -> tuple[list[Any], list[TimedRows]]:
    """Decode ``prompts`` with the drafter's rows made by ``make_rows``; the results and every rows object used."""
    drafter: Drafter = pipe.stages.drafter
    timed = TimedDrafter(drafter, make_rows, next(drafter.backbone.parameters()).device)  # type: ignore[attr-defined]
    pipe.stages.drafter = timed
    try:
        results = decoded(pipe.generate_batch(prompts, max_new, batch_size=batch_size), f"batch {batch_size}")
    finally:
        pipe.stages.drafter = drafter
    return results, timed.made


def summary(way: str, batch_size: int, runs: list[tuple[list[Any], list[TimedRows]]],
            reference: list[list[int]]) -> dict[str, Any]:
    """One table row: medians over every repeat's rounds in which all ``batch_size`` rows drafted."""
    timed = [t for _, made in runs for t in made]
    full = [ns for t in timed for drafting, held, ns in t.proposes if drafting == held == batch_size]
    commits = [ns for t in timed for ns in t.commits]
    return {
        "way": way,
        "batch_size": batch_size,
        "draft_ms": round(statistics.median(full) / 1e6, 3) if full else None,
        # spread: the 10th and 90th percentile of the same rounds
        "draft_ms_p10_p90": [round(q / 1e6, 3) for q in statistics.quantiles(full, n=10)[::8]] if len(full) > 1
        else None,
        "full_rounds": len(full),
        "commit_ms": round(statistics.median(commits) / 1e6, 3) if commits else None,
        "exact": all([r.tokens for r in results] == reference for results, _ in runs),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--max-new-tokens", type=count(), default=48)
    ap.add_argument("--batch-sizes", type=counts(), default=[1, 2, 4, 8])
    ap.add_argument("--device", default=None, help="target device (default: the pipeline's; the drafter follows)")
    ap.add_threads(0)
    ap.add_argument("--repeats", type=count(), default=3, help="alternating runs per way and batch size")
    ap.add_protocol()
    ap.add_smoke("batch sizes 1 and 2, 4 tokens, one repeat")
    ap.add_output("runs/batched-drafting.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.batch_sizes, args.max_new_tokens, args.repeats = [1, 2], 4, 1
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
    overrides = ["generation.stop_at_eos=false"] + ([f"target.device={args.device}"] if args.device else [])
    pipe = Pipeline.from_yaml(repo_root() / "examples" / "smollm2" / "dflash-chain.yaml", host=PluginHost(),
                              overrides=overrides)
    drafter = pipe.stages.drafter
    sizes = args.batch_sizes
    per_set = -(-max(sizes) // len(SPEED_SETS))
    sets = load_prompt_sets(data_dirs(args.data), n=per_set, split="tune", names=SPEED_SETS)
    prompts = [text for _, text in interleaved(sets, max(sizes))]
    pipe.generate_batch(prompts[:2], 4, batch_size=2)  # warm-up
    reference = [r.tokens for r in decoded(pipe.generate_batch(prompts, args.max_new_tokens, batch_size=1),
                                           "the reference")]
    ways: dict[str, Callable[[], DrafterRows]] = {"native": drafter.rows, "forked": lambda: ForkedRows(drafter)}
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for b in sizes:
        runs: dict[str, list[tuple[list[Any], list[TimedRows]]]] = {way: [] for way in ways}
        for _ in range(args.repeats):  # the two ways alternate
            for way, make in ways.items():
                runs[way].append(timed_run(pipe, make, prompts[:b], args.max_new_tokens, b))
        for way in ways:
            rows.append(summary(way, b, runs[way], reference[:b]))
            console.print(rows[-1], highlight=False)
    base = {r["way"]: r["draft_ms"] for r in rows if r["batch_size"] == sizes[0]}
    for r in rows:
        r["vs_first_batch"] = None if r["draft_ms"] is None or not base[r["way"]] else \
            round(r["draft_ms"] / base[r["way"]], 3)
    note = " (--smoke: times mean nothing)" if args.smoke else ""
    machine = machine_summary()
    table = Table(title=f"draft time per round (median of {args.repeats}), {args.max_new_tokens} new tokens, device "
                        f"{getattr(pipe.target, 'device', 'cpu')}, {machine.get('cpu', '?')}, "
                        f"{torch.get_num_threads()} threads{note}")
    for col in ("way", "batch", "draft ms", "p10-p90", f"vs batch {sizes[0]}", "rounds", "commit ms", "exact"):
        table.add_column(col, justify="left" if col == "way" else "right")
    for r in rows:
        spread = "-" if r["draft_ms_p10_p90"] is None else "{:.2f}-{:.2f}".format(*r["draft_ms_p10_p90"])
        table.add_row(r["way"], str(r["batch_size"]), "-" if r["draft_ms"] is None else f"{r['draft_ms']:.2f}", spread,
                      "-" if r["vs_first_batch"] is None else f"{r['vs_first_batch']:.2f}x", str(r["full_rounds"]),
                      "-" if r["commit_ms"] is None else f"{r['commit_ms']:.3f}", "yes" if r["exact"] else "NO")
    console.print(table)
    targets = {}
    at = {r["batch_size"]: r["draft_ms"] for r in rows if r["way"] == "native"}
    if at.get(1) and at.get(4):
        ratio = targets["native_draft_b4_over_b1"] = round(at[4] / at[1], 3)
        console.print(f"target: native draft time at batch 4 <= 2x batch 1 -> {ratio:.2f}x")
    report = {"max_new_tokens": args.max_new_tokens, "smoke": args.smoke, "split": "tune",
              "device": str(getattr(pipe.target, "device", "cpu")), "machine": machine,
              "threads": torch.get_num_threads(),
              "load_before": load_before, "rows": rows, "targets": targets, "load_after": load_average(),
              "wall_seconds": round(time.perf_counter() - t0, 1),
              "protocol": {**run.record(prompts_per_set=per_set, controller={"memory": "none: fixed budgets"}),
                           "split": "tune"}}
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="benchmark results")
    console.print(f"wrote {args.out} in {report['wall_seconds']:.0f}s (load {load_before} -> {report['load_after']})"
                  + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
