"""The simulator's validation table: `specframe simulate`'s predicted tokens per second against the measured ones,
on this machine, for plain decoding, the DFlash chain and DARTree at a fixed budget, at batch 1, 2, 4 and 8.

`specframe simulate` (:mod:`specframe.bench.simulate`) prices recorded rounds with a cost model ``C(B, n)`` and a
pipeline's per-round overheads. Where the records and the cost model come from the same machine, its prediction
should be the measurement; this script checks that on the SmolLM2 pair:

1. the prompts (``--n``, GSM8K, HumanEval and Spec-Bench translation taken in turn from one split: ``tune`` by
   default, ``--split report`` with at least 20 per set for the published table) and a warm-up on ``tune`` prompts;
2. the cost model, as `specframe profile` measures it (:func:`specframe.cost.measure.measure_cost_model`: the
   one-row curve and ``C(B, B (k + 1))`` at every batch size of ``--batch-sizes`` for ``k`` up to the budget), and
   each pipeline's round overheads from one decode of a ``tune`` prompt at batch 1
   (:func:`specframe.profile_report.round_overheads`: the stages around the forward and the loop's own time);
3. per batch size, each pipeline of :data:`PIPELINES` decodes every prompt through `Pipeline.generate_batch`
   (continuous batching, ``B`` rows in flight), timed by the wall clock; each request becomes a bench record
   (:func:`specframe.bench.record.build_record`), every output is checked against plain decoding at batch 1;
4. :func:`specframe.bench.simulate.simulate` replays each pipeline's records under the cost model and that
   pipeline's overheads; the table gives the measured tokens per second (the new tokens over the wall time of the
   whole batched run), the predicted ones and predicted / measured. The target is within 10 %.

Nothing from the timed runs enters the prediction except the records' own draft time (the simulator's default,
which holds on the machine the records were measured on): the forward and the round overheads come from steps 2
and 3's separate measurements. The run is under the quiet rule with a private cache (:func:`_frame.measured_run`),
all of it in the ``protocol`` record. Writes the JSON (``--out``), the records beside it (``.b<B>.records.jsonl``,
one file per batch size) and each pipeline's profile (``.<pipeline>.profile.json``), so ``specframe simulate
RECORDS --costs PROFILE`` prints the same predictions, or prices the same rounds on another machine's profile or an
accelerator's roofline.

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/simulator_validation.py --n 60 --split report \\
        --max-new-tokens 64 --out docs/benchmarks/simulator/validation.json
    .venv/bin/python benchmarks/simulator_validation.py --smoke --out /tmp/validation.json    # a smoke run
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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

from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary

#: (label, pipeline file under examples/smollm2): each at its fixed budget.
PIPELINES = [("plain decoding", "plain.yaml"), ("DFlash chain", "dflash-chain.yaml"),
             ("DARTree (pruned, B = 16)", "dartree-pruned-b16.yaml")]
#: The largest |predicted / measured - 1| the table aims for.
TOLERANCE = 0.10


def parse_args(argv: Sequence[str] | None = None) -> Any:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=24, help="prompts (GSM8K, HumanEval, translation in turn)")
    ap.add_split(per_set=lambda args: args.n // len(SPEED_SETS))
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_argument("--batch-sizes", type=counts(), default=[1, 2, 4, 8])
    ap.add_threads(1)
    ap.add_protocol()
    ap.add_smoke("3 prompts, 4 tokens, batch sizes 1 and 2, one-rep cost model")
    ap.add_output("runs/simulator-validation.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.max_new_tokens, args.batch_sizes = 3, 4, [1, 2]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(SPEED_SETS, data_dirs(args.data))
    with measured_run(args, own_threads(args.threads)) as run:
        report = measure_all(args, run)
        report["protocol"] = run.record(prompts_per_set=args.n // len(SPEED_SETS),
                                        controller={"memory": "none: fixed budgets"})
        report["load_before"] = run.start_load
    out = Path(args.out)
    write_text(out, json.dumps(report, indent=2) + "\n", what="--out file")
    print(f"wrote {out} in {report['wall_seconds']:.0f}s" + ("; SMOKE: not a measurement" if args.smoke else ""))
    return 0


def measure_all(args: Any, run: RunProtocol) -> dict[str, Any]:
    """Steps 1 to 4 of the module docstring; the result JSON without its ``protocol``."""
    from specframe.bench.record import RunInfo, build_record
    from specframe.bench.simulate import simulate
    from specframe.cost.measure import measure_cost_model, save_profile
    from specframe.cost.profile import PROFILE_NODES, CostProfile
    from specframe.cost.setup import target_profile_key
    from specframe.datasets.base import Sample
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost
    from specframe.profile_report import round_overheads

    apply_threads(args.threads)
    use_shipped_checkpoints()
    t0 = time.perf_counter()
    root, host = Path(__file__).resolve().parent.parent / "examples" / "smollm2", PluginHost()
    pairs = pooled_speed_prompts(data_dirs(args.data), args.n, args.split)
    prompts = [text for _, text in pairs]
    warm = warm_up_prompts(data_dirs(args.data))
    # Step 1: the pipelines on one target, each warmed up on tune prompts.
    plain = Pipeline.from_yaml(root / PIPELINES[0][1], host=host)
    pipes = {label: Pipeline.from_yaml(root / file, target=plain.target, host=host) for label, file in PIPELINES[1:]}
    pipes = {PIPELINES[0][0]: plain, **pipes}
    for pipe in pipes.values():
        pipe.generate_batch(warm, 4, batch_size=2)
    run.set_plain_reference(plain, warm[0])
    # Step 2: the cost model (what `specframe profile` measures) and each pipeline's round overheads.
    top = max(p.config.max_budget for p in pipes.values())
    nodes = sorted({k for k in PROFILE_NODES if k <= top} | {top})
    ids = plain.encode(warm[0]).view(1, -1)
    model = measure_cost_model(plain.target, ids, target_profile_key(plain.target, plain.config),
                               batches=args.batch_sizes, nodes=nodes, reps=1 if args.smoke else 3)
    profiles = {label: CostProfile(key=model.key, verify_ms=model.verify_ms, batch_ms=model.batch_ms,
                                   overhead_ms=round_overheads(pipe.generate(warm[0], args.max_new_tokens)))
                for label, pipe in pipes.items()}
    # Step 3: the timed batched runs, the methods alternating within each batch size.
    reference = [r.tokens for r in decoded(plain.generate_batch(prompts, args.max_new_tokens, batch_size=1),
                                           "the plain reference")]
    samples = [Sample(dataset=name, question_id=i, category=name, turns=(text,)) for i, (name, text) in
               enumerate(pairs)]
    source = f"benchmarks/prompt_sets.py, {args.split} split"
    records: dict[tuple[str, int], list[dict[str, Any]]] = {}  # (pipeline, batch size) -> one record per request
    measured: dict[tuple[str, int], dict[str, Any]] = {}
    for b in args.batch_sizes:
        for label, pipe in pipes.items():
            start = time.perf_counter()
            results = decoded(pipe.generate_batch(prompts, args.max_new_tokens, batch_size=b), f"{label} at batch {b}")
            wall = time.perf_counter() - start
            info = RunInfo(method=label, base_method=label, baseline=label == PIPELINES[0][0],
                           config_hash=pipe.config_hash, target_hash="smollm2-135m-instruct", temperature=0.0, seed=0,
                           max_new_tokens=args.max_new_tokens, batch_size=b)
            records[label, b] = [build_record(info, sample, 0, result, [result.total_ns], source)
                                 for sample, result in zip(samples, results, strict=True)]
            tokens = sum(len(r.tokens) for r in results)
            measured[label, b] = {"tokens": tokens, "wall_s": round(wall, 3), "tokens_per_s": round(tokens / wall, 3),
                                  "exact": [r.tokens for r in results] == reference}
            print(f"{label} at batch {b}: {tokens / wall:.1f} tokens/s"
                  + ("" if measured[label, b]["exact"] else " (OUTPUT DIFFERS)"), flush=True)
    # Step 4: the replay of each pipeline's records under the cost model and its overheads.
    rows = []
    for (label, _), group in records.items():
        for p in simulate(group, profiles[label]):
            m = measured[label, p.batch_size]
            ratio = p.predicted_tokens_per_s / m["tokens_per_s"]
            rows.append({"pipeline": label, "batch_size": p.batch_size, **m,
                         "predicted_tokens_per_s": round(p.predicted_tokens_per_s, 3), "ratio": round(ratio, 4),
                         "within_tolerance": abs(ratio - 1) <= TOLERANCE, "tau": p.tau,
                         "nodes_per_round": p.nodes_per_round, "row_rounds": p.row_rounds,
                         "records_tokens_per_s": round(p.measured_tokens_per_s, 3)})
            print(f"{label} at batch {p.batch_size}: measured {m['tokens_per_s']:.1f}, predicted "
                  f"{p.predicted_tokens_per_s:.1f} tokens/s ({ratio:.3f}x)", flush=True)
    out = Path(args.out)
    files: dict[str, Any] = {"records": {}, "profiles": {}}
    for b in args.batch_sizes:  # one file per batch size: a results file holds one record per method and question
        path = out.with_suffix(f".b{b}.records.jsonl")
        write_text(path, "".join(json.dumps(r) + "\n" for (_, at), rs in records.items() if at == b for r in rs),
                   what="records file")
        files["records"][str(b)] = path.name
    for label, (_, file) in zip(pipes, PIPELINES, strict=True):
        path = out.with_suffix(f".{Path(file).stem}.profile.json")
        save_profile(profiles[label], path)
        files["profiles"][label] = path.name
    return {"what": "specframe simulate's prediction against the measured tokens per second",
            "smoke": args.smoke, "split": args.split, "n": args.n, "max_new_tokens": args.max_new_tokens,
            "batch_sizes": args.batch_sizes, "threads": args.threads, "tolerance": TOLERANCE,
            "machine": machine_summary(), "rows": rows, "files": files,
            "overhead_ms": {label: profiles[label].overhead_ms for label in pipes},
            "cost_model": model.to_json(), "wall_seconds": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    sys.exit(run_script(main))
