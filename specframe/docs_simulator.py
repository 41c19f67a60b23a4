"""The tables of `specframe simulate`: its validation on this machine (docs/benchmarks.md) and a model of the Qwen3-4B
example pipelines on an H100 (docs/concepts/budget-auto.md).

Block ``simulator-validation`` (``python -m specframe.docs_gen``; ``--check`` fails when the page no longer says
what :data:`VALIDATION_JSON` says), written by ``benchmarks/simulator_validation.py``: per pipeline and batch size,
the measured tokens per second (new tokens over the wall time of the batched run), the simulator's prediction from
the cost model and round overheads measured separately on the same machine, and predicted / measured. While the
file is absent (its run not made yet) the block says so.

Example row: ``| DFlash chain | 4 | 61.2 | 58.9 | 0.96 | yes | 1.89 | 7.0 | yes |``: the prediction is 4 % below the
measurement, inside the 10 % the table aims for.

Block ``h100-qwen3-4b`` is a model, computed here, not measured: the Qwen3-4B example pipelines
(``examples/qwen3/4b``) priced on the H100 roofline (:func:`specframe.bench.simulate.roofline_profile` for the
target, :func:`~specframe.bench.simulate.roofline_draft_ms` for the drafter, priced as DFlash-b16's) at the mean
acceptance lengths the papers report (:data:`REPORTED_QWEN3_4B`, through
:func:`~specframe.bench.simulate.mean_tau_records`): no Qwen3-4B trace of ours exists (its checkpoints are not on
this machine and no GPU was lent), so the acceptance is the papers', not a replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specframe.bench.published import status_line
from specframe.bench.simulate import mean_tau_records, roofline_draft_ms, roofline_profile, simulate
from specframe.docs_claims import ROOT, link, load, machine_text

VALIDATION_JSON = "docs/benchmarks/simulator/validation.json"

#: Qwen3-4B in bf16 (parameters).
QWEN3_4B_PARAMS = 4.0e9
#: Weights one DFlash-b16 draft forward reads for Qwen3-4B: 5 layers of 100.9 M (attention 26.2 M with 32 query and
#: 8 KV heads of 128 over hidden 2560, MLP 74.7 M at 9728), the 5 x 2560 -> 2560 tap projection (32.8 M) and the
#: target's tied LM head (151,936 x 2560 = 389.0 M): 0.93 G (from `z-lab/Qwen3-4B-DFlash-b16`'s config.json).
DFLASH_4B_DRAFT_PARAMS = 0.926e9
DFLASH_BLOCK = 16
#: (pipeline, example file, draft nodes a round, reported mean τ, reported speedup over autoregressive decoding):
#: DARTree's Table 1, Qwen3-4B, T = 0, 7-benchmark average, RTX 6000 Ada (from a secondary summary; DFlash's 5.97
#: equals DDTree's per-benchmark DFlash figures averaged).
REPORTED_QWEN3_4B: tuple[tuple[str, str, int, float, float], ...] = (
    ("DFlash chain", "dflash-chain.yaml", 15, 5.97, 4.58),
    ("Domino chain", "domino-chain.yaml", 16, 7.11, 5.17),
    ("DDTree", "ddtree.yaml", 64, 7.78, 5.79),
    ("DARTree, fixed", "dartree-fixed.yaml", 64, 9.36, 6.55),
    ("DARTree, pruned", "dartree-pruned.yaml", 64, 9.81, 6.99),
)
MODEL_BATCHES = (1, 8, 32)


def rows(report: Mapping[str, Any]) -> list[str]:
    lines = ["| pipeline | batch | measured tok/s | predicted tok/s | predicted / measured | within "
             f"{100 * report['tolerance']:.0f} % | τ | nodes per round | output exact |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        inside, exact = "yes" if r["within_tolerance"] else "no", "yes" if r["exact"] else "NO"
        lines.append(f"| {r['pipeline']} | {r['batch_size']} | {r['tokens_per_s']:.1f} | "
                     f"{r['predicted_tokens_per_s']:.1f} | {r['ratio']:.2f} | {inside} | {r['tau']:.2f} | "
                     f"{r['nodes_per_round']:.1f} | {exact} |")
    return lines


def validation_table(page: str) -> str:
    """The table and its provenance line, or the line saying the run is still to be made."""
    if not (ROOT / VALIDATION_JSON).exists():
        return ("Not measured yet: `benchmarks/simulator_validation.py --n 60 --split report --max-new-tokens 64 "
                f"--out {VALIDATION_JSON}` on a quiet machine writes the table.")
    report = load(VALIDATION_JSON)
    inside = sum(r["within_tolerance"] for r in report["rows"])
    out = [f"`benchmarks/simulator_validation.py` ([JSON]({link(page, VALIDATION_JSON)})), {machine_text(report)}, "
           f"{report['n']} {report['split']}-split prompts (GSM8K, HumanEval and Spec-Bench translation in turn), "
           f"{report['max_new_tokens']} new tokens, greedy, continuous batching; the cost model and each pipeline's "
           "round overheads measured apart from the timed runs; the records' own draft time. "
           f"{inside} of {len(report['rows'])} predictions within {100 * report['tolerance']:.0f} % of the "
           "measurement:", "", *rows(report), "", status_line(report, per_set=True)]
    return "\n".join(out)


def h100_model_table(page: str) -> str:
    """Predicted tokens per second (all rows) and speedup over plain decoding at the same batch size, per pipeline
    and batch size of :data:`MODEL_BATCHES`, next to the paper's speedup; see the module docstring."""
    target = roofline_profile("h100-sxm", QWEN3_4B_PARAMS)
    draft = roofline_draft_ms("h100-sxm", DFLASH_4B_DRAFT_PARAMS, DFLASH_BLOCK)

    def predicted(method: str, tau: float, nodes: int, batch: int) -> float:
        records = mean_tau_records(method, tau, nodes, batch)
        (p,) = simulate(records, target, draft_ms=draft if nodes else (0.0, 0.0))
        return p.predicted_tokens_per_s

    plain = {b: predicted("plain", 1.0, 0, b) for b in MODEL_BATCHES}
    head = " | ".join(f"B = {b}" for b in MODEL_BATCHES)
    lines = [f"| pipeline (`examples/qwen3/4b/`) | draft nodes | reported τ | {head} | paper's speedup, B = 1 (RTX "
             "6000 Ada) |", "|---|---|---|" + "---|" * len(MODEL_BATCHES) + "---|",
             "| plain decoding | 0 | 1.00 | " + " | ".join(f"{plain[b]:,.0f} tok/s" for b in MODEL_BATCHES) + " | — |"]
    for label, file, nodes, tau, paper in REPORTED_QWEN3_4B:
        cells = []
        for b in MODEL_BATCHES:
            tps = predicted(label, tau, nodes, b)
            cells.append(f"{tps:,.0f} tok/s ({tps / plain[b]:.2f}x)")
        lines.append(f"| {label} (`{file}`) | {nodes} | {tau:.2f} | " + " | ".join(cells) + f" | {paper:.2f}x |")
    return "\n".join([
        "**A model, not a measurement**: Qwen3-4B (4.0 B parameters, bf16) on the H100 SXM roofline (989 TFLOP/s dense "
        "bf16, 3.35 TB/s): a forward over `n` tokens costs `max(2 P n / FLOPs, 2 P / bandwidth)`; every pipeline's "
        f"draft is priced as the DFlash-b16 drafter's (reading its {DFLASH_4B_DRAFT_PARAMS / 1e9:.2f} G weights once "
        f"per forward, computing its {DFLASH_BLOCK}-token block per row); acceptance is the papers' mean τ "
        "(DARTree's Table 1, as a secondary summary gives it), not a trace of ours; the correction heads' calls "
        "(Domino's, and DARTree's one per depth), the KV cache and kernel launches are not priced (leaving out the "
        "heads favours Domino and DARTree). "
        "Prompts of 128 tokens, 100 rounds per request (`specframe.docs_simulator`):", "", *lines, "",
        "The memory-bound forward makes the trees' extra nodes almost free at batch 1 (the model's speedups run "
        "above the paper's measured ones, which pay the launches and heads); at batch 32 the verify forward is "
        "compute-bound and the 64-node trees fall below the chains, the regime in which `budget: auto` verifies "
        "fewer nodes or decodes plainly."])
