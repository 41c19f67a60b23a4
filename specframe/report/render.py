"""Assemble a report: Markdown document, CSV files and sweep plots from result records.

Example::

    records, _ = load_result_files(["results.jsonl"])
    report = Report(summarize(records))
    print(report.markdown())
    report.write(Path("report/"))  # report.md, summary/depth/stages/siblings.csv, <base>_<key>.png, siblings_<m>.png
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specframe.cost.reasons import PLAIN_REASONS
from specframe.files import ensure_dir, write_text
from specframe.metrics.machine_load import CONTENDED_OTHER_CPUS
from specframe.report.memory import memory_rows, memory_table
from specframe.report.plots import sweep_plots
from specframe.report.siblings import overview_table, per_pipeline_tables, sibling_plots, sibling_rows
from specframe.report.summary import ALL, Summary
from specframe.report.tables import (
    CONTENDED_MARK,
    SpeedupKind,
    TauKind,
    depth_rows,
    depth_table,
    main_table,
    markdown,
    paired_table,
    plain_reason_table,
    reference_table,
    stage_rows,
    stage_table,
    summary_rows,
)

SPEEDUP_TEXT = {
    "aggregate": "aggregate speedup Σtokens/Σtime (method) ÷ Σtokens/Σtime (AR baseline)",
    "geomean": "geometric mean of per-prompt throughput ratios against the AR baseline",
    "tpot": "mean TPOT of the AR baseline ÷ mean TPOT of the method (decode time per decoded token)",
}
TAU_TEXT = {
    "per_response": "τ = mean over responses of tokens committed per round (bonus included)",
    "pooled": "τ = all tokens committed ÷ all rounds (bonus included)",
}


@dataclass
class Report:
    summary: Summary
    speedup: SpeedupKind = "aggregate"
    tau: TauKind = "per_response"
    confidence: float = 0.95
    max_depth: int = 16

    def markdown(self) -> str:
        s = self.summary
        base = ", ".join(s.baseline_names) or "none (no speedups)"
        parts = [
            "# Benchmark report", "",
            f"Cells: speedup× / τ. Speedup: {SPEEDUP_TEXT[self.speedup]}; {TAU_TEXT[self.tau]}. "
            f"Baseline: {base}. Average = mean of the dataset cells.", "",
            markdown(main_table(s, self.speedup, self.tau)), "",
            *self._reference_section(),
            *self._contention_note(),
            *self._set_aside_section(),
            f"## Paired speedup ({self.confidence:.0%} bootstrap CI over prompts)", "",
            markdown(paired_table(s)), "",
            "## Acceptance per depth (all datasets pooled)", "",
            "Unconditional u_d = rounds accepting ≥ d draft tokens ÷ rounds:", "",
            markdown(depth_table(s, conditional=False, max_depth=self.max_depth)), "",
            "Conditional c_d = rounds accepting ≥ d ÷ rounds accepting ≥ d − 1:", "",
            markdown(depth_table(s, conditional=True, max_depth=self.max_depth)), "",
            *self._sibling_section(),
            *self._memory_section(),
            "## Latency per round and stage (all datasets pooled)", "",
            markdown(stage_table(s, self.speedup)), "",
            *self._plain_section(),
        ]
        return "\n".join(parts)

    def _sibling_section(self) -> list[str]:
        """Continuation after an accepted node by its sibling rank, when the records carry the counts."""
        overview = overview_table(self.summary)
        if not overview[1]:
            return []
        parts = ["## Continuation after a sibling (all datasets pooled)", "",
                 "Rate at which depth d + 1 was accepted after an accepted depth-d node that had children, by the "
                 "node's rank among its siblings (rank 0 = the drafter's top choice; docs/metrics.md); cells: rate "
                 "(accepted nodes counted).", "", markdown(overview), ""]
        for name, table in per_pipeline_tables(self.summary, self.max_depth):
            parts += [f"### {name}", "", markdown(table), ""]
        return parts

    def _memory_section(self) -> list[str]:
        """Parameters and per-request state next to τ and speed, when the records carry them."""
        table = memory_table(self.summary)
        if not table[1]:
            return []
        return ["## Memory (all datasets pooled)", "",
                "Parameter bytes of the drafter and of each head (stages other than the drafter that hold weights; "
                "tensors shared with the target are the target's), their share of the target's, and the per-request "
                "KV cache of the target and the drafter's own context cache at the records' mean context length "
                "(prompt + generated tokens; docs/metrics.md).", "", markdown(table), ""]

    def _plain_section(self) -> list[str]:
        """Rounds without a verified draft node per method and reason, when the records say why."""
        table = plain_reason_table(self.summary)
        if not table[1]:
            return []
        meaning = "; ".join(f"`{k}`: {PLAIN_REASONS[k]}" for k in table[0][2:] if k in PLAIN_REASONS)
        return ["## Plain rounds and why (all datasets pooled)", "", f"Rounds in which a row verified no draft "
                f"node, by reason ({meaning}).", "", markdown(table), ""]

    def _reference_section(self) -> list[str]:
        """Speedups over transformers' ``generate()``, when the files hold its records."""
        s = self.summary
        if not s.reference_names:
            return []
        kernels = sorted({k for k in s.reference_kernels if k})
        how = f" It ran with {'; '.join(kernels)}." if kernels else ""
        return [f"## Speedup against transformers' generate() ({', '.join(s.reference_names)})", "",
                f"Cells: {SPEEDUP_TEXT[self.speedup].replace('AR baseline', 'generate()')}, on the same target "
                "object, prompts and number of new tokens; the baseline's row is the plain loop against "
                f"generate().{how}", "",
                markdown(reference_table(s, self.speedup)), ""]

    def _contention_note(self) -> list[str]:
        """The footnote of the contention mark, when any cell carries it."""
        counts = {m: c.contended for (m, ds), c in self.summary.cells.items() if ds == ALL and c.contended}
        if not counts:
            return []
        listed = ", ".join(f"{m} ({n})" for m, n in counts.items())
        return [f"{CONTENDED_MARK} measured under contention: other processes kept more than "
                f"{CONTENDED_OTHER_CPUS:g} of a core busy while some of the records behind the cell ran "
                f"(records per method, baseline partners included: {listed}; `machine_load` in the result "
                "file). Treat these speeds as lower bounds and rerun on a quiet machine.", ""]

    def _set_aside_section(self) -> list[str]:
        """Records left out of the speedups because their partners ran under other conditions; and records whose
        times are implausible (kept, flagged)."""
        flagged = [f"- warning: {line}" for line in self.summary.implausible]
        lines = set_aside_lines(self.summary)
        if not lines:
            return ["## Implausible records", "", *flagged, ""] if flagged else []
        return ["## Set aside", "", "Records left out of speedups: their prompt's partner ran under other sampling "
                "settings or on another machine, so the times do not compare.", "",
                *[f"- {line}" for line in lines], "", *flagged, *([""] if flagged else [])]

    def write(self, out_dir: Path, *, formats: tuple[str, ...] = ("md", "csv"), plots: bool = True) -> list[Path]:
        """Write the chosen formats (and sweep plots) into ``out_dir``; return the paths written."""
        ensure_dir(out_dir, what="report directory")
        written = []
        if "md" in formats:
            written.append(write_text(out_dir / "report.md", self.markdown(), what="report"))
        if "csv" in formats:
            for name, rows in (("summary", summary_rows(self.summary)), ("depth", depth_rows(self.summary)),
                               ("stages", stage_rows(self.summary)), ("siblings", sibling_rows(self.summary)),
                               ("memory", memory_rows(self.summary))):
                written.append(_write_csv(out_dir / f"{name}.csv", rows))
        if plots:
            written += sweep_plots(self.summary, out_dir, speedup=self.speedup, tau=self.tau)
            written += sibling_plots(self.summary, out_dir)
        return written


def set_aside_lines(summary: Summary) -> list[str]:
    """One line per (method, partner, reason) of records left out of the speedups."""
    return [f"{entry.method}: {entry.records} record(s) not paired with {entry.against}: {entry.reason}"
            for entry in summary.set_aside]


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    buffer = io.StringIO(newline="")
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()})
    return write_text(path, buffer.getvalue(), what="CSV table")
