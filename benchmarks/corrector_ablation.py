"""The corrector ablation on the SmolLM2 pair: every correction stage as a chain and inside DARTree, at fixed budgets.

One shared target, the same prompts per kind (math: GSM8K, code: HumanEval, chat: MT-Bench first turns, and the
out-of-distribution set, translation: Spec-Bench's; from the ``tune`` split of :mod:`specframe.bench.splits` unless
``--split report`` is given, which needs at least 20 per kind; found where ``specframe datasets`` finds them),
greedy, fixed budgets (default 4, 8 and 16 verified nodes). Per kind, specframe's plain loop (the speedup
denominator), transformers' ``generate()`` on the same prompts and token counts, and every method run (by
default :data:`ABLATION_METHODS`) at every budget decode each prompt in turn, **interleaved**: one prompt by all
of them (in an order rotated per prompt) is one block, timed around by the protocol's reference workload and
measured again when the machine's speed moved within it, so every ratio compares decodes made minutes apart, not
an hour (:mod:`specframe.bench.steadiness`). The methods (:data:`METHODS`):

* chains: the DFlash drafter alone, Domino's GRU head, DSpark's Markov head, DFlash2's path selector and
  LiLiCorr's lattice reranker, each walking its corrected greedy path;
* trees: DFlash + DDTree's heap (the drafter has no corrector, so DARTree is the heap: Lemma 1), DFlash + the heap
  over-expanded to 64 nodes and cut to the budget by the TAPS pruner (``taps.yaml``), DFlash + a heap of 48 cut by
  JetSpec's depth-rank histogram pruner (its profile recorded on the tune split), and DARTree
  pruned (width 6, deferred top-B, β = -0.2) over each head; PCTree over the Markov head; JetSpec's fan-out
  builders over the DFlash drafter (``accum_logp`` and ``top2gap_fanout``, K = 4); TAPS, the depth-rank pruner and
  the fan-out builders are :data:`TREE_SHAPE_BASELINES`, run when ``--methods`` names them;
* with ``--methods`` naming them, the chat zoo: the chat drafter (``recipes/smollm2/drafter-chat.yaml``) as a chain,
  and its GRU head (``ar-head-chat.yaml``) as a chain and inside DARTree (trained on the machine first: the
  weights are not shipped).

Per cell: τ (tokens per verify round, bonus included), draft ms per drafted round (the drafter's forward, the
correction head's calls and the tree: the ``draft``, ``build`` and ``prune`` stages; the drafter's forward alone as
``drafter_ms_per_round``), tokens/s, and the speedup over the plain loop with its 95 % bootstrap interval
over the prompts (:mod:`specframe.metrics.gains`); the plain loop's own speed against ``generate()`` is a separate
line per kind (the kernel gain, never multiplied into a method's row). Every output is checked token for token
against the plain loop's. A table per kind on stdout, a JSON file with every cell (and the CPU, threads and load)
at ``--out``, and with ``--eval-json`` the same report under the key ``corrector_ablation`` of the checkpoints'
``eval.json`` (the model cards and docs/benchmarks.md render their ablation tables from it). The script runs under the
quiet rule (:mod:`specframe.bench.quiet`) in a private cache; all methods have fixed budgets (no controller learns).

Usage::

    .venv/bin/python benchmarks/corrector_ablation.py --n 20 --split report --max-new-tokens 64 \
        --out runs/corrector-ablation.json \
        --eval-json checkpoints/smollm2-135m/eval.json
    .venv/bin/python benchmarks/corrector_ablation.py --n 20 --split report --max-new-tokens 64 \
        --kinds math,code --out docs/benchmarks/corrector-ablation/parts.json      # in two sessions: a first part
    .venv/bin/python benchmarks/corrector_ablation.py --n 20 --split report --max-new-tokens 64 \
        --kinds chat,translation --extend docs/benchmarks/corrector-ablation/parts.json \
        --out docs/benchmarks/corrector-ablation/parts.json --eval-json checkpoints/smollm2-135m/eval.json
    .venv/bin/python benchmarks/corrector_ablation.py --smoke --out /tmp/ablation.json     # a smoke run

A run without ``--methods`` measures the ablation proper (:data:`ABLATION_METHODS`: every correction head as a chain
and inside a tree, DDTree's heap and PCTree); the other tree shapes over the DFlash drafter
(:data:`TREE_SHAPE_BASELINES`) have their own table (``docs/benchmarks/tree-baselines/``), measured with
``--methods``. A chain holds min(depths, budget) nodes a round, so over the shipped drafters (8 depths a round) a
chain at B = 16 is the chain at B = 8: it is decoded once (:func:`decoded_budget`), and its B = 16 cell says so
(``same_as_budget``) instead of timing the same decode twice.

The whole table takes hours on 2 cores (docs/concepts/benchmark-protocol.md says how many), more than a session on
these machines; it is measured in parts
(:mod:`specframe.bench.parts`): some prompt kinds per run (``--kinds math,code``, then ``--kinds chat,translation
--extend`` that file) or some methods per run (``--methods``, ``--extend`` the file of the other rows; rows of one
kind from one CPU, checked before the run). The run that completes the table publishes it with ``--eval-json``;
every part's kinds, methods, machine and protocol are kept in ``runs``, each kind's table names the run that measured
it, and the file is judged by its weakest part.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from _frame import (
    BenchParser,
    RunProtocol,
    apply_threads,
    count,
    counts,
    measured_run,
    name_list,
    run_script,
    shipped_plain_pipeline,
    use_shipped_checkpoints,
)
from prompt_sets import OUT_OF_DISTRIBUTION, data_dirs, load_prompt_sets, require_sets
from rich.console import Console
from rich.table import Table
from specframe_smollm2.demo import GENERATE_LABEL, MethodRun, repo_root

from specframe.bench.parts import Part, kind_parts, methods_of, parts, weakest
from specframe.docs_claims import ablation_cell
from specframe.files import write_text
from specframe.metrics.gains import estimate_to_json, paired_gain
from specframe.metrics.machine_info import machine_summary
from specframe.metrics.machine_load import load_average

#: Prompt kind -> benchmark set.
KINDS = {"math": "gsm8k", "code": "humaneval", "chat": "mt_bench", "translation": OUT_OF_DISTRIBUTION}
DARTREE = ("tree_builder.type=dartree", "tree_builder.mode=pruned", "tree_builder.width=6",
           "pruner.type=deferred_topb", "pruner.beta=-0.2")
#: (label, correction stage, shape, pipeline file under examples/smollm2, overrides besides the budget).
METHODS: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("DFlash chain", "none (DFlash)", "chain", "dflash-chain.yaml", ()),
    ("DFlash + DDTree heap", "none (DFlash)", "tree", "ddtree.yaml", ()),
    ("DFlash + TAPS pruner", "none (DFlash)", "tree", "taps.yaml", ()),
    ("DFlash + JetSpec depth-rank histogram", "none (DFlash)", "tree", "depth-rank-histogram.yaml", ()),
    ("Domino GRU chain", "Domino GRU", "chain", "domino-chain.yaml", ()),
    ("Domino GRU DARTree", "Domino GRU", "tree", "domino-chain.yaml", DARTREE),
    ("DSpark Markov chain", "DSpark Markov", "chain", "dspark-chain.yaml", ()),
    ("DSpark Markov DARTree", "DSpark Markov", "tree", "dspark-chain.yaml", DARTREE),
    ("PCTree (DSpark Markov)", "DSpark Markov", "tree", "pctree.yaml", ()),
    ("path selector chain", "DFlash2 path selector", "chain", "path-selector-chain.yaml", ()),
    ("path selector DARTree", "DFlash2 path selector", "tree", "path-selector-chain.yaml", DARTREE),
    ("lattice chain", "LiLiCorr lattice", "chain", "lilicorr-chain.yaml", ()),
    ("lattice DARTree", "LiLiCorr lattice", "tree", "lilicorr-chain.yaml", DARTREE),
    ("DFlash + JetSpec accum_logp", "none (DFlash)", "tree", "accum-logp.yaml", ()),
    ("DFlash + JetSpec top2gap fanout", "none (DFlash)", "tree", "top2gap-fanout.yaml", ()),
]
#: The chat zoo's rows, run when named in ``--methods`` (its weights are trained on the machine, not shipped:
#: ``checkpoints/smollm2-135m-chat/README.md``).
CHAT_ZOO_METHODS: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("chat zoo: DFlash chain", "none (DFlash)", "chain", "chat-zoo/dflash-chain-chat.yaml", ()),
    ("chat zoo: Domino GRU chain", "Domino GRU", "chain", "chat-zoo/domino-chain-chat.yaml", ()),
    ("chat zoo: Domino GRU DARTree", "Domino GRU", "tree", "chat-zoo/domino-chain-chat.yaml", DARTREE),
]
SMOKE_METHODS = ("DFlash chain", "path selector chain", "lattice DARTree", "PCTree (DSpark Markov)")
#: Other papers' tree shapes over the DFlash drafter: the tree baselines' own table (``--methods`` names them).
TREE_SHAPE_BASELINES = ("DFlash + TAPS pruner", "DFlash + JetSpec depth-rank histogram", "DFlash + JetSpec accum_logp",
                        "DFlash + JetSpec top2gap fanout")
#: The ablation proper, what a run without ``--methods`` measures and the published table (``--eval-json``) holds.
ABLATION_METHODS = [method for method in METHODS if method[0] not in TREE_SHAPE_BASELINES]


def parse_args(argv: Sequence[str] | None) -> Any:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=6, help="prompts per kind")
    ap.add_split()
    ap.add_argument("--max-new-tokens", type=count(), default=64)
    ap.add_argument("--budgets", type=counts(), default=[4, 8, 16])
    ap.add_argument("--methods", type=name_list([m[0] for m in (*METHODS, *CHAT_ZOO_METHODS)]), default=None,
                    help="comma-separated method labels to run (default: the ablation's, ABLATION_METHODS); the "
                         "plain loop and generate() always run; with --eval-json only beside an --extend file that "
                         "holds the ablation's other rows (the published table holds every one)")
    ap.add_argument("--kinds", type=name_list(list(KINDS)), default=None,
                    help=f"comma-separated prompt kinds to run (default: all of {', '.join(KINDS)}); a table "
                         "measured kind by kind is assembled with --extend")
    ap.add_output("runs/corrector-ablation.json")
    ap.add_input("--eval-json", None, kind="file",
                 help="also store the report under 'corrector_ablation' in this eval.json (the published one: "
                      "checkpoints/smollm2-135m/eval.json)")
    ap.add_input("--extend", None, kind="file",
                 help="add this run's rows to this earlier result file of the same split, prompt count, token "
                      "limit, budgets and threads, checked before the run: its kinds this run also measures must "
                      "come from this CPU (rows of the same label are replaced), its other kinds may come from "
                      "any; the file keeps every run's kinds, methods, machine and protocol, and a table measured "
                      "in parts is published with --eval-json once the parts hold every row")
    ap.add_threads(1)
    ap.add_protocol()
    ap.add_smoke("1 prompt per kind, 4 tokens, budgets 8 and 16 (a chain's two: one pipeline), 4 methods unless "
                 "--methods names others")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.max_new_tokens, args.budgets = 1, 4, [8, 16]
    args.earlier = None
    if args.extend is not None:
        args.earlier, problem = earlier_file(args.extend, run_settings(args), machine_summary()["cpu"],
                                             args.kinds or list(KINDS))
        if problem:
            ap.error(f"argument --extend: {args.extend} {problem}")
    if args.eval_json is not None and not args.smoke:  # a smoke run's file says it is one
        missing = missing_rows(args.earlier, args.methods, args.kinds, args.budgets)
        if missing:
            shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
            source = f"{args.extend} and this run" if args.extend is not None else "this run"
            ap.error(f"argument --eval-json: publishes the whole table, but {source} would lack {shown}: name them "
                     "in --methods and --kinds too, --extend a file that holds them, or drop --eval-json")
    return args


def missing_rows(earlier: dict[str, Any] | None, methods: Sequence[str] | None, kinds: Sequence[str] | None,
                 budgets: Sequence[int]) -> list[str]:
    """What the whole table (every method of :data:`ABLATION_METHODS` at every one of ``budgets`` in every kind of
    :data:`KINDS`) would lack, built from the ``earlier`` file (None: none) and a run of ``methods`` over ``kinds``
    (None: the defaults, the ablation's methods and every kind), as ``"kind: method"``.

    Example: a file of math and code with every row, and a run of ``--kinds chat`` -> ``["translation: DFlash
    chain", ...]``, every method of translation."""
    run_methods = {m[0] for m in ABLATION_METHODS} if methods is None else set(methods)
    run_kinds = set(KINDS) if kinds is None else set(kinds)
    held = (earlier or {}).get("kinds") or {}
    missing: list[str] = []
    for kind in KINDS:
        cells = {(c.get("method"), c.get("budget")) for c in (held.get(kind) or {}).get("cells", [])}
        missing += [f"{kind}: {label}" for label, *_ in ABLATION_METHODS
                    if not (kind in run_kinds and label in run_methods)
                    and not all((label, b) in cells for b in budgets)]
    return missing


def run_settings(args: Any) -> dict[str, Any]:
    """This run's values of :data:`SAME_RUN_KEYS` (the report records the same)."""
    return {key: getattr(args, key) for key in SAME_RUN_KEYS}


def earlier_file(path: Path, settings: dict[str, Any], cpu: str,
                 kinds: Sequence[str]) -> tuple[dict[str, Any] | None, str]:
    """The ``--extend`` file, read and checked before any work: ``(its report, "")``, or ``(None, what is wrong)``
    when it is not a result file of this script, was measured with other :data:`SAME_RUN_KEYS` than ``settings``,
    or holds rows of one of this run's ``kinds`` measured on another CPU than ``cpu`` (one kind's table holds one
    CPU's rows; kinds it does not share with this run may come from any machine: :mod:`specframe.bench.parts`). An
    hour's run would otherwise only find out when merging."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"is not a readable JSON result file ({exc})"
    held = data.get("kinds") if isinstance(data, dict) else None
    if not isinstance(held, dict) or not held or not set(held) <= set(KINDS) or not all(
            isinstance(k, dict) and isinstance(k.get("cells"), list)
            and all(isinstance(c, dict) and isinstance(c.get("method"), str) for c in k["cells"])
            for k in held.values()):
        return None, (f"is not a corrector ablation result file (a 'kinds' object of some of {', '.join(KINDS)}, "
                      "each with 'cells' rows naming their 'method'); give a file this script wrote")
    differing = differing_settings(data, settings)
    if differing:
        return None, (f"was measured with other settings ({differing}); run with the same --split, --n, "
                      "--max-new-tokens, --budgets, --threads and --smoke, or write a new file")
    clash = other_cpus(data, kinds, cpu)
    if clash:
        return None, (f"holds rows of {clash} measured on another CPU: one kind's table holds one CPU's rows; "
                      "measure its other kinds (--kinds), or write a new file")
    return data, ""


def other_cpus(report: dict[str, Any], kinds: Sequence[str], cpu: str | None) -> str:
    """Which of ``kinds`` ``report`` holds rows of measured on another CPU than ``cpu``, as ``chat (another CPU
    ('CPU A' there, 'CPU B' here))``; empty when none."""
    clashes: list[str] = []
    for kind in kinds:
        theirs = sorted({repr(part.cpu) for part in kind_parts(report, kind) if part.cpu != cpu})
        if kind in report.get("kinds", {}) and theirs:
            clashes.append(f"{kind} (another CPU ({', '.join(theirs)} there, {cpu!r} here))")
    return ", ".join(clashes)


def differing_settings(earlier: dict[str, Any], new: dict[str, Any]) -> str:
    """Where two runs' :data:`SAME_RUN_KEYS` differ, as ``n=20 there, 8 here`` (empty when they agree)."""
    return ", ".join(f"{k}={earlier.get(k)!r} there, {new.get(k)!r} here" for k in SAME_RUN_KEYS
                     if earlier.get(k) != new.get(k))


#: The stages of drafting: the drafter's forward (``draft``), the correction head's calls and the tree (``build``)
#: and pruning (``prune``).
DRAFTING = ("draft", "build", "prune")


def selected_methods(names: Sequence[str] | None, smoke: bool) -> list[tuple[str, str, str, str, tuple[str, ...]]]:
    """The rows to run: those ``--methods`` names (a smoke run too), else the smoke set or the ablation's
    (:data:`ABLATION_METHODS`)."""
    chosen = names if names is not None else SMOKE_METHODS if smoke else None
    return ABLATION_METHODS if chosen is None else [m for m in (*METHODS, *CHAT_ZOO_METHODS) if m[0] in chosen]


def draft_ms_per_round(run: MethodRun, stages: tuple[str, ...] = DRAFTING) -> float:
    """The mean over the drafted rounds of ``stages`` (default: all of drafting, the head included), in ms."""
    rounds = [r for res in run.results for r in res.rounds if r.drafted]
    return sum(r.stage_ns.get(s, 0) for r in rounds for s in stages) / len(rounds) / 1e6 if rounds else 0.0


#: What one block of this run holds (its record's ``pairing``).
BLOCK_CONTENTS = ("one prompt decoded by the plain loop, generate() and every method at every budget (a pipeline "
                  "two budgets share, once), in an order rotated per prompt")
#: The unit of a block that decodes with the plain loop and then with ``generate()`` for as many tokens.
PLAIN_AND_GENERATE = -1


def block_order(index: int, prompts: int, pipes: int) -> list[int]:
    """The order of block ``index`` of ``prompts``: :data:`PLAIN_AND_GENERATE` and the pipes' indices, rotated by
    an even share of a full turn per prompt, so that over the prompts every unit sits at every part of a block
    alike (a one-step turn would leave the last units late in every block when there are more units than
    prompts).

    Example: 3 pipes (4 units), 2 prompts -> [-1, 0, 1, 2], then [1, 2, -1, 0]."""
    units = [PLAIN_AND_GENERATE, *range(pipes)]
    shift = index * len(units) // max(prompts, 1) % len(units)
    return units[shift:] + units[:shift]


def decode_block(order: Sequence[int], prompt: str, plain: Any, pipes: Sequence[Any], max_new_tokens: int) -> list[Any]:
    """One block: ``prompt`` decoded by the units of ``order`` (:func:`block_order`): the plain loop followed by
    ``generate()`` for as many tokens (its own seed), or one of ``pipes``. Returns the results as
    ``[plain, generate(), *pipes]``, whatever the order."""
    from specframe.reference import reference_result

    results: list[Any] = [None] * (len(pipes) + 2)
    for unit in order:
        if unit == PLAIN_AND_GENERATE:
            results[0] = plain.generate(prompt, max_new_tokens)
            results[1], _ = reference_result(plain, plain.encode(prompt), new_tokens=len(results[0].tokens),
                                             seed=results[0].seed or 0)
        else:
            results[unit + 2] = pipes[unit].generate(prompt, max_new_tokens)
    return results


def decoded_budget(pipe: Any, shape: str, budget: int) -> int:
    """The budget ``pipe`` decodes with: a chain holds min(depths, budget) nodes a round, so beyond the depths its
    drafter proposes per round (:meth:`~specframe.interfaces.Drafter.max_depth`: a block drafter's slots, 8 for
    the shipped SmolLM2 drafters) a larger budget changes nothing; a tree's budget, or a chain over a drafter that
    does not say its depths, is ``budget``."""
    depths = pipe.stages.drafter.max_depth()
    return min(budget, depths) if shape == "chain" and depths is not None else budget


def first_equal(keys: Sequence[Hashable]) -> list[int]:
    """For each of ``keys``, the index of its first occurrence: the grid's cells of one method and one decoded
    budget (:func:`decoded_budget`) are one pipeline, decoded once, by the first of them.

    Example: a chain at B = 4, 8, 16 whose drafter proposes 8 depths a round: keys (chain, 4), (chain, 8),
    (chain, 8) -> [0, 1, 1]."""
    seen: dict[Hashable, int] = {}
    return [seen.setdefault(key, index) for index, key in enumerate(keys)]


def ablate_kind(prompts: list[str], methods: list[tuple[str, str, str, str, tuple[str, ...]]], budgets: list[int],
                max_new_tokens: int, console: Console, run: RunProtocol) -> dict[str, Any]:
    """Plain loop, ``generate()`` and every method x budget on one kind's prompts (one shared target),
    **interleaved**: every pipeline is built and warmed up first, then each prompt is one block of the run
    (:func:`decode_block`) bracketed by the reference workload's timings, and measured again when they disagree
    (``RunProtocol.blocks``). Each speed ratio compares decodes of the same blocks, so the drift of a host that
    slows the guest over the hour (:mod:`specframe.bench.steadiness`) falls on both of its sides alike; within a
    block the rotation (:func:`block_order`) spreads what is left over every side. A chain's cell at a budget
    beyond its drafter's depths is the smaller budget's pipeline (:func:`decoded_budget`): that cell's decodes,
    marked ``same_as_budget``."""
    from specframe.pipeline import Pipeline
    from specframe.plugins import PluginHost

    root, host = repo_root() / "examples" / "smollm2", PluginHost()
    plain = Pipeline.from_yaml(root / "plain.yaml", host=host)
    grid = [(method, budget) for method in methods for budget in budgets]
    built = [Pipeline.from_yaml(root / method[3], overrides=(*method[4], f"budget={budget}"), target=plain.target,
                                host=host) for method, budget in grid]
    first = first_equal([(method[0], decoded_budget(pipe, method[2], budget))
                         for (method, budget), pipe in zip(grid, built, strict=True)])
    distinct = sorted(set(first))  # grid indices of the pipelines decoded
    pipes = [built[index] for index in distinct]
    for pipe in (plain, *pipes):
        pipe.generate(prompts[0], 4)  # warm-up (first-call allocations)
    runs = [MethodRun(label) for label in ("plain loop", GENERATE_LABEL, *(grid[i][0][0] for i in distinct))]
    run.open_block()
    started = time.perf_counter()
    for index, prompt in enumerate(prompts):
        for attempt in run.blocks():
            results = decode_block(block_order(index, len(prompts), len(pipes)), prompt, plain, pipes,
                                   max_new_tokens)
            if attempt.close():
                for method_run, result in zip(runs, results, strict=True):
                    method_run.results.append(result)
        console.print(f"  block {index + 1}/{len(prompts)} done, {time.perf_counter() - started:.0f} s into the "
                      "kind", highlight=False)
    base, generate = runs[0], runs[1]
    kernel = paired_gain(base.results, generate.results)
    console.print(f"  plain loop {base.tokens_per_s:.2f} tok/s, {GENERATE_LABEL} {generate.tokens_per_s:.2f} tok/s: "
                  f"plain loop {kernel.format()} generate()", highlight=False)
    cells = []
    for ((label, stage, shape, _, _), budget), source in zip(grid, first, strict=True):
        method_run = runs[2 + distinct.index(source)]
        exact = all(a.tokens == b.tokens for a, b in zip(method_run.results, base.results, strict=True))
        gain = paired_gain(method_run.results, base.results)
        cells.append({"method": label, "corrector": stage, "shape": shape, "budget": budget,
                      "tau": round(method_run.tau, 3), "draft_ms_per_round": round(draft_ms_per_round(method_run), 2),
                      "drafter_ms_per_round": round(draft_ms_per_round(method_run, ("draft",)), 2),
                      "tokens_per_s": round(method_run.tokens_per_s, 3), "vs_plain_loop": estimate_to_json(gain),
                      "vs_generate": round(method_run.tokens_per_s / generate.tokens_per_s, 3), "exact": exact})
        if grid[source][1] != budget:
            cells[-1]["same_as_budget"] = grid[source][1]
        console.print(f"  {label:<24} B={budget:<3} τ {cells[-1]['tau']:5.2f}  draft "
                      f"{cells[-1]['draft_ms_per_round']:6.1f} ms  {method_run.tokens_per_s:6.2f} tok/s  "
                      f"{gain.format()}  {'exact' if exact else 'DIFFERS'}"
                      + (f"  (the B={grid[source][1]} pipeline)" if grid[source][1] != budget else ""),
                      highlight=False)
    return {"plain_loop_tokens_per_s": round(base.tokens_per_s, 3),
            "generate_tokens_per_s": round(generate.tokens_per_s, 3),
            "plain_loop_vs_generate": estimate_to_json(kernel), "n": len(prompts), "cells": cells}


def table(kind: str, result: dict[str, Any], budgets: list[int]) -> Table:
    """τ / draft ms / speed over the plain loop per method (rows) and budget (columns)."""
    t = Table(title=f"{kind}: τ · draft ms per round · speed vs specframe's plain loop (greedy, all exact: "
                    f"{all(c['exact'] for c in result['cells'])})", title_justify="left")
    t.add_column("method")
    for b in budgets:
        t.add_column(f"B={b}", justify="right")
    by = {(c["method"], c["budget"]): c for c in result["cells"]}
    for label in dict.fromkeys(c["method"] for c in result["cells"]):
        t.add_row(label, *(ablation_cell(by[label, b]) for b in budgets))
    return t


#: What two runs must share for one table to hold rows of both (the same prompts: a split's first ``n`` questions).
SAME_RUN_KEYS = ("smoke", "split", "n", "max_new_tokens", "budgets", "threads")


def extended(earlier: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``earlier`` with ``new``'s rows added (:mod:`specframe.bench.parts`): in a kind both hold, ``new``'s method
    rows join the earlier ones (a row of the same label replaced; the plain loop and ``generate()`` figures of
    ``earlier`` kept: each row's speed ratio is against the plain loop of its own run, on the same prompts) and must
    come from the same CPU; a kind only ``new`` holds is added whole, from whatever machine. ``runs`` lists every
    run's kinds, methods, machine and protocol, and ``protocol`` is the one that fails the measurement protocol
    first, so the table's provenance line judges the file by its weakest run.

    Example: a file with DDTree's rows, extended by a run of a new pruner, holds both, and ``runs`` says which run
    measured which; a file of math and code, extended by a run of ``--kinds chat,translation`` on another machine,
    holds all four kinds, each kind's table naming its own machine."""
    differing = differing_settings(earlier, new)
    if differing:
        raise SystemExit(f"error: argument --extend: the file was measured with other settings ({differing}); run "
                         "with the same --split, --n, --max-new-tokens, --budgets and --threads, or write a new file")
    machine = new.get("machine") or {}
    clash = other_cpus(earlier, list(new["kinds"]), machine.get("cpu"))
    if clash:
        raise SystemExit(f"error: argument --extend: the file holds rows of {clash}: one kind's table holds one "
                         "CPU's rows; measure its other kinds (--kinds), or write a new file")
    out = json.loads(json.dumps(earlier))
    added = Part(kinds=tuple(new["kinds"]), methods=methods_of(new), protocol=new.get("protocol"), machine=machine)
    runs = [*parts(earlier), added]
    for kind, result in new["kinds"].items():
        if kind in out["kinds"]:
            kept = [c for c in out["kinds"][kind]["cells"] if c["method"] not in added.methods]
            out["kinds"][kind]["cells"] = kept + result["cells"]
        else:
            out["kinds"][kind] = result
    out["kinds"] = {kind: out["kinds"][kind] for kind in (*KINDS, *out["kinds"]) if kind in out["kinds"]}
    out["runs"] = [run.to_json() for run in runs]
    judged = weakest(out, runs)  # the file's machine and protocol: its weakest part's, as its status line says
    out["protocol"], out["machine"] = judged.protocol, dict(judged.machine)
    out["wall_seconds"] = round(sum(float(x.get("wall_seconds") or 0) for x in (earlier, new)), 1)
    return out


def merged(args: Any, report: dict[str, Any]) -> dict[str, Any]:
    """``report`` added to the ``--extend`` file read at parse time (:func:`extended`). Should the merge fail for
    any reason, this run's own rows are written first, so nothing measured is lost: to ``--out``, or beside it
    (``NAME.unmerged.json``) when ``--out`` is the ``--extend`` file itself, which is then left as it was; the exit
    message says where."""
    try:
        return extended(args.earlier, report)
    except (Exception, SystemExit) as exc:
        out, extend = Path(args.out), Path(args.extend)
        if out.resolve() == extend.resolve():
            out = out.with_name(f"{out.stem}.unmerged{out.suffix}")
        write_text(out, json.dumps(report, indent=2) + "\n", what="--out file")
        why = str(exc) if isinstance(exc, SystemExit) else (f"error: argument --extend: the rows could not be "
                                                            f"merged ({type(exc).__name__}: {exc})")
        raise SystemExit(f"{why}\nthis run's own rows were written to {out}, not merged") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(tuple(KINDS[kind] for kind in chosen_kinds(args)), data_dirs(args.data))
    with measured_run(args, args.threads or 1) as run:
        return ablate(args, run)


def chosen_kinds(args: Any) -> list[str]:
    """The prompt kinds this run measures (``--kinds``, else every one), in :data:`KINDS`' order."""
    return [kind for kind in KINDS if args.kinds is None or kind in args.kinds]


def ablate(args: Any, run: RunProtocol) -> int:
    load_before = run.start_load
    apply_threads(args.threads)
    use_shipped_checkpoints()
    console = Console(width=None if sys.stdout.isatty() else 180)
    t0 = time.perf_counter()
    kinds = chosen_kinds(args)
    sets = load_prompt_sets(data_dirs(args.data), n=args.n, split=args.split,
                            names=tuple(KINDS[kind] for kind in kinds))
    methods = selected_methods(args.methods, args.smoke)
    report: dict[str, Any] = {**run_settings(args), "machine": machine_summary(), "load_before": load_before,
                              "kinds": {}}
    run.set_plain_reference(shipped_plain_pipeline(), sets[KINDS[kinds[0]]].prompts[0].text)
    run.interleave(BLOCK_CONTENTS)
    for kind in kinds:
        name = KINDS[kind]
        console.rule(f"{kind} ({name})")
        prompts = [item.text for item in sets[name].prompts]
        report["kinds"][kind] = ablate_kind(prompts, methods, args.budgets, args.max_new_tokens, console, run)
        console.print(table(kind, report["kinds"][kind], args.budgets))
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    report["load_after"] = load_average()
    report["protocol"] = run.record(prompts_per_set=args.n, controller={"memory": "none: fixed budgets"})
    if args.extend is not None:
        report = merged(args, report)
    write_text(Path(args.out), json.dumps(report, indent=2) + "\n", what="--out file")
    if args.eval_json is not None:
        evaluation = json.loads(Path(args.eval_json).read_text(encoding="utf-8"))
        evaluation["corrector_ablation"] = report
        write_text(Path(args.eval_json), json.dumps(evaluation, indent=2) + "\n", what="--eval-json file")
    console.print(f"wrote {args.out} in {report['wall_seconds']:.0f}s"
                  + ("; SMOKE: a smoke run, not a measurement" if args.smoke else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
