"""`budget: auto` against transformers' generate(), the plain loop and fixed budgets, on math, code, chat and
Spec-Bench prompts, held out from tuning, with bootstrap intervals and the worst prompt of every set.

Prompt sets (:mod:`prompt_sets`): GSM8K, HumanEval, MT-Bench first turns, Alpaca(Eval) and the five Spec-Bench
categories (translation among them: the out-of-distribution set), ``--n`` prompts each from one split of
:mod:`specframe.bench.splits` (``tune``, the default: the prompts settings are chosen on; ``--split report``: held
out, for a published run, at least 20 per set), found where ``specframe datasets`` finds them (:mod:`prompt_sets`).
Methods, one shared SmolLM2 target, greedy:

* ``hf_generate`` — transformers' own ``generate()`` on the same model, unmodified (default kernels), the same
  prompt ids and exactly the plain loop's token count (:mod:`specframe.reference`);
* ``plain decoding`` — specframe's loop, one token per round;
* ``prompt-lookup chain`` and DARTree pruned at each fixed budget of ``--budgets``;
* every learned method of ``--methods`` with ``budget: auto``.

Methods are interleaved per prompt (the order rotates by one each prompt; ``hf_generate`` runs right after plain
decoding, whose token count it takes), every output is checked token for token against plain decoding and
``generate()``. Per set and per group (``math_code`` = GSM8K + HumanEval, ``chat`` = MT-Bench + Alpaca), every
method gets its speedup over ``generate()`` and over the plain loop: aggregate (Σ tokens / Σ time ratio) with a
percentile bootstrap interval over prompts, the geometric mean and the median of per-prompt ratios, and the worst
prompt's ratio with its question id, and the median with its bootstrap interval. ``--warm-tune K`` first runs K
tune-split prompts per set through the ``budget: auto`` pipelines (untimed; the shipped prompt-lookup example is
one) in a private cache created for the run; the controllers are then frozen (:mod:`specframe.bench.learned_state`)
and restored before every measured request, so whatever the controller knows comes from the tune split and no
measured prompt is seen by the memory before it is measured.

The physics bound (:mod:`specframe.bench.physics`, batch 1) is given per set and group for DARTree pruned under
``budget: auto`` (when both it and a fixed DARTree budget run): the best speedup over the plain loop that the
controller's own cost model ``C(1, n)`` (its profile after the warm-up, written into the JSON), the draft time
measured in the fixed-budget rounds and the tokens per round at ``k`` nodes allow, ``k`` in
:data:`BOUND_NODES`; the tokens per round at ``k`` come from the fixed-budget run's own rounds replayed at ``k``
(:func:`specframe.bench.simulate.simulate` with ``budget=k``: each round cut to its top ``k`` nodes by path score),
so the bound costs no extra decoding. The auto row gives its speedup as a share of it.

The output JSON names the machine (``lscpu`` model name, cores, bf16 flags, threads, torch), per row how many of its
requests ran under contention, and the ``protocol`` record (split, the load at the start and sampled through the run
under the quiet rule of :mod:`specframe.bench.quiet`, the private cache, the frozen controllers, the commit). The
script refuses to start on a machine that is not quiet; ``--smoke`` (alias ``--quick``: 2 prompts per set, 8 tokens,
B = 16 and DARTree pruned auto only) checks that it runs and is not a measurement. Arguments are checked before
anything is loaded (``_frame``). Usage::

    .venv/bin/python benchmarks/auto_budget.py --n 20 --split report --max-new-tokens 64 \
        --out docs/benchmarks/auto-budget/results.json
    .venv/bin/python benchmarks/auto_budget.py --smoke --sets gsm8k,mt_bench --out /tmp/auto-budget-smoke.json
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
    counts,
    measured_run,
    name_list,
    own_threads,
    run_script,
    use_shipped_checkpoints,
)
from prompt_sets import GROUPS, SETS, PromptSet, data_dirs, load_prompt_sets, require_sets
from rich.console import Console
from rich.table import Table
from specframe_smollm2.demo import repo_root

from specframe.bench.intervals import median_estimate
from specframe.bench.physics import physics_bound
from specframe.bench.record import RunInfo, build_record
from specframe.bench.simulate import simulate
from specframe.datasets.base import Sample
from specframe.files import write_text
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import LoadWindow, MachineLoad, load_average
from specframe.metrics.records import GenerationResult
from specframe.metrics.speedup import Estimate, PairedRun, aggregate_estimate, geomean_estimate
from specframe.reference import REFERENCE_NAME, reference_result

LEARNED = ["dflash-chain", "ddtree", "domino-chain", "domino-chain-ddtree", "dspark-chain", "dartree-fixed",
           "dartree-pruned", "dartree-chat"]
#: Learned methods whose pipeline file is not ``examples/smollm2/<method>.yaml``: the chat zoo, whose weights are
#: trained on the machine (``checkpoints/smollm2-135m-chat/README.md``).
LEARNED_FILES = {"dartree-chat": "chat-zoo/dartree-chat.yaml"}
PLAIN = "plain decoding"
#: Node counts the physics bound considers (besides the fixed budget itself).
BOUND_NODES = (1, 3, 7, 15)
#: The ``budget: auto`` method the bound is given for, and the stages a drafted round spends before the forward.
BOUND_METHOD = "dartree-pruned auto"
DRAFT_STAGES = ("draft", "build", "prune")


class Runs:
    """Each method's results and machine loads on one set, with the prompts' question ids."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.results: dict[str, list[GenerationResult]] = {label: [] for label in labels}
        self.loads: dict[str, list[MachineLoad]] = {label: [] for label in labels}
        self.ids: list[int | str] = []

    def extend(self, other: Runs) -> None:
        for label in self.results:
            self.results[label] += other.results[label]
            self.loads[label] += other.loads[label]
        self.ids += other.ids


def _estimate(e: Estimate) -> dict[str, Any]:
    return {"value": round(e.value, 4), "low": round(e.low, 4), "high": round(e.high, 4), "n": e.n}


def versus(results: Sequence[GenerationResult], base: Sequence[GenerationResult], ids: Sequence[int | str],
           boot: dict[str, Any]) -> dict[str, Any]:
    """Speedup of ``results`` over ``base`` (paired by prompt): aggregate [CI], geomean [CI], median, the worst
    prompt."""
    pairs = [PairedRun(len(r.tokens), r.total_ns / 1e9, len(b.tokens), b.total_ns / 1e9)
             for r, b in zip(results, base, strict=True)]
    ratios = [p.ratio for p in pairs]
    worst = min(range(len(ratios)), key=ratios.__getitem__)
    return {"aggregate": _estimate(aggregate_estimate(pairs, **boot)),
            "geomean": _estimate(geomean_estimate(pairs, **boot)),
            "median": round(statistics.median(ratios), 4),
            "median_interval": _estimate(median_estimate(ratios, **boot)),
            "worst": round(ratios[worst], 4), "worst_question": ids[worst],
            "identical": sum(r.tokens == b.tokens for r, b in zip(results, base, strict=True))}


def row(label: str, runs: Runs, boot: dict[str, Any]) -> dict[str, Any]:
    results = runs.results[label]
    rounds = [r for res in results for r in res.rounds]
    drafted = [r for r in rounds if r.drafted]
    tokens = sum(len(r.tokens) for r in results)
    seconds = sum(r.total_ns for r in results) / 1e9
    out: dict[str, Any] = {
        "method": label,
        "prompts": len(results),
        "tokens": tokens,
        "rounds": len(rounds),
        "committed": sum(r.committed for r in rounds),
        "tau": round(sum(r.committed for r in rounds) / max(len(rounds), 1), 3),
        "tokens_per_s": round(tokens / seconds, 3),
        "vs_plain": versus(results, runs.results[PLAIN], runs.ids, boot),
        "verified_nodes": round(sum(r.nodes for r in drafted) / max(len(drafted), 1), 2),
        "plain_round_share": round(1 - len(drafted) / max(len(rounds), 1), 3),
        "contended": sum(bool(load.contended) for load in runs.loads[label]),
    }
    if REFERENCE_NAME in runs.results:
        out["vs_generate"] = versus(results, runs.results[REFERENCE_NAME], runs.ids, boot)
    return out


def physics(results: Sequence[GenerationResult], ids: Sequence[int | str], profile: Any, budget: int,
            max_new: int) -> dict[str, Any]:
    """The physics bound at batch 1 for the prompts of ``results`` (DARTree pruned at the fixed ``budget``): tokens
    per round at each ``k`` of :data:`BOUND_NODES` below ``budget`` replayed from these rounds, at ``budget`` as
    recorded; the median draft + build + prune time of their drafted rounds; the cost model ``profile``."""
    info = RunInfo(method="bound", base_method="bound", baseline=False, config_hash="", target_hash="",
                   temperature=0.0, seed=0, max_new_tokens=max_new)
    records = [build_record(info, Sample(dataset="set", question_id=qid, category="set", turns=("",)), 0, result,
                            [result.total_ns], "auto_budget.py") for qid, result in zip(ids, results, strict=True)]
    tau = {k: simulate(records, profile, budget=k)[0].tau for k in BOUND_NODES if k < budget}
    tau[budget] = simulate(records, profile)[0].tau
    draft = statistics.median([sum(r.stage_ns.get(s, 0) for s in DRAFT_STAGES) / 1e6
                               for res in results for r in res.rounds if r.drafted] or [0.0])
    bound = physics_bound(1, profile, (draft, 0.0), tau)
    return {"speedup": round(bound.speedup, 3), "nodes": bound.nodes, "draft_ms": round(draft, 2),
            "tau_by_nodes": {str(k): round(v, 3) for k, v in sorted(tau.items())},
            "forward_ms": {str(k + 1): round(profile.cost(1, k + 1), 2) for k in (0, *sorted(tau))}}


def add_bound(rows: list[dict[str, Any]], runs: Runs, profile: Any, fixed: str | None, max_new: int) -> Any:
    """The bound of :func:`physics` on ``runs`` (None without a fixed DARTree budget or the auto method), and on
    the auto row its share of it."""
    if fixed is None or profile is None or BOUND_METHOD not in runs.results:
        return None
    bound = physics(runs.results[fixed], runs.ids, profile, int(fixed.rsplit("=", 1)[1]), max_new)
    for r in rows:
        if r["method"] == BOUND_METHOD:
            r["physics_bound"] = bound["speedup"]
            r["share_of_bound"] = round(r["vs_plain"]["aggregate"]["value"] / bound["speedup"], 3)
    return bound


def build_methods(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The plain pipeline (its target shared by every method) and the labelled methods in rotation order."""
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    root = repo_root() / "examples" / "smollm2"
    host = PluginHost()
    plain = Pipeline.from_yaml(root / "plain.yaml", host=host)
    target = plain.target
    methods: dict[str, Any] = {PLAIN: plain, REFERENCE_NAME: None,
                               "prompt-lookup chain": Pipeline.from_yaml(root / "prompt-lookup-chain.yaml",
                                                                         target=target, host=host)}
    dart = Pipeline.from_yaml(root / "dartree-pruned.yaml", target=target, host=host)
    for b in args.budgets:
        methods[f"dartree-pruned B={b}"] = dart.with_stage("budget", None, budget=b)
    for method in args.methods:
        methods[f"{method} auto"] = Pipeline.from_yaml(
            root / LEARNED_FILES.get(method, f"{method}.yaml"), target=target, host=host,
            overrides=["budget=auto", f"auto_budget.max_budget={args.max_budget}"])
    return plain, methods


def units(labels: Sequence[str]) -> list[list[str]]:
    """Rotation units: ``hf_generate`` stays right after plain decoding (it decodes plain's token count)."""
    out: list[list[str]] = []
    for label in labels:
        if label == REFERENCE_NAME and out and out[-1][0] == PLAIN:
            out[-1].append(label)
        else:
            out.append([label])
    return out


def run_set(prompts: PromptSet, plain: Any, methods: dict[str, Any], max_new: int, freeze: Any) -> Runs:
    runs = Runs(list(methods))
    groups = units(list(methods))
    for i, item in enumerate(prompts.prompts):
        runs.ids.append(item.question_id)
        shift = i % len(groups)
        for label in [m for unit in groups[shift:] + groups[:shift] for m in unit]:
            freeze.restore()  # every measured request starts from the controllers' state after the warm-up
            with LoadWindow() as window:
                if label == REFERENCE_NAME:
                    done = runs.results[PLAIN][-1]  # plain decoding's result: its token count and its seed
                    result, _ = reference_result(plain, plain.encode(item.text), new_tokens=len(done.tokens),
                                                 seed=done.seed or 0)
                else:
                    result = methods[label].generate(item.text, max_new)
            runs.results[label].append(result)
            if window.load is not None:
                runs.loads[label].append(window.load)
    return runs


def _cell(v: dict[str, Any] | None) -> str:
    if v is None:
        return "-"
    a = v["aggregate"]
    return f"{a['value']:.2f}x [{a['low']:.2f}, {a['high']:.2f}]"


def print_table(console: Console, title: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("method", "τ", "tok/s", "vs generate() [CI]", "median", "worst", "vs plain [CI]", "worst", "= plain",
                "= generate()", "nodes", "plain %", "contended"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for r in rows:
        gen = r.get("vs_generate")
        table.add_row(r["method"], f"{r['tau']:.2f}", f"{r['tokens_per_s']:.2f}", _cell(gen),
                      "-" if gen is None else f"{gen['median']:.2f}", "-" if gen is None else f"{gen['worst']:.2f}",
                      _cell(r["vs_plain"]),
                      f"{r['vs_plain']['worst']:.2f}", f"{r['vs_plain']['identical']}/{r['prompts']}",
                      "-" if gen is None else f"{gen['identical']}/{r['prompts']}", f"{r['verified_nodes']:.1f}",
                      f"{100 * r['plain_round_share']:.0f}", str(r["contended"]))
    console.print(table)


def print_bound(console: Console, bound: dict[str, Any] | None) -> None:
    if bound is not None:
        taus = ", ".join(f"{k}: {v:.2f}" for k, v in bound["tau_by_nodes"].items())
        console.print(f"physics bound at batch 1: {bound['speedup']:.2f}x (k = {bound['nodes']}), draft "
                      f"{bound['draft_ms']:.1f} ms, τ by nodes {taus}", highlight=False)


def warm_on_tune(args: argparse.Namespace, methods: dict[str, Any], names: Sequence[str]) -> int:
    """Run ``--warm-tune`` tune-split prompts per set through the ``budget: auto`` pipelines (untimed)."""
    if args.warm_tune <= 0:
        return 0
    tune = load_prompt_sets(data_dirs(args.data), n=args.warm_tune, split="tune", names=names)
    done = 0
    for prompts in tune.values():
        for item in prompts.prompts:
            for pipe in methods.values():
                if pipe is not None and pipe.config.budget == "auto":
                    pipe.generate(item.text, args.max_new_tokens)
                    done += 1
    return done


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=20, help="prompts per set")
    ap.add_split()
    ap.add_argument("--sets", type=name_list(SETS), default=list(SETS), help=f"comma-separated, of: {', '.join(SETS)}")
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_argument("--budgets", type=counts(allow_empty=True), default=[16],
                    help="fixed budgets of DARTree pruned (\"\": none)")
    ap.add_argument("--max-budget", type=count(), default=16, help="auto's upper bound")
    ap.add_argument("--methods", type=name_list(LEARNED, allow_empty=True), default=["dartree-pruned"],
                    help=f"methods run with budget: auto, of: {', '.join(LEARNED)}")
    ap.add_argument("--warm-tune", type=count(0), default=2, help="tune prompts per set run first through auto methods")
    ap.add_threads(1)
    ap.add_argument("--bootstrap", type=count(), default=2000, help="bootstrap resamples")
    ap.add_protocol()
    ap.add_smoke("2 prompts per set, 8 tokens, B = 16 and DARTree pruned auto")
    ap.add_output("runs/auto-budget.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.max_new_tokens, args.budgets, args.methods = 2, 8, [16], ["dartree-pruned"]
        args.bootstrap, args.warm_tune = 200, 0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(args.sets, data_dirs(args.data))
    with measured_run(args, own_threads(args.threads)) as run:
        return measure(args, run)


def measure(args: argparse.Namespace, run: RunProtocol) -> int:
    console = Console(width=None if sys.stdout.isatty() else 200)
    load_before = run.start_load
    apply_threads(args.threads)
    use_shipped_checkpoints()
    sets = load_prompt_sets(data_dirs(args.data), n=args.n, split=args.split, names=args.sets)
    plain, methods = build_methods(args)
    t0 = time.perf_counter()
    warmed = warm_on_tune(args, methods, args.sets)
    first = load_prompt_sets(data_dirs(args.data), n=1, split="tune",
                             names=args.sets[:1])[args.sets[0]].prompts[0].text
    for pipe in methods.values():  # warm-up on a tune prompt: first-call allocations, and auto's profile
        if pipe is not None:
            pipe.generate(first, 4)
    reference_result(plain, plain.encode(first), new_tokens=4, seed=0)
    run.set_plain_reference(plain, first)
    freeze = run.freeze_controllers([p for p in methods.values() if p is not None])
    auto = methods[BOUND_METHOD].auto_budget if BOUND_METHOD in methods else None
    profile = auto.profile if auto is not None else None  # the controller's cost model after the warm-up
    fixed = f"dartree-pruned B={max(args.budgets)}" if args.budgets else None
    boot = {"resamples": args.bootstrap, "confidence": 0.95, "seed": 0}
    report: dict[str, Any] = {
        "smoke": args.smoke, "machine": machine_summary(), "threads": args.threads, "load_before": load_before,
        "split": args.split, "n": args.n, "max_new_tokens": args.max_new_tokens, "greedy": True,
        "warm_tune_runs": warmed, "sets": {}, "groups": {},
        "cost_model": profile.to_json() if profile is not None else None,
    }
    pooled = {group: Runs(list(methods)) for group in GROUPS}
    for name, prompts in sets.items():
        runs = run_set(prompts, plain, methods, args.max_new_tokens, freeze)
        rows = [row(label, runs, boot) for label in methods]
        report["sets"][name] = {"source": prompts.source, "note": prompts.note, "in_split": prompts.available,
                                "question_ids": runs.ids, "rows": rows,
                                "physics_bound": add_bound(rows, runs, profile, fixed, args.max_new_tokens)}
        print_table(console, f"{name}: {len(prompts.prompts)} {args.split} prompts, {args.max_new_tokens} new tokens",
                    rows)
        print_bound(console, report["sets"][name]["physics_bound"])
        run.probe()  # the machine as fast after this set as before the first?
        for group, members in GROUPS.items():
            if name in members:
                pooled[group].extend(runs)
    for group, runs in pooled.items():
        if runs.ids:
            rows = [row(label, runs, boot) for label in methods]
            report["groups"][group] = {"sets": [s for s in GROUPS[group] if s in sets], "rows": rows,
                                       "physics_bound": add_bound(rows, runs, profile, fixed, args.max_new_tokens)}
            print_table(console, f"{group} ({' + '.join(report['groups'][group]['sets'])})", rows)
    report["load_after"] = load_average()
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    report["protocol"] = run.record(prompts_per_set=args.n)
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="benchmark results")
    machine = report["machine"]
    console.print(f"{machine['cpu']} ({machine['cores']} cores, bf16 flags: {machine['bf16_flags'] or 'none'}), "
                  f"{args.threads} thread(s); wrote {args.out} in {report['wall_seconds']:.0f}s (load {load_before} "
                  f"-> {report['load_after']})" + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
