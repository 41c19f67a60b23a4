"""Sibling-conditional acceptance and memory of the shipped pair's drafting pipelines (a τ table, not a speed table).

Does a correction head fix what follows a sibling? For each pipeline of :data:`PIPELINES` (``examples/smollm2``:
DFlash chain, DDTree, Domino chain + DDTree, DARTree pruned at B = 16) the script decodes the same prompts per set
(math: GSM8K, code: HumanEval, out of distribution: Spec-Bench translation; from the ``tune`` split of
:mod:`specframe.bench.splits` unless ``--split report`` is given, which needs at least 20 per set), greedy, one
shared target, and records per set

* the sibling-conditional counts (:mod:`specframe.metrics.siblings`): rows ``[depth, rank, continued, total]``, the
  rate at which depth ``d + 1`` was accepted after an accepted depth-``d`` node of sibling rank ``r``;
* τ (tokens per verify round, bonus included) and whether every output equals the plain loop's token for token;
* the memory (:mod:`specframe.metrics.memory`): the drafter's and each head's parameter bytes and the per-request
  KV state at the set's mean context length (prompt + generated tokens).

Counts and τ do not depend on timing, so the run does not wait for a quiet machine; it still runs under
:func:`_frame.measured_run` with ``--force`` implied (a private cache, the load sampled and recorded, the split,
prompt count, CPU and commit in ``protocol``), and the file never carries a speed. ``docs/benchmarks.md`` renders
its section "Does a correction head fix what follows a sibling?" from the committed result
(:mod:`specframe.bench.published`, block ``sibling-acceptance``).

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sibling_acceptance.py --n 20 --split report \
        --max-new-tokens 64 --out docs/benchmarks/siblings/smollm2.json
    .venv/bin/python benchmarks/sibling_acceptance.py --smoke --out /tmp/siblings.json     # a smoke run
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _frame import (
    REPO,
    BenchParser,
    apply_threads,
    count,
    measured_run,
    plain_outputs,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import OUT_OF_DISTRIBUTION, data_dirs, load_prompt_sets, require_sets

from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary

#: Prompt kind -> benchmark set.
KINDS = {"math": "gsm8k", "code": "humaneval", "translation": OUT_OF_DISTRIBUTION}
#: (label, pipeline file under examples/smollm2), each with its shipped settings.
PIPELINES = [("DFlash chain", "dflash-chain.yaml"), ("DDTree", "ddtree.yaml"),
             ("Domino chain + DDTree", "domino-chain-ddtree.yaml"), ("DARTree (pruned, B = 16)",
                                                                     "dartree-pruned-b16.yaml")]


def parse_args(argv: Sequence[str] | None) -> Any:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=6, help="prompts per set")
    ap.add_split()
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_output("runs/sibling-acceptance.json")
    ap.add_threads(1)
    ap.add_smoke("1 prompt per set, 4 tokens")
    args = ap.parse_args(argv)
    args.force = True  # τ and counts do not depend on the load: never refused, the load is still recorded
    if args.smoke:
        args.n, args.max_new_tokens = 1, 4
    return args


def measure_set(pipe: Any, prompts: list[str], max_new_tokens: int, reference: list[list[int]]) -> dict[str, Any]:
    """One pipeline on one set's prompts: counts, τ, exactness against the plain loop's tokens, memory."""
    from specframe.metrics.memory import pipeline_memory, pooled_memory
    from specframe.metrics.siblings import count_rows

    results = [pipe.generate(text, max_new_tokens) for text in prompts]
    rounds = [r for res in results for r in res.rounds]
    memory = pipeline_memory(pipe)
    return {
        "n": len(prompts), "rounds": len(rounds),
        "tau": round(sum(sum(r.accept_lengths()) for r in results) / len(rounds), 4) if rounds else 0.0,
        "exact": all(res.tokens == ref for res, ref in zip(results, reference, strict=True)),
        "sibling_continuation": count_rows(rounds),
        "memory": pooled_memory(memory.at(res.prompt_len + len(res.tokens)) for res in results),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(tuple(KINDS.values()), data_dirs(args.data))
    with measured_run(args, args.threads or 1) as run:
        from specframe.pipeline import Pipeline

        apply_threads(args.threads)
        use_shipped_checkpoints()
        t0 = time.perf_counter()
        sets = load_prompt_sets(data_dirs(args.data), n=args.n, split=args.split, names=tuple(KINDS.values()))
        plain = plain_outputs(sets, KINDS, args.max_new_tokens)
        report: dict[str, Any] = {"what": "sibling-conditional acceptance, τ and memory (no speed)",
                                  "smoke": args.smoke, "split": args.split, "n": args.n,
                                  "max_new_tokens": args.max_new_tokens, "threads": args.threads,
                                  "machine": machine_summary(), "load_before": run.start_load, "pipelines": []}
        for label, file in PIPELINES:
            pipe = Pipeline.from_yaml(REPO / "examples" / "smollm2" / file, target=plain.plain.target, host=plain.host)
            per_set = {kind: measure_set(pipe, plain.prompts[kind], args.max_new_tokens, plain.tokens[kind])
                       for kind in KINDS}
            report["pipelines"].append({"label": label, "pipeline": f"examples/smollm2/{file}", "sets": per_set})
            print(f"{label}: " + ", ".join(f"{k} τ {v['tau']:.2f}{'' if v['exact'] else ' DIFFERS'}"
                                           for k, v in per_set.items()), flush=True)
        report["wall_seconds"] = round(time.perf_counter() - t0, 1)
        report["protocol"] = run.record(prompts_per_set=args.n, controller={"memory": "none: fixed budgets"},
                                        timed=False)  # counts only: the docs judge it so
    write_text(Path(args.out), json.dumps(report, indent=2) + "\n", what="--out file")
    print(f"wrote {args.out} in {report['wall_seconds']:.0f}s" + ("; SMOKE: not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
