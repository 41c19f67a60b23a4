"""Sweep plots: τ and speedup against a swept key (budget, width, β, candidates), as PNG and SVG.

For every base method whose records carry a ``sweep`` and every swept key with two or more values, one figure
with two panels (τ above, speedup below): with a single swept key there is one line per dataset plus the
dataset average in bold; with several keys, one line per combination of the other keys (dataset average).
Needs matplotlib (the ``bench`` / ``test`` extras); figures are built with the object API (no pyplot state),
and SVGs carry no date so re-rendering the same results gives the same file.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specframe.errors import SpecframeError
from specframe.files import ensure_dir, write_bytes
from specframe.report.summary import MethodInfo, Summary
from specframe.report.tables import SpeedupKind, TauKind, speedup_of, tau_of

Line = tuple[str, list[tuple[Any, float, float]]]  # label, [(x, tau, speedup)]


def import_matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise SpecframeError("plots need matplotlib, which is not installed",
                             hint="pip install 'specframe[bench]' (or pass --no-plots)") from None
    return matplotlib, Figure


def _mean(values: Sequence[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def _lines(summary: Summary, group: list[MethodInfo], key: str, speedup: SpeedupKind, tau: TauKind) -> list[Line]:
    others = sorted({k for m in group for k in m.sweep if k != key})
    by_other: dict[str, list[MethodInfo]] = {}
    for m in group:
        label = ", ".join(f"{k}={json.dumps(m.sweep.get(k))}" for k in others) or "average"
        by_other.setdefault(label, []).append(m)
    lines: list[Line] = []
    datasets = summary.datasets if len(by_other) == 1 else []
    for ds in datasets:
        points = []
        for m in group:
            cell = summary.cell(m.name, ds)
            if cell is not None:
                points.append((m.sweep[key], tau_of(cell, tau), speedup_of(cell, speedup)))
        lines.append((ds, points))
    for label, members in by_other.items():
        points = []
        for m in members:
            cells = [c for ds in summary.datasets if (c := summary.cell(m.name, ds)) is not None]
            points.append((m.sweep[key], _mean([tau_of(c, tau) for c in cells]),
                           _mean([speedup_of(c, speedup) for c in cells])))
        lines.append((label, points))
    return lines


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sweep_plots(summary: Summary, out_dir: Path, *, speedup: SpeedupKind = "aggregate",
                tau: TauKind = "per_response") -> list[Path]:
    """Write ``<base>_<key>.png`` and ``.svg`` for each swept key; return the paths written."""
    groups: dict[str, list[MethodInfo]] = {}
    for m in summary.methods:
        if m.sweep:
            groups.setdefault(m.base_method, []).append(m)
    todo = [(base, key, members) for base, members in groups.items()
            for key in dict.fromkeys(k for m in members for k in m.sweep)
            if len({json.dumps(m.sweep.get(key)) for m in members if key in m.sweep}) > 1]
    if not todo:
        return []
    matplotlib, figure_class = import_matplotlib()
    ensure_dir(out_dir, what="report directory")
    written = []
    for base, key, members in todo:
        members = [m for m in members if key in m.sweep]
        lines = _lines(summary, members, key, speedup, tau)
        fig = figure_class(figsize=(6.4, 6.0), layout="constrained")
        ax_tau, ax_speed = fig.subplots(2, 1, sharex=True)
        numeric = all(_is_number(x) for _, pts in lines for x, _, _ in pts)
        categories = list(dict.fromkeys(json.dumps(x) for _, pts in lines for x, _, _ in pts))
        for label, points in lines:
            points = sorted(points, key=lambda p: p[0]) if numeric else points
            xs = [p[0] if numeric else categories.index(json.dumps(p[0])) for p in points]
            style = {"linewidth": 2.5, "color": "black"} if label == "average" else {"linewidth": 1.2}
            ax_tau.plot(xs, [p[1] for p in points], marker="o", label=label, **style)
            if any(not math.isnan(p[2]) for p in points):
                ax_speed.plot(xs, [p[2] for p in points], marker="o", label=label, **style)
        if numeric:
            ax_speed.set_xticks(sorted({x for _, pts in lines for x, _, _ in pts}))
        else:
            ax_speed.set_xticks(range(len(categories)), categories)
        ax_tau.set_ylabel(f"τ ({tau.replace('_', ' ')})")
        ax_speed.set_ylabel(f"speedup ({speedup})")
        ax_speed.set_xlabel(key)
        ax_tau.set_title(f"{base}\nτ and speedup vs {key}", fontsize="medium")
        for ax in (ax_tau, ax_speed):
            ax.grid(True, alpha=0.3)
        ax_tau.legend(fontsize="small")
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{base}_{key}")
        with matplotlib.rc_context({"svg.hashsalt": "specframe"}):
            for suffix, metadata in ((".png", {"Software": None}), (".svg", {"Date": None})):
                buffer = io.BytesIO()
                fig.savefig(buffer, format=suffix[1:], metadata=metadata, dpi=120)
                written.append(write_bytes(out_dir / f"{stem}{suffix}", buffer.getvalue(), what="plot"))
    return written
