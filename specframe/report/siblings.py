"""The report's sibling-conditional acceptance: tables, CSV rows and one plot per pipeline.

Definitions in :mod:`specframe.metrics.siblings`: ``continuation(d, r)`` is the rate at which depth ``d + 1`` was
accepted after an accepted depth-``d`` node of sibling rank ``r`` that had children (rank 0 = the drafter's top
choice; ranks ``>= RANK_CAP`` pooled as "3+"). All datasets are pooled; cells read ``rate (count)``.

* overview — one row per pipeline: the rate after a rank-0 node, after a sibling (rank ≥ 1), and the gap;
* per pipeline — rows = depth, columns = rank;
* ``siblings.csv`` — long format (method, dataset, depth, rank, continued, total, rate);
* ``siblings_<method>.png/.svg`` — rate against depth, one line per rank (pipelines that accepted a sibling).
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

from specframe.files import ensure_dir, write_bytes
from specframe.metrics.siblings import SiblingTable
from specframe.report.plots import import_matplotlib
from specframe.report.summary import ALL, Summary

Table = tuple[list[str], list[list[str]]]


def _rank_label(rank: int, cap: int) -> str:
    return f"{rank}+" if rank >= cap else str(rank)


def _cell(rate: float, total: int) -> str:
    return "—" if not total or math.isnan(rate) else f"{rate:.2f} ({total})"


def _pipelines(summary: Summary) -> list[tuple[str, SiblingTable]]:
    """Drafting pipelines with at least one counted node, all datasets pooled."""
    out = []
    for m in summary.methods:
        cell = summary.cell(m.name, ALL)
        if cell is not None and cell.siblings.counts:
            out.append((m.name, cell.siblings))
    return out


def overview_table(summary: Summary) -> Table:
    """Per pipeline: continuation after a rank-0 node, after a sibling (rank ≥ 1), and their difference."""
    header = ["method", "after rank 0", "after a sibling (rank ≥ 1)", "gap"]
    rows = []
    for name, table in _pipelines(summary):
        top, n_top = table.pooled(0)
        sib, n_sib = table.pooled(1)
        gap = top - sib if n_top and n_sib else math.nan
        rows.append([name, _cell(top, n_top), _cell(sib, n_sib), "—" if math.isnan(gap) else f"{gap:+.2f}"])
    return header, rows


def depth_rank_table(table: SiblingTable, max_depth: int = 16) -> Table:
    """Rows = depth (up to ``max_depth``), columns = sibling rank; cells ``rate (count)``."""
    ranks = table.ranks
    header = ["depth", *[f"rank {_rank_label(r, table.rank_cap)}" for r in ranks]]
    rows = [[str(d), *[_cell(table.rate(d, r), table.total(d, r)) for r in ranks]]
            for d in table.depths if d <= max_depth]
    return header, rows


def per_pipeline_tables(summary: Summary, max_depth: int = 16) -> list[tuple[str, Table]]:
    return [(name, depth_rank_table(table, max_depth)) for name, table in _pipelines(summary)]


def sibling_rows(summary: Summary) -> list[dict[str, Any]]:
    """Long-format rows for ``siblings.csv`` (every method and dataset, ``all`` included)."""
    rows = []
    for (method, ds), c in summary.cells.items():
        for (d, r), (continued, total) in c.siblings.counts.items():
            rows.append({"method": method, "dataset": ds, "depth": d, "rank": _rank_label(r, c.siblings.rank_cap),
                         "continued": continued, "total": total, "rate": continued / total if total else math.nan})
    return rows


def sibling_plots(summary: Summary, out_dir: Path) -> list[Path]:
    """``siblings_<method>.png`` and ``.svg``: continuation rate against depth, one line per rank, for every
    pipeline that accepted at least one sibling (a chain has rank 0 alone: its curve is the depth table's)."""
    todo = [(name, t) for name, t in _pipelines(summary) if any(r > 0 for r in t.ranks)]
    if not todo:
        return []
    matplotlib, figure_class = import_matplotlib()
    ensure_dir(out_dir, what="report directory")
    written = []
    for name, table in todo:
        fig = figure_class(figsize=(6.4, 4.0), layout="constrained")
        ax = fig.subplots()
        for r in table.ranks:
            points = [(d, table.rate(d, r)) for d in table.depths if table.total(d, r)]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    label=f"rank {_rank_label(r, table.rank_cap)}")
        ax.set_xlabel("depth d of the accepted node")
        ax.set_ylabel("P(depth d + 1 accepted)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{name}\ncontinuation after an accepted node, by its sibling rank", fontsize="medium")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        stem = "siblings_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        with matplotlib.rc_context({"svg.hashsalt": "specframe"}):
            for suffix, metadata in ((".png", {"Software": None}), (".svg", {"Date": None})):
                buffer = io.BytesIO()
                fig.savefig(buffer, format=suffix[1:], metadata=metadata, dpi=120)
                written.append(write_bytes(out_dir / f"{stem}{suffix}", buffer.getvalue(), what="plot"))
    return written
