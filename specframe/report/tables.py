"""The report's tables, as header + rows of strings (Markdown) and as long-format rows (CSV).

* main — the papers' layout: rows = methods, columns = datasets + average, cells = ``speedup× / τ``, marked
  with :data:`CONTENDED_MARK` where a record behind the cell was measured under contention;
* reference — the same layout with speedups over transformers' ``generate()`` (``hf_generate``), the baseline's
  row included (the plain loop against ``generate()``);
* paired — per method and dataset: aggregate and geometric-mean speedups with bootstrap CIs, TPOT speedup,
  and (at temperature 0) how many outputs equal the baseline's token for token; with reference records, the
  aggregate speedup over ``generate()`` [CI] and how many outputs equal its tokens;
* depth — unconditional u_d and conditional c_d per depth, all datasets pooled;
* stages — mean milliseconds per round for each stage, T_round, nodes per round, and τ·T_ar/T_round next to
  the measured speedup (why τ can rise while speedup falls).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from specframe.metrics.records import STAGES
from specframe.metrics.speedup import expected_speedup
from specframe.report.summary import ALL, CellStats, Summary, Versus

SpeedupKind = Literal["aggregate", "geomean", "tpot"]
TauKind = Literal["per_response", "pooled"]
Table = tuple[list[str], list[list[str]]]

#: Marks a cell with at least one record measured while other processes loaded the machine.
CONTENDED_MARK = "†"


def _num(value: float, digits: int = 2, suffix: str = "") -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}{suffix}"


def speedup_of(cell: CellStats, kind: SpeedupKind) -> float:
    """The cell's speedup over the baseline, as :func:`versus_of` reads a speedup over any reference."""
    return versus_of(Versus(cell.speedup_aggregate, cell.speedup_geomean, cell.speedup_tpot), kind)


def versus_of(versus: Versus, kind: SpeedupKind) -> float:
    if kind == "aggregate":
        return versus.aggregate.value
    if kind == "geomean":
        return versus.geomean.value
    return versus.tpot


def tau_of(cell: CellStats, kind: TauKind) -> float:
    return cell.tau_per_response if kind == "per_response" else cell.tau_pooled


def _mean(values: Sequence[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def main_table(summary: Summary, speedup: SpeedupKind = "aggregate", tau: TauKind = "per_response") -> Table:
    header = ["method", *summary.datasets, "average"]
    rows = []
    for m in summary.methods:
        row, speeds, taus, marked = [m.name], [], [], False
        for ds in summary.datasets:
            cell = summary.cell(m.name, ds)
            if cell is None:
                row.append("")
                continue
            s, t = speedup_of(cell, speedup), tau_of(cell, tau)
            speeds.append(s)
            taus.append(t)
            mark = CONTENDED_MARK if cell.contended else ""
            marked = marked or bool(mark)
            row.append(f"{_num(s, suffix='×')} / {_num(t)}{mark}")
        row.append(f"{_num(_mean(speeds), suffix='×')} / {_num(_mean(taus))}{CONTENDED_MARK if marked else ''}")
        rows.append(row)
    return header, rows


def reference_table(summary: Summary, speedup: SpeedupKind = "aggregate") -> Table:
    """Speedups over transformers' ``generate()`` per method and dataset (every method but the reference)."""
    header = ["method", *summary.datasets, "average"]
    rows = []
    for m in summary.methods:
        if m.name in summary.reference_names:
            continue
        row, speeds, marked = [m.name], [], False
        for ds in summary.datasets:
            cell = summary.cell(m.name, ds)
            if cell is None:
                row.append("")
                continue
            s = versus_of(cell.versus_reference, speedup)
            speeds.append(s)
            mark = CONTENDED_MARK if cell.contended or cell.versus_reference.contended else ""
            marked = marked or bool(mark)
            row.append(f"{_num(s, suffix='×')}{mark}")
        row.append(f"{_num(_mean(speeds), suffix='×')}{CONTENDED_MARK if marked else ''}")
        rows.append(row)
    return header, rows


def _same(identical: tuple[int, int] | None) -> str:
    return f"{identical[0]}/{identical[1]}" if identical else "—"


def paired_table(summary: Summary) -> Table:
    header = ["method", "dataset", "pairs", "aggregate [CI]", "geo-mean of ratios [CI]", "TPOT", "identical"]
    with_reference = bool(summary.reference_names)
    if with_reference:
        header += ["vs generate() [CI]", "= generate()"]
    rows = []
    for m in summary.methods:
        if m.name in summary.baseline_names:
            continue
        for ds in [*summary.datasets, ALL]:
            cell = summary.cell(m.name, ds)
            if cell is None:
                continue
            row = [m.name, ds, str(cell.speedup_aggregate.n), cell.speedup_aggregate.format(),
                   cell.speedup_geomean.format(), _num(cell.speedup_tpot, suffix="×"), _same(cell.identical)]
            if with_reference:
                row += [cell.versus_reference.aggregate.format(), _same(cell.versus_reference.identical)]
            rows.append(row)
    return header, rows


def depth_table(summary: Summary, conditional: bool, max_depth: int = 16) -> Table:
    deepest = max((len(c.depth.unconditional) for (_, ds), c in summary.cells.items() if ds == ALL), default=0)
    depths = list(range(1, min(deepest, max_depth) + 1))
    header = ["method", *[f"d{d}" for d in depths]]
    rows = []
    for m in summary.methods:
        cell = summary.cell(m.name, ALL)
        if cell is None or m.name in summary.baseline_names or m.name in summary.reference_names:
            continue
        rates = cell.depth.conditional if conditional else cell.depth.unconditional
        rows.append([m.name, *[_num(rates[d - 1]) if d <= len(rates) else "" for d in depths]])
    return header, rows


def ar_step_seconds(summary: Summary) -> float:
    """Mean AR round time (one token per round) of the first baseline, all datasets pooled."""
    for name in summary.baseline_names:
        cell = summary.cell(name, ALL)
        if cell is not None:
            return cell.round_seconds
    return math.nan


def stage_table(summary: Summary, speedup: SpeedupKind = "aggregate") -> Table:
    stages = [s for s in STAGES if any(s in c.stage_ns for c in summary.cells.values())]
    header = ["method", *[f"{s} ms" for s in stages], "round ms", "nodes/round", "τ pooled", "τ·T_ar/T_round",
              "measured"]
    t_ar = ar_step_seconds(summary)
    rows = []
    for m in summary.methods:
        cell = summary.cell(m.name, ALL)
        if cell is None:
            continue
        per_round = [cell.stage_ns.get(s, 0) / 1e6 / cell.rounds if cell.rounds else math.nan for s in stages]
        expected = expected_speedup(cell.tau_pooled, t_ar, cell.round_seconds)
        rows.append([m.name, *[_num(v, 3) for v in per_round], _num(cell.round_seconds * 1e3, 3),
                     _num(cell.nodes_per_round, 1), _num(cell.tau_pooled), _num(expected, suffix="×"),
                     _num(speedup_of(cell, speedup), suffix="×")])
    return header, rows


def plain_reason_table(summary: Summary) -> Table:
    """Per method, its rounds without a verified draft node counted by why (`specframe.cost.reasons`); methods
    whose records hold no reason (older files, or none plain) are left out."""
    reasons = sorted({k for c in summary.cells.values() for k in c.plain_reasons})
    rows = []
    for m in summary.methods:
        cell = summary.cell(m.name, ALL)
        if cell is None or not cell.plain_reasons:
            continue
        rows.append([m.name, str(cell.rounds), *[str(cell.plain_reasons.get(k, 0)) for k in reasons]])
    return ["method", "rounds", *reasons], rows


def markdown(table: Table) -> str:
    header, rows = table
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_rows(summary: Summary) -> list[dict[str, Any]]:
    """Long-format rows (one per method and dataset, ``all`` included) for ``summary.csv``."""
    rows = []
    for (method, ds), c in summary.cells.items():
        rows.append({
            "method": method, "dataset": ds, "responses": c.responses, "rounds": c.rounds,
            "new_tokens": c.new_tokens, "seconds": round(c.seconds, 6), "tokens_per_s": c.tokens_per_s,
            "tau_per_response": c.tau_per_response, "tau_pooled": c.tau_pooled,
            "nodes_per_round": c.nodes_per_round, "round_ms": c.round_seconds * 1e3,
            "speedup_aggregate": c.speedup_aggregate.value, "speedup_aggregate_low": c.speedup_aggregate.low,
            "speedup_aggregate_high": c.speedup_aggregate.high, "speedup_geomean": c.speedup_geomean.value,
            "speedup_geomean_low": c.speedup_geomean.low, "speedup_geomean_high": c.speedup_geomean.high,
            "speedup_tpot": c.speedup_tpot, "pairs": c.speedup_aggregate.n,
            "identical": c.identical[0] if c.identical else "", "identical_of": c.identical[1] if c.identical else "",
            "contended": c.contended,
            **_versus_row("generate", c.versus_reference),
        })
    return rows


def _versus_row(name: str, v: Versus) -> dict[str, Any]:
    """``speedup_vs_<name>`` columns (NaN / empty without reference records)."""
    return {f"speedup_vs_{name}": v.aggregate.value, f"speedup_vs_{name}_low": v.aggregate.low,
            f"speedup_vs_{name}_high": v.aggregate.high, f"speedup_vs_{name}_geomean": v.geomean.value,
            f"speedup_vs_{name}_tpot": v.tpot, f"pairs_vs_{name}": v.aggregate.n,
            f"identical_{name}": v.identical[0] if v.identical else "",
            f"identical_{name}_of": v.identical[1] if v.identical else ""}


def depth_rows(summary: Summary) -> list[dict[str, Any]]:
    """Long-format per-depth rates for ``depth.csv``."""
    rows = []
    for (method, ds), c in summary.cells.items():
        for d, (u, cond, reached) in enumerate(zip(c.depth.unconditional, c.depth.conditional, c.depth.reached,
                                                   strict=True), start=1):
            rows.append({"method": method, "dataset": ds, "depth": d, "reached": reached, "rounds": c.depth.rounds,
                         "unconditional": u, "conditional": cond})
    return rows


def stage_rows(summary: Summary) -> list[dict[str, Any]]:
    """Long-format per-stage nanoseconds for ``stages.csv``."""
    return [{"method": method, "dataset": ds, "stage": stage, "total_ns": ns, "rounds": c.rounds,
             "ms_per_round": ns / 1e6 / c.rounds if c.rounds else math.nan}
            for (method, ds), c in summary.cells.items() for stage, ns in c.stage_ns.items()]
