"""The report's memory table: what each pipeline holds, next to its τ and speed (all datasets pooled).

Columns: τ (per response) and tokens/s; the drafter's parameter bytes and the heads' (every other stage with
weights, e.g. a correction head); the speculation's share of the target's parameters; the target's KV cache and
the drafter's own context cache per request at the records' mean context length (prompt + generated tokens).
Definitions in :mod:`specframe.metrics.memory`; records written before the field existed leave the table out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from specframe.metrics.memory import format_bytes
from specframe.report.summary import ALL, Summary

Table = tuple[list[str], list[list[str]]]


def _num(value: float, digits: int = 2) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _with_memory(summary: Summary) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """Each method whose pooled cell carries memory figures, with that cell and its figures."""
    for m in summary.methods:
        cell = summary.cell(m.name, ALL)
        if cell is not None and cell.memory is not None:
            yield m, cell, cell.memory


def memory_table(summary: Summary) -> Table:
    header = ["method", "τ", "tokens/s", "drafter params", "heads params", "vs target", "KV cache / request",
              "drafter cache / request", "context tokens"]
    rows = []
    for m, cell, mem in _with_memory(summary):
        heads = mem["heads"]
        extra = (mem["drafter_bytes"] or 0) + sum(heads.values())
        share = f"{extra / mem['target_bytes']:.1%}" if mem.get("target_bytes") else "—"
        head_text = ", ".join(f"{name} {format_bytes(b)}" for name, b in heads.items()) or "—"
        context = mem.get("context_tokens")
        rows.append([m.name, _num(cell.tau_per_response), _num(cell.tokens_per_s, 1),
                     format_bytes(mem["drafter_bytes"]) if mem["drafter_bytes"] else "—", head_text, share,
                     format_bytes(mem.get("kv_bytes")), format_bytes(mem.get("drafter_state_bytes")),
                     "—" if context is None else f"{context:.0f}"])
    return header, rows


def memory_rows(summary: Summary) -> list[dict[str, Any]]:
    """Long-format rows for ``memory.csv`` (one per method, all datasets pooled)."""
    rows = []
    for m, cell, mem in _with_memory(summary):
        rows.append({"method": m.name, "tau_per_response": cell.tau_per_response, "tokens_per_s": cell.tokens_per_s,
                     "target_bytes": mem.get("target_bytes"), "drafter_bytes": mem["drafter_bytes"],
                     "heads_bytes": sum(mem["heads"].values()),
                     "heads": ";".join(f"{k}={v}" for k, v in mem["heads"].items()),
                     "kv_bytes_per_token": mem.get("kv_bytes_per_token"),
                     "drafter_state_bytes_per_token": mem.get("drafter_state_bytes_per_token"),
                     "context_tokens": mem.get("context_tokens"), "kv_bytes": mem.get("kv_bytes"),
                     "drafter_state_bytes": mem.get("drafter_state_bytes")})
    return rows
