"""docs/benchmarks.md's sibling-conditional acceptance table, rendered from its committed result file.

Block ``sibling-acceptance`` (``python -m specframe.docs_gen``; ``--check`` fails when the page no longer says what
:data:`SIBLINGS_JSON` says), written by ``benchmarks/sibling_acceptance.py``. It quotes counts, never times: τ,
the rate at which depth ``d + 1`` was accepted after an accepted depth-``d`` node of sibling rank ``r``
(:mod:`specframe.metrics.siblings`; rank 0 = the drafter's top choice, ranks 2 and above pooled as "2+"), and the
pipelines' memory (:mod:`specframe.metrics.memory`).

* the overview, one row per pipeline: τ per set; the continuation rate after a rank-0 node and after a sibling
  (rank ≥ 1), every depth and set pooled; the **depth-matched gap** — per depth, the rank-0 rate minus the sibling
  rate, averaged with the sibling counts as weights, so a pipeline whose siblings sit at deep depths (where every
  rate is lower) is not charged for the depth; then the drafter's and the heads' parameter bytes and the
  per-request KV state at the mean context length;
* one table per pipeline: rows = depth, columns = rank 0, 1, 2+; cells ``rate (count)``.

Worked example of the gap: depth 1 has rank 0 at 0.80 and siblings at 0.40 (10 siblings), depth 2 rank 0 at 0.60
and siblings at 0.50 (30 siblings): gap = (10 × 0.40 + 30 × 0.10) / 40 = +0.175.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from specframe.bench.published import status_line
from specframe.docs_claims import link, load, machine_text
from specframe.metrics.memory import format_bytes, pooled_memory
from specframe.metrics.siblings import SiblingTable

SIBLINGS_JSON = "docs/benchmarks/siblings/smollm2.json"
#: Ranks at or above this are pooled ("2+") in the docs' table.
DOCS_RANK_CAP = 2
KIND_NAMES = {"math": "GSM8K", "code": "HumanEval", "translation": "Spec-Bench translation (out of distribution)"}


def pooled_table(pipe: Mapping[str, Any]) -> SiblingTable:
    """The pipeline's counts over every set, ranks ``>= DOCS_RANK_CAP`` pooled."""
    return SiblingTable.from_rows((cell["sibling_continuation"] for cell in pipe["sets"].values()), DOCS_RANK_CAP)


def depth_matched_gap(table: SiblingTable) -> tuple[float, int]:
    """Σ_d n_sib(d) · (rate_0(d) − rate_sib(d)) / Σ_d n_sib(d) over depths with both counts, and Σ_d n_sib(d)."""
    weighted, weight = 0.0, 0
    for d in table.depths:
        top_total = table.total(d, 0)
        sib = [table.counts[d, r] for r in table.ranks if r >= 1 and (d, r) in table.counts]
        sib_continued, sib_total = sum(c for c, _ in sib), sum(n for _, n in sib)
        if top_total and sib_total:
            weighted += sib_total * (table.rate(d, 0) - sib_continued / sib_total)
            weight += sib_total
    return (weighted / weight if weight else math.nan), weight


def _cell(rate: float, total: int) -> str:
    return "—" if not total or math.isnan(rate) else f"{rate:.2f} ({total})"


def _memory(pipe: Mapping[str, Any]) -> dict[str, Any]:
    memory = pooled_memory(cell.get("memory") for cell in pipe["sets"].values())
    if memory is None:
        raise ValueError(f"{SIBLINGS_JSON}: {pipe['label']} has no memory figures")
    return memory


def overview(report: Mapping[str, Any]) -> list[str]:
    kinds = list(report["pipelines"][0]["sets"])
    lines = ["| pipeline | τ " + " / ".join(kinds) + " | next depth after rank 0 | after a sibling (rank ≥ 1) | "
             "gap, depth-matched | drafter params | heads params | target KV / request | drafter cache / request |",
             "|---|---|---|---|---|---|---|---|---|"]
    for pipe in report["pipelines"]:
        table = pooled_table(pipe)
        gap, _ = depth_matched_gap(table)
        mem = _memory(pipe)
        heads = ", ".join(f"`{name}` {format_bytes(b)}" for name, b in mem["heads"].items()) or "—"
        context = f" at {mem['context_tokens']:.0f} tokens" if mem.get("context_tokens") is not None else ""
        lines.append(f"| {pipe['label']} | " + " / ".join(f"{pipe['sets'][k]['tau']:.2f}" for k in kinds) +
                     f" | {_cell(*table.pooled(0))} | {_cell(*table.pooled(1))} | "
                     f"{'—' if math.isnan(gap) else f'{gap:+.2f}'} | {format_bytes(mem['drafter_bytes'])} | {heads} | "
                     f"{format_bytes(mem.get('kv_bytes'))}{context} | {format_bytes(mem.get('drafter_state_bytes'))} |")
    return lines


def per_depth(pipe: Mapping[str, Any]) -> list[str]:
    table = pooled_table(pipe)
    ranks = range(DOCS_RANK_CAP + 1)
    head = [f"rank {r}{'+' if r == DOCS_RANK_CAP else ''}" for r in ranks]
    lines = [f"**{pipe['label']}** (`{pipe['pipeline']}`):", "", "| depth d | " + " | ".join(head) + " |",
             "|---|" + "---|" * len(head)]
    lines += [f"| {d} | " + " | ".join(_cell(table.rate(d, r), table.total(d, r)) for r in ranks) + " |"
              for d in table.depths]
    return lines


def sibling_acceptance_table(page: str) -> str:
    """docs/benchmarks.md: the overview, then each pipeline's depth × rank table, then the provenance line."""
    report = load(SIBLINGS_JSON)
    exact = all(cell["exact"] for pipe in report["pipelines"] for cell in pipe["sets"].values())
    sets = ", ".join(f"{k}: {KIND_NAMES.get(k, k)}" for k in report["pipelines"][0]["sets"])
    out = [f"`benchmarks/sibling_acceptance.py` ([JSON]({link(page, SIBLINGS_JSON)})), {machine_text(report)}, "
           f"{report['n']} {report['split']}-split prompts per set ({sets}), {report['max_new_tokens']} new tokens, "
           "greedy, each pipeline's shipped settings, one shared float32 target; every output equal to the plain "
           f"loop's: {'yes' if exact else 'NO'}. Counts only (τ, acceptance, bytes): no time or speed is quoted. "
           "Sets pooled; a cell reads P(depth d + 1 accepted | accepted depth-d node of that rank) (count); memory "
           "at each pipeline's mean context length (prompt + generated tokens):", "", *overview(report), ""]
    for pipe in report["pipelines"]:
        out += [*per_depth(pipe), ""]
    out.append(status_line(report, per_set=True, timed=False))
    return "\n".join(out)
