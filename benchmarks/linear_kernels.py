"""Which linear kernel multiplies faster on this CPU: the default BLAS path of ``nn.Linear`` against oneDNN's
prepacked weights, on the shipped SmolLM2 target, per number of new tokens in a forward.

``cpu_linear: auto`` (:mod:`specframe.cost.kernel_choice`) makes this measurement at a target's first load on a
machine (1, 4 and 17 rows, about a second) and keeps the faster kernel per row count; this script makes the same
measurement under the measurement protocol, over more row counts, so the docs can show what ``auto`` sees on the
machine of the published runs instead of hand-taken figures:

* the target (``examples/smollm2/plain.yaml``, float32) is loaded with every linear layer prepacked
  (``target.cpu_linear=onednn``: each layer keeps its ``nn.Linear`` weight too) and the rule is switched between
  the two kernels (:func:`specframe.cpu_linear.set_linear_kernels`);
* a **round** is :func:`specframe.cost.kernel_choice.measure_kernels` over ``--rows`` (forwards of ``q`` new
  tokens over a 64-token cache, the two kernels alternating, one warm-up and the median of ``--reps`` each); the
  run makes ``--rounds`` rounds and reports per kernel and ``q`` the median of the rounds' medians with their
  range, the ratio default / oneDNN, and the rule :func:`specframe.cost.kernel_choice.decide` derives from the row
  counts ``auto`` measures;
* the run is **interleaved** (:mod:`specframe.bench.steadiness`): each round is one block, timed around by the
  reference workload (one forward of the largest ``q`` under each kernel) and measured again when the machine's
  speed moved within it, so each ratio compares the two kernels on one machine.

No prompt is read (the forwards run on fixed token ids), so there is no split; the quiet rule, the private cache
and the machine record apply as for every timed script. Usage (a quiet machine, one torch thread as the published
runs)::

    .venv/bin/python benchmarks/linear_kernels.py --threads 1 --out docs/benchmarks/linear-kernels/results.json

``--smoke`` (alias ``--quick``): 1 and 4 rows, one rep, one round, no load check; it checks that the script
works, its times mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
from _frame import (
    REPO,
    BenchParser,
    RunProtocol,
    apply_threads,
    count,
    counts,
    measured_run,
    own_threads,
    run_script,
)
from rich.console import Console
from rich.table import Table

from specframe.cost.kernel_choice import MEASURE_ROWS, KernelTimings, decide, measure_kernels
from specframe.cpu_linear import ALWAYS, NEVER, onednn_linear_available, set_linear_kernels
from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import load_average

#: New tokens per measured forward: plain decoding at batch 1, 2, 4 and 8, a verify at budget 16, one at 32.
ROWS = (1, 2, 4, 8, 17, 33)
#: What one block of the run holds (recorded as the run's ``pairing``).
BLOCK_CONTENTS = "one round: both kernels at every row count, alternating forward by forward"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=counts(), default=list(ROWS), help="new tokens per measured forward")
    ap.add_argument("--reps", type=count(), default=5, help="timed forwards per kernel, row count and round")
    ap.add_argument("--rounds", type=count(), default=5, help="measurements, with the steadiness probes between")
    ap.add_threads(1)
    ap.add_protocol()
    ap.add_smoke("1 and 4 rows, one rep, one round")
    ap.add_output("runs/linear-kernels.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rows, args.reps, args.rounds = [1, 4], 1, 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not onednn_linear_available():
        from specframe.errors import ConfigError
        raise ConfigError("this torch build has no oneDNN linear kernel (torch.ops.mkldnn): there is nothing to "
                          "compare", hint="run on a CPU build of torch with mkldnn (the pinned CPU wheel has it)")
    with measured_run(args, own_threads(args.threads)) as run:
        return measure(args, run)


def spread(values: Sequence[float]) -> dict[str, float]:
    """The median of ``values`` (one per round) and their range."""
    return {"median_ms": round(statistics.median(values), 3), "min_ms": round(min(values), 3),
            "max_ms": round(max(values), 3)}


def measure(args: argparse.Namespace, run: RunProtocol) -> int:
    from specframe_hf.kernel_probe import CONTEXT, forward_on_cache

    console = Console(width=None if sys.stdout.isatty() else 170)
    load_before = run.start_load
    apply_threads(args.threads)
    from specframe.pipeline import Pipeline

    plain = Pipeline.from_yaml(REPO / "examples" / "smollm2" / "plain.yaml", overrides=["target.cpu_linear=onednn"])
    target: Any = plain.target  # the Hugging Face target: its model is what the kernels run
    model = target.model  # every linear layer prepacked, its nn.Linear weight kept
    forward = forward_on_cache(model, most=max(args.rows))

    def use(kernels: Any) -> None:
        set_linear_kernels(model, kernels)

    def reference() -> None:  # one forward of the largest row count under each kernel
        for kernels in (NEVER, ALWAYS):
            use(kernels)
            forward(max(args.rows))

    reference()  # first-call allocations out of the first timing
    run.set_reference(reference, f"one forward of {max(args.rows)} new tokens under each kernel")
    run.interleave(BLOCK_CONTENTS)
    t0 = time.perf_counter()
    rounds: list[KernelTimings] = []
    run.open_block()
    for i in range(args.rounds):
        for attempt in run.blocks():  # a try whose machine moved within it is dropped and measured again
            timings = measure_kernels(forward, use, rows=args.rows, reps=args.reps)
            if attempt.close():
                rounds.append(timings)
        console.print(f"  round {i + 1}/{args.rounds}: {rounds[-1].summary()}", highlight=False)
    rows = []
    for q in args.rows:
        default = spread([r.default_ms[q] for r in rounds])
        onednn = spread([r.onednn_ms[q] for r in rounds])
        rows.append({"rows": q, "default": default, "onednn": onednn,
                     "default_over_onednn": round(default["median_ms"] / onednn["median_ms"], 3)})
    auto_rows = [q for q in MEASURE_ROWS if q in args.rows]
    medians = KernelTimings(default_ms={r["rows"]: r["default"]["median_ms"] for r in rows if r["rows"] in auto_rows},
                            onednn_ms={r["rows"]: r["onednn"]["median_ms"] for r in rows if r["rows"] in auto_rows})
    rule = decide(medians).describe() if auto_rows else None
    machine = machine_summary()
    table = Table(title=f"SmolLM2-135M forward over a {CONTEXT}-token cache, {machine['cpu']}, "
                        f"{torch.get_num_threads()} thread(s); median of {args.rounds} round(s) [range]",
                  title_justify="left")
    for col in ("new tokens", "default BLAS ms", "oneDNN prepacked ms", "default / oneDNN"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["rows"]), "{median_ms:.1f} [{min_ms:.1f}, {max_ms:.1f}]".format(**r["default"]),
                      "{median_ms:.1f} [{min_ms:.1f}, {max_ms:.1f}]".format(**r["onednn"]),
                      f"{r['default_over_onednn']:.2f}x")
    console.print(table)
    if rule is not None:
        console.print(f"cpu_linear: auto on these timings ({', '.join(map(str, auto_rows))} rows): {rule}")
    report = {"smoke": args.smoke, "model": "SmolLM2-135M-Instruct (float32)", "context": CONTEXT,
              "machine": machine, "threads": torch.get_num_threads(), "reps": args.reps,
              "rounds_measured": args.rounds, "rows": rows, "auto_rows": auto_rows, "auto_rule": rule,
              "per_round": [{"default_ms": r.default_ms, "onednn_ms": r.onednn_ms} for r in rounds],
              "load_before": load_before, "load_after": load_average(),
              "wall_seconds": round(time.perf_counter() - t0, 1),
              "protocol": run.record(controller={"memory": "none: no decode"})}
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="benchmark results")
    console.print(f"wrote {args.out}" + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
