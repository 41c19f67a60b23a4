"""How often the controller memory's nearest remembered prompts are of the same kind of text (math, code, chat).

An earlier `budget: auto` started a request from the gains of the earlier requests whose prompt signatures were
most like its own (:mod:`specframe.cost.text_kind`); the current one does not (no ablation on a quiet machine has
shown that it pays; the controller's exploration retries each request instead). This script measures
whether "most like" means "the same kind": for each of ``--n`` prompts of the nine prompt sets (GSM8K, HumanEval,
MT-Bench, Alpaca and Spec-Bench's five categories; :mod:`prompt_sets`, split ``--split``), templated and
tokenized as a SmolLM2 pipeline encodes them (its chat template), it takes every *other* prompt as the remembered
history, finds the neighbours that memory used (centred cosine at least :data:`SIMILAR`, the best
:data:`NEIGHBOURS`) and lets them vote,
weighted by similarity, on the kind. A prompt without neighbours is counted apart (the memory then falls back to
the overall gain). Nothing is timed: the figures depend on the prompts and the tokenizer only.

Kinds: ``gsm8k`` and ``spec_bench/math_reasoning`` are math, ``humaneval`` code, every other set chat.

Usage::

    .venv/bin/python benchmarks/text_kind_neighbours.py --n 20 --out docs/benchmarks/text-kind/results.json
    .venv/bin/python benchmarks/text_kind_neighbours.py --smoke --out /tmp/text-kind.json      # seconds
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from _frame import BenchParser, count, run_script
from prompt_sets import SETS, data_dirs, load_prompt_sets, require_sets

from specframe.bench.splits import SPLITS
from specframe.cost.text_kind import neighbours, prompt_signature
from specframe.files import write_text

#: Centred cosine similarity from which an earlier request counts as the same kind of text, and how many count.
SIMILAR = 0.3
NEIGHBOURS = 8
#: The kind of text of each prompt set.
KIND = {name: "math" if name in ("gsm8k", "spec_bench/math_reasoning") else "code" if name == "humaneval" else "chat"
        for name in SETS}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = BenchParser(description=__doc__.splitlines()[0])
    ap.add_data()
    ap.add_argument("--n", type=count(), default=20, help="prompts per set")
    ap.add_argument("--split", choices=SPLITS, default="tune", help="tune: the prompts settings are chosen on")
    ap.add_input("--tokenizer", None, kind="dir", help="a model directory with the tokenizer (default: the "
                                                        "converted SmolLM2 target)")
    ap.add_smoke("3 prompts per set")
    ap.add_output("runs/text-kind.json")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n = 3
    return args


def vote(alike: list[tuple[int, float]], kinds: Sequence[str]) -> str:
    """The kind the neighbours name, weighted by their similarity."""
    weights: Counter[str] = Counter()
    for index, similarity in alike:
        weights[kinds[index]] += similarity
    return weights.most_common(1)[0][0]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    require_sets(SETS, data_dirs(args.data))
    from specframe_hf.loading import load_tokenizer
    from specframe_smollm2.cache import target_dir

    from specframe.prompts import encode_messages, user_message

    directory = args.tokenizer or target_dir()
    tokenizer = load_tokenizer(directory)
    sets = load_prompt_sets(data_dirs(args.data), n=args.n, split=args.split, names=SETS)
    names = [name for name, prompts in sets.items() for _ in prompts.prompts]
    kinds = [KIND[name] for name in names]
    signatures = [prompt_signature(encode_messages(tokenizer, user_message(item.text)))
                  for prompts in sets.values() for item in prompts.prompts]
    per_set: dict[str, dict[str, int]] = {name: {"prompts": 0, "with_neighbours": 0, "right_kind": 0} for name in sets}
    for i, signature in enumerate(signatures):
        others = signatures[:i] + signatures[i + 1:]
        alike = [(j if j < i else j + 1, w) for j, w in
                 neighbours(signature, others, min_similarity=SIMILAR, limit=NEIGHBOURS)]
        row = per_set[names[i]]
        row["prompts"] += 1
        if alike:
            row["with_neighbours"] += 1
            row["right_kind"] += vote(alike, kinds) == kinds[i]
    total = {k: sum(row[k] for row in per_set.values()) for k in ("prompts", "with_neighbours", "right_kind")}
    report: dict[str, Any] = {
        "smoke": args.smoke, "n": args.n, "split": args.split, "tokenizer": str(directory),
        "similar": SIMILAR, "neighbours": NEIGHBOURS, "kinds": KIND, **total,
        "share": round(total["right_kind"] / max(total["with_neighbours"], 1), 4), "sets": per_set}
    for name, row in per_set.items():
        print(f"{name:<26} {KIND[name]:<5} {row['right_kind']:>3} of {row['with_neighbours']:>3} with neighbours "
              f"({row['prompts']} prompts)")
    print(f"the nearest remembered prompts name the right kind for {total['right_kind']} of the "
          f"{total['with_neighbours']} prompts that have neighbours ({100 * report['share']:.0f} %), "
          f"{total['prompts']} prompts in all")
    write_text(args.out, json.dumps(report, indent=2) + "\n", what="results")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
