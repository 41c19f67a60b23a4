"""Sibling-conditional acceptance: the counting rule's worked example, bench records, the record schema, and the
report's tables, CSV and plot (docs/metrics.md)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from specframe.bench.record_schema import record_problem
from specframe.metrics.records import RoundRecord
from specframe.metrics.siblings import SiblingTable, count, count_rows, merge_rows, round_counts
from specframe.report import Report, summarize
from specframe.report.siblings import overview_table

from .test_report import record


def rounds(*spec: tuple[list[int], bool]) -> list[RoundRecord]:
    return [RoundRecord(nodes=8, depth=4, accepted=len(r), committed=len(r) + 1, path_ranks=r, end_has_children=e)
            for r, e in spec]


def test_worked_example() -> None:
    """Ranks [0, 1] ending on a node with children, then [1] ending on a leaf (module docstring)."""
    assert round_counts([0, 1], True) == [(1, 0, True), (2, 1, False)]
    assert round_counts([1], False) == []  # a leaf: nothing to continue with
    assert round_counts([], True) == []  # the root is not counted
    assert count(rounds(([0, 1], True), ([1], False))) == {(1, 0): (1, 1), (2, 1): (0, 1)}


def test_counts_add_up_to_the_accepted_nodes() -> None:
    """Every accepted node but a final leaf is one observation; the continued ones are all but each round's last."""
    spec = [([0, 0, 2], True), ([1, 0], False), ([], True), ([3, 4, 0, 1], True), ([0], False)]
    rows = count_rows(rounds(*spec))
    assert sum(r[3] for r in rows) == sum(len(r) - (not e and bool(r)) for r, e in spec)
    assert sum(r[2] for r in rows) == sum(max(len(r) - 1, 0) for r, _ in spec)
    pooled = merge_rows([rows, rows])  # ranks 3 and 4 pool under "3+"
    assert pooled[(1, 3)] == (2, 2) and pooled[(2, 3)] == (2, 2)
    assert merge_rows([rows], rank_cap=None)[(2, 4)] == (1, 1)


def test_table_rates_and_pooled_gap() -> None:
    table = SiblingTable.from_rows([[[1, 0, 3, 4], [1, 1, 1, 4], [2, 0, 1, 2], [2, 2, 0, 1]]])
    assert table.rate(1, 0) == 0.75 and table.rate(1, 1) == 0.25 and math.isnan(table.rate(3, 0))
    assert table.pooled(0) == (4 / 6, 6) and table.pooled(1) == (1 / 5, 5)


def with_siblings(method: str, qid: int, rows: list[list[int]]) -> dict:
    rec = record(method, qid, [2, 1, 0], 0.5)
    rec["sibling_continuation"] = rows
    return rec


def test_schema_accepts_the_counts_and_refuses_impossible_rows() -> None:
    assert record_problem(with_siblings("m", 1, [[1, 0, 2, 3]])) is None
    assert "continued <= total" in str(record_problem(with_siblings("m", 1, [[1, 0, 4, 3]])))
    assert "continued <= total" in str(record_problem(with_siblings("m", 1, [[0, 0, 1, 1]])))
    assert "sibling_continuation" in str(record_problem(with_siblings("m", 1, [[1, 0, 1]])))


def test_report_has_the_overview_per_pipeline_tables_csv_and_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    records = [record("ar", 1, [0] * 4, 1.0, baseline=True),
               with_siblings("tree", 1, [[1, 0, 6, 8], [1, 1, 1, 4], [2, 0, 2, 4]]),
               with_siblings("tree", 2, [[1, 0, 2, 2], [1, 5, 0, 2]]),
               with_siblings("chain", 1, [[1, 0, 3, 5]])]
    summary = summarize(records)
    _, rows = overview_table(summary)
    assert [r[0] for r in rows] == ["tree", "chain"]  # the baseline drafts nothing: no row
    assert rows[0][1:] == ["0.71 (14)", "0.17 (6)", "+0.55"]
    assert rows[1][1:] == ["0.60 (5)", "—", "—"]
    text = Report(summary).markdown()
    assert "## Continuation after a sibling" in text and "### tree" in text
    assert "| 1 | 0.80 (10) | 0.25 (4) | 0.00 (2) |" in text  # rank 5 pooled as "3+"
    written = Report(summary).write(tmp_path)
    with (tmp_path / "siblings.csv").open() as f:
        csv_rows = list(csv.DictReader(f))
    assert {"method": "tree", "dataset": "all", "depth": "1", "rank": "3+", "continued": "0", "total": "2",
            "rate": "0.0"} in csv_rows
    names = {p.name for p in written}
    assert "siblings_tree.png" in names and "siblings_chain.png" not in names  # a chain has no sibling to plot


def test_records_without_the_field_report_as_before() -> None:
    text = Report(summarize([record("ar", 1, [0] * 4, 1.0, baseline=True), record("m", 1, [2, 1], 0.5)])).markdown()
    assert "Continuation after a sibling" not in text
