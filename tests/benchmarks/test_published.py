"""The benchmark scripts' defaults agree with the results they published: each script starts by default on a
machine as loaded as its own published JSON file records (issue [1/5]: they refused at loads of 0.61-1.05)."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
from _frame import DEFAULT_MAX_LOAD

ROOT = Path(__file__).resolve().parents[2]
#: Published result file -> (the script that wrote it, the field holding the 1-minute load at its start).
PUBLISHED = {
    "docs/benchmarks/auto-budget/results.json": ("auto_budget", "load_before"),
    "docs/benchmarks/batch-decoding/results.json": ("batch_decoding", "load_before"),
    "docs/benchmarks/batch-decoding/before.json": ("batch_decoding", "load_before"),
    "docs/benchmarks/batch-decoding/rerun.json": ("batch_decoding", "load_before"),
    "docs/benchmarks/loop-overhead/tiny.json": ("loop_overhead", "load_before"),
    "docs/benchmarks/loop-overhead/smollm2.json": ("loop_overhead", "load_before"),
    "docs/benchmarks/draft-vocab/results.json": ("draft_vocab", "loadavg_at_start"),
    "checkpoints/smollm2-135m/eval.json": ("smollm2_eval", "load_before"),
}
LOAD_CHECKED = ("auto_budget", "batch_decoding", "batched_drafting", "bf16_exactness", "draft_vocab", "smollm2_eval")


@pytest.mark.parametrize("path", list(PUBLISHED))
def test_each_published_run_started_below_its_scripts_default_max_load(path: str, tmp_path: Path) -> None:
    script, field = PUBLISHED[path]
    load = json.loads((ROOT / path).read_text())[field]
    args = importlib.import_module(script).parse_args(["--out", str(tmp_path / "x.json")])
    assert load is not None and load <= args.max_load, (path, load, args.max_load)


@pytest.mark.parametrize("script", LOAD_CHECKED)
def test_every_load_checked_script_defaults_to_the_one_max_load(script: str, tmp_path: Path) -> None:
    assert importlib.import_module(script).parse_args(["--out", str(tmp_path / "x.json")]).max_load == \
        DEFAULT_MAX_LOAD


def test_the_docs_table_script_and_the_docs_say_the_same_max_load() -> None:
    shell = (ROOT / "benchmarks" / "rerun_docs_tables.sh").read_text()
    assert re.search(r"max=\$\{MAX_LOAD:-([0-9.]+)\}", shell).group(1) == str(DEFAULT_MAX_LOAD)
    for text in ((ROOT / "docs" / "benchmarks.md").read_text(), shell):
        for value in re.findall(r"--max-load\s+([0-9.]+)", text):
            assert float(value) == DEFAULT_MAX_LOAD, value
