"""The prompt sets the speed benchmarks report on: math, code, chat and the Spec-Bench categories.

Each set is read with the registry's loaders (:mod:`specframe.datasets`, the papers' prompt templates) from the
data directory, cut to one split (:mod:`specframe.bench.splits`: ``tune`` to choose settings, ``report``, held
out, for published numbers) and to the first ``n`` questions of the dataset's seeded order:

=========================  ====================================================================================
set                        prompts
=========================  ====================================================================================
``gsm8k``                  GSM8K test questions + the step-by-step / boxed instruction
``humaneval``              HumanEval prompts in the "Write a solution ..." template
``mt_bench``               MT-Bench first turns (writing, roleplay, reasoning, math, coding, extraction, ...)
``alpaca``                 Alpaca instructions (AlpacaEval's 805 when that is the copy at hand; the row says so)
``spec_bench/<category>``  Spec-Bench's translation, summarization, qa, math_reasoning and rag prompts (its
                           MT-Bench part is the ``mt_bench`` set)
=========================  ====================================================================================

Groups pool sets for the headline ratios: ``math_code`` (GSM8K + HumanEval) and ``chat`` (MT-Bench + Alpaca).

Example::

    sets = load_prompt_sets(["../shared/data"], n=20, split="report")
    sets["mt_bench"].prompts[0]     # PromptItem(question_id=84, text="Write a persuasive email ...")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specframe.bench.splits import Split, select_split
from specframe.datasets import load_dataset
from specframe.datasets.base import Sample

SPEC_BENCH_CATEGORIES = ("translation", "summarization", "qa", "math_reasoning", "rag")
SETS: tuple[str, ...] = ("gsm8k", "humaneval", "mt_bench", "alpaca",
                         *(f"spec_bench/{c}" for c in SPEC_BENCH_CATEGORIES))
GROUPS: dict[str, tuple[str, ...]] = {"math_code": ("gsm8k", "humaneval"), "chat": ("mt_bench", "alpaca")}


@dataclass(frozen=True)
class PromptItem:
    question_id: int | str
    text: str  # the first user turn, templated


@dataclass(frozen=True)
class PromptSet:
    name: str
    prompts: tuple[PromptItem, ...]
    source: str
    available: int  # questions of the set in the chosen split
    note: str = ""


def _items(samples: Sequence[Sample]) -> tuple[PromptItem, ...]:
    return tuple(PromptItem(s.question_id, s.turns[0]) for s in samples)


def load_prompt_sets(data_dirs: Sequence[str | Path], *, n: int, split: Split | None,
                     names: Sequence[str] = SETS, seed: int = 0) -> dict[str, PromptSet]:
    """The sets named in ``names`` (see the module docstring), ``n`` prompts each from ``split``."""
    unknown = [name for name in names if name not in SETS]
    if unknown:
        raise ValueError(f"unknown prompt set(s) {', '.join(unknown)}; available: {', '.join(SETS)}")
    out: dict[str, PromptSet] = {}
    spec_bench = None
    for name in names:
        dataset, _, category = name.partition("/")
        if dataset == "spec_bench":
            spec_bench = spec_bench or load_dataset("spec_bench", None, data_dirs=data_dirs)
            pool = [s for s in spec_bench.samples if s.category == category]
            loaded = spec_bench
        else:
            loaded = load_dataset(dataset, None, data_dirs=data_dirs)
            pool = list(loaded.samples)
        in_split = select_split(pool, split, None, seed)
        chosen = select_split(pool, split, n, seed)
        out[name] = PromptSet(name, _items(chosen), loaded.source, len(in_split), loaded.note)
    return out
