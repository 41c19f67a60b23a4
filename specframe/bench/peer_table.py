"""The two Markdown tables of the vLLM peer comparison, from its result records: written once, printed by
``plugins/specframe-vllm/benchmarks/vllm_peer.py`` after a run and rendered into ``docs/benchmarks.md`` from the
committed ``peer.json`` (:func:`specframe.docs_claims.vllm_peer_table`).

A *cell* is one method at one batch size (``method``, ``batch``, ``median_tok_s``, ``min_tok_s``, ``max_tok_s``,
``tau``, ``cpu_per_s``, ``busy``, ``identical_to_generate``, ``outputs_compared``, ``repeats_agree``); a *ratio row*
is one batch size's specframe / vLLM ratios (``plain``, ``speculative``, ``best``, ``specframe_speculative``,
``identical``, ``compared``) and, at batch 1, specframe's plain loop against transformers' ``generate()``
(``plain_vs_generate``, a line under the table). A ratio that could not be formed (a side missing) is left blank;
a speculative cell with no τ is labelled as having drafted no round (:func:`speculative_label`).

Example::

    peer_tables([{"method": "specframe-plain", "batch": 1, "median_tok_s": 15.5, ...}, ...], [{"batch": 1, ...}])
    # ['| batch | specframe plain | vLLM plain | ratio | ...', '|---|...', '| 1 | 15.5 | 15.2 | 1.02× | ...', ...]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PLAIN, VLLM_PLAIN, VLLM_DRAFTER = "specframe-plain", "vllm-plain", "vllm-dflash"


def rate(cell: Mapping[str, Any] | None) -> str:
    """A cell's median tokens/s, ``*`` when a pass was contended; blank for a missing cell."""
    return "" if cell is None else f"{cell['median_tok_s']:.1f}" + ("*" if cell.get("busy") else "")


def times(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}×"


def speculative_label(cell: Mapping[str, Any]) -> str:
    """The method of the best speculative cell, and "drafted no round" when it has no τ: a controller (``budget:
    auto``) that declined to draft at that batch size decoded plainly, and the cell is its plain decoding."""
    name = str(cell["method"]).removeprefix("specframe-")
    return name if cell.get("tau") is not None else f"{name}, drafted no round"


def peer_tables(cells: Sequence[Mapping[str, Any]], ratios: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ratio table (one row per batch size) and the detail table (one row per cell), as Markdown lines."""
    by = {(c["method"], c["batch"]): c for c in cells}
    lines = ["| batch | specframe plain | vLLM plain | ratio | specframe best speculative | vLLM + drafter | ratio "
             "| best / best | outputs = generate() |", "|---|---|---|---|---|---|---|---|---|"]
    for r in ratios:
        b, spec_name = r["batch"], r.get("specframe_speculative")
        spec = by.get((spec_name, b)) if spec_name else None
        spec_text = f"{rate(spec)} ({speculative_label(spec)})" if spec else ""
        lines.append(f"| {b} | {rate(by.get((PLAIN, b)))} | {rate(by.get((VLLM_PLAIN, b)))} | {times(r['plain'])} | "
                     f"{spec_text} | {rate(by.get((VLLM_DRAFTER, b)))} | {times(r['speculative'])} | "
                     f"{times(r['best'])} | {r['identical']}/{r['compared']} |")
    kernel = [r for r in ratios if r.get("plain_vs_generate") is not None]
    if kernel:
        lines += ["", "specframe's plain loop against transformers' `generate()` (one request at a time, the "
                      "target's own decoding; the kernel gain, quoted apart from the engines' ratios): " +
                  ", ".join(f"{times(r['plain_vs_generate'])} at batch {r['batch']}" for r in kernel) + "."]
    lines += ["", "| method | batch | tokens/s | spread | τ | CPU s/s | outputs = generate() |",
              "|---|---|---|---|---|---|---|"]
    for c in sorted(cells, key=lambda c: (c["batch"], c["method"])):
        tau = "" if c.get("tau") is None else f"{c['tau']:.2f}"
        cpu = "" if c.get("cpu_per_s") is None else f"{c['cpu_per_s']:.2f}"
        same = f"{c['identical_to_generate']}/{c['outputs_compared']}" + (
            "" if c.get("repeats_agree", True) else " (repeats differ)")
        lines.append(f"| {c['method']} | {c['batch']} | {rate(c)} | {c['min_tok_s']:.1f}-{c['max_tok_s']:.1f} | "
                     f"{tau} | {cpu} | {same} |")
    return lines
