"""The ``tree-baselines-table`` block of docs/benchmarks.md (issue [5/5]): the field's newest tree baselines beside
DARTree, rendered from ``docs/benchmarks/tree-baselines/results.json`` by the ablation table's own renderer, and a
"not measured yet" line, naming the run that writes the file, while the file is absent.

The result file here is synthetic (a report of ``benchmarks/corrector_ablation.py``'s shape with made-up figures),
written into a temporary repository root; no measured figure is involved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from specframe import docs_claims
from specframe.bench.published import RESULT_FILES, status_line

ROOT = Path(__file__).resolve().parents[2]
#: Labels of the two pruner rows of the ablation script (JetSpec's depth-rank histogram, TAPS).
PRUNER_LABELS = {"DFlash + JetSpec depth-rank histogram", "DFlash + TAPS pruner"}


def cell(method: str, budget: int, tau: float, ms: float, gain: float) -> dict[str, Any]:
    return {"method": method, "corrector": "none (DFlash)", "shape": "tree", "budget": budget, "tau": tau,
            "draft_ms_per_round": ms, "drafter_ms_per_round": ms / 2, "tokens_per_s": 10.0,
            "vs_plain_loop": {"value": gain, "low": gain - 0.1, "high": gain + 0.1, "n": 3},
            "vs_generate": gain, "exact": True}


def synthetic_report() -> dict[str, Any]:
    methods = ("DFlash + DDTree heap", "Domino GRU DARTree", "DFlash + JetSpec accum_logp",
               "DFlash + JetSpec top2gap fanout")
    kind = {"plain_loop_tokens_per_s": 12.5, "generate_tokens_per_s": 11.0, "n": 3,
            "plain_loop_vs_generate": {"value": 1.14, "low": 1.1, "high": 1.2, "n": 3},
            "cells": [cell(m, b, 2.0 + i / 4 + b / 100, 7.5 + i, 1.0 + i / 10)
                      for i, m in enumerate(methods) for b in (4, 8)]}
    return {"smoke": False, "split": "report", "n": 3, "max_new_tokens": 16, "budgets": [4, 8], "threads": 1,
            "machine": {"cpu": "Test CPU", "cores": 2, "native_bf16_cpu": True}, "load_before": 0.1,
            "kinds": {"math": kind, "code": kind}}


def write(root: Path, report: dict[str, Any]) -> None:
    path = root / docs_claims.TREE_BASELINES_JSON
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(report), encoding="utf-8")


def test_the_block_renders_a_result_file_as_the_ablation_table(tmp_path: Path) -> None:
    report = synthetic_report()
    write(tmp_path, report)
    text = docs_claims.tree_baselines_table("docs/benchmarks.md", root=tmp_path)
    assert "([JSON](benchmarks/tree-baselines/results.json))" in text  # linked relative to the page
    assert "**math**" in text and "**code**" in text and "| method | B = 4 | B = 8 |" in text
    assert "| DFlash + JetSpec top2gap fanout | 2.79 · 10.5 · 1.30× | 2.83 · 10.5 · 1.30× |" in text
    assert "| DFlash + DDTree heap | 2.04 · 7.5 · 1.00× |" in text
    assert "every output equal to the plain loop's: yes" in text
    assert status_line(report) in text  # the file's provenance, as every rendered table carries
    assert text.endswith("Not in this file (not measured yet): DFlash + JetSpec depth-rank histogram, "
                         "DFlash + TAPS pruner.")


def test_a_file_with_every_baseline_names_none_missing(tmp_path: Path) -> None:
    report = synthetic_report()
    for kind in report["kinds"].values():
        kind["cells"] = kind["cells"] + [cell(m, b, 2.0, 8.0, 1.0) for m in sorted(PRUNER_LABELS) for b in (4, 8)]
    write(tmp_path, report)
    text = docs_claims.tree_baselines_table("docs/benchmarks.md", root=tmp_path)
    assert "Not in this file" not in text and "| DFlash + TAPS pruner | 2.00 · 8.0 · 1.00× |" in text


def test_an_absent_file_gives_the_not_measured_line_with_the_run_that_writes_it(tmp_path: Path) -> None:
    text = docs_claims.tree_baselines_table("docs/benchmarks.md", root=tmp_path)
    assert text.startswith("Not measured yet: `docs/benchmarks/tree-baselines/results.json` is not in the repository")
    assert "×" not in text and "τ" not in text  # no figure is claimed
    assert '--split report --n 20 --max-new-tokens 64 --methods "DFlash + DDTree heap,Domino GRU DARTree,' in text
    assert "--out docs/benchmarks/tree-baselines/results.json" in text


def test_the_file_is_registered_measured_and_called_published() -> None:
    """Measured in two interleaved parts (math and code, then chat and translation), each quiet and steady block by
    block, so the docs call it published (``test_published.py`` checks that claim against the file)."""
    entry = next(e for e in RESULT_FILES if e.path == docs_claims.TREE_BASELINES_JSON)
    assert (ROOT / entry.path).is_file() and not entry.pending
    assert entry.published and entry.script == "corrector_ablation"


def test_the_block_names_labels_of_the_ablation_script() -> None:
    """Each label the not-measured line's command passes to ``--methods`` is one the script accepts (it refuses an
    unknown one before any work), apart from the rows other branches add."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import corrector_ablation
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    labels = {m[0] for m in corrector_ablation.METHODS}
    assert set(docs_claims.TREE_BASELINE_METHODS) <= labels
    jetspec = {m[0]: m[3] for m in corrector_ablation.METHODS if "JetSpec" in m[0]}
    assert jetspec["DFlash + JetSpec accum_logp"] == "accum-logp.yaml"
    assert jetspec["DFlash + JetSpec top2gap fanout"] == "top2gap-fanout.yaml"
    # the table's other rows are the script's tree shapes kept out of the ablation proper
    assert set(docs_claims.TREE_BASELINE_METHODS) - {"DFlash + DDTree heap", "Domino GRU DARTree"} == \
        set(corrector_ablation.TREE_SHAPE_BASELINES)
