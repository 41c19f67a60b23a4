"""docs/benchmarks.md's sibling-conditional acceptance block (:mod:`specframe.docs_siblings`): the depth-matched
gap on its worked example, and the rendered tables say what the committed result file counts (``docs_gen --check``
holds the page to the renderer)."""

from __future__ import annotations

import json
import re

import pytest

from specframe import docs_siblings
from specframe.docs_gen import ROOT
from specframe.metrics.siblings import SiblingTable


def test_the_depth_matched_gap_weights_each_depth_by_its_siblings() -> None:
    """The module's worked example: +0.40 at depth 1 over 10 siblings, +0.10 at depth 2 over 30 -> +0.175; a
    depth with no rank-0 count, or a chain with no sibling, adds nothing."""
    table = SiblingTable({(1, 0): (8, 10), (1, 1): (4, 10), (2, 0): (6, 10), (2, 1): (10, 20), (2, 2): (5, 10),
                          (3, 1): (0, 7)}, rank_cap=2)
    gap, weight = docs_siblings.depth_matched_gap(table)
    assert gap == pytest.approx(0.175) and weight == 40
    chain_gap, chain_weight = docs_siblings.depth_matched_gap(SiblingTable({(1, 0): (3, 4)}, rank_cap=2))
    assert chain_weight == 0 and chain_gap != chain_gap  # NaN: nothing to compare


def test_the_block_renders_the_committed_files_counts() -> None:
    """Every pipeline of the file has its depth x rank table, and the counts in its cells add up to the file's."""
    path = ROOT / docs_siblings.SIBLINGS_JSON
    if not path.exists():
        pytest.skip(f"{docs_siblings.SIBLINGS_JSON} is not in this checkout")
    report = json.loads(path.read_text(encoding="utf-8"))
    text = docs_siblings.sibling_acceptance_table("docs/benchmarks.md")
    tables = text.split("**")[1:]
    for pipe in report["pipelines"]:
        total = sum(row[3] for cell in pipe["sets"].values() for row in cell["sibling_continuation"])
        index = next(i for i, chunk in enumerate(tables) if chunk == pipe["label"])
        body = tables[index + 1]
        assert sum(int(n) for n in re.findall(r"\d\.\d\d \((\d+)\)", body)) == total, pipe["label"]
    assert "Counts only" in text and "tok/s" not in text
