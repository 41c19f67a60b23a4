"""The comparer of the cross-check (main environment): reads both sides' JSON, prints the figures, exits 1 on a failure.

Checks, each counted as passed or failed (the last line reads ``vllm-check: N passed, M failed``):

1. per prompt: vLLM's greedy output equals specframe's DFlash chain token for token, and specframe's equals the
   target's plain greedy decoding (losslessness, float32);
2. acceptance: per position ``d``, vLLM's rate ``accepted_per_pos[d] / num_drafts`` within ``--rate-tol``
   (absolute) of specframe's per-depth rate for the same rounds, and the acceptance length
   ``1 + accepted / drafts`` within ``--tau-tol`` (relative) of specframe's;
3. output law at T > 0: vLLM's sampled continuations against the target's exact law (G-test, must not reject at
   ``--alpha``), and the negative control: the same samples against the law at the wrong temperature (must reject).

The end of sequence is a token like any other: both engines emit it as the last output token when they stop on it
(``finish_reason`` ``stop`` / ``stop_reason`` ``eos``), so outputs are compared as they are.

Usage::

    .venv/bin/python -m specframe_vllm.crosscheck.compare runs/vllm-check/specframe.json runs/vllm-check/vllm.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from specframe.testing.stats import g_test


@dataclass
class Verdicts:
    """Named checks and whether each passed."""

    rows: list[tuple[str, bool, str]] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.rows.append((name, ok, detail))

    @property
    def failed(self) -> int:
        return sum(1 for _, ok, _ in self.rows if not ok)


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (or the shorter length), None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def check_outputs(sf: dict[str, Any], vl: dict[str, Any], verdicts: Verdicts) -> None:
    if len(sf["prompts"]) != len(vl["prompts"]):
        verdicts.add("prompts", False, f"specframe decoded {len(sf['prompts'])} prompts, vLLM {len(vl['prompts'])}")
        return
    for s, v in zip(sf["prompts"], vl["prompts"], strict=True):
        name = f"{s['set']}#{s['question_id']}"
        lossless = first_difference(s["output_ids"], s["plain_ids"])
        verdicts.add(f"specframe lossless {name}", lossless is None,
                     f"{len(s['output_ids'])} tokens" if lossless is None else f"differs at token {lossless}")
        diff = first_difference(s["output_ids"], v["output_ids"])
        verdicts.add(f"vLLM == specframe {name}", diff is None,
                     f"{len(v['output_ids'])} tokens identical" if diff is None else
                     f"differs at token {diff}: specframe {s['output_ids'][diff:diff + 4]}, "
                     f"vLLM {v['output_ids'][diff:diff + 4]}")


def rates(acc: dict[str, Any]) -> list[float]:
    drafts = max(int(acc["num_drafts"]), 1)
    return [c / drafts for c in acc["accepted_per_pos"]]


def tau(acc: dict[str, Any]) -> float:
    """Mean acceptance length: 1 + accepted drafts per round (the bonus token counted)."""
    return 1.0 + acc["num_accepted_tokens"] / max(int(acc["num_drafts"]), 1)


def check_acceptance(sf: dict[str, Any], vl: dict[str, Any], verdicts: Verdicts, *, rate_tol: float,
                     tau_tol: float) -> None:
    a, b = sf["acceptance"], vl["acceptance"]
    print(f"{'depth':>5} {'specframe':>18} {'vLLM':>18}")
    for d, (x, y) in enumerate(zip(a["accepted_per_pos"], b["accepted_per_pos"], strict=True)):
        print(f"{d + 1:>5} {x:>7} ({x / max(a['num_drafts'], 1):6.3f}) {y:>7} ({y / max(b['num_drafts'], 1):6.3f})")
    print(f"{'rounds':>5} {a['num_drafts']:>18} {b['num_drafts']:>18}")
    worst = max(abs(x - y) for x, y in zip(rates(a), rates(b), strict=True))
    verdicts.add("acceptance per position", worst <= rate_tol, f"largest rate difference {worst:.4f} "
                 f"(tolerance {rate_tol}); counts specframe {a['accepted_per_pos']}, vLLM {b['accepted_per_pos']}")
    ta, tb = tau(a), tau(b)
    rel = abs(tb - ta) / ta
    verdicts.add("acceptance length", rel <= tau_tol, f"specframe {ta:.3f}, vLLM {tb:.3f} "
                 f"({100 * rel:.2f}% apart, tolerance {100 * tau_tol:.0f}%)")


def category_counts(law: dict[str, Any], samples: list[list[int]]) -> torch.Tensor:  # [C + 1] last = other
    index = {tuple(c): i for i, c in enumerate(law["categories"])}
    counts = torch.zeros(len(index) + 1, dtype=torch.float64)
    for s in samples:
        counts[index.get(tuple(s[: law["length"]]), len(index))] += 1
    return counts


def with_other(probs: list[float]) -> torch.Tensor:  # [C + 1]
    p = torch.tensor(probs, dtype=torch.float64)
    return torch.cat([p, (1.0 - p.sum()).clamp(min=0.0).view(1)])


def check_law(sf: dict[str, Any], vl: dict[str, Any], verdicts: Verdicts, *, alpha: float) -> None:
    law, samples = sf["law"], vl["samples"]
    if not samples:
        verdicts.add("output law", False, "the vLLM side drew no samples")
        return
    short = [s for s in samples if len(s) < law["length"]]
    if short:
        verdicts.add("output law", False, f"{len(short)} samples have fewer than {law['length']} tokens")
        return
    counts = category_counts(law, samples)
    test = g_test(counts, with_other(law["probs"]))
    control = g_test(counts, with_other(law["wrong_probs"]))
    verdicts.add(f"output law at T={law['temperature']}", test.p_value >= alpha,
                 f"G = {test.statistic:.1f}, dof {test.dof}, p = {test.p_value:.3g} (alpha {alpha}; "
                 f"{len(samples)} samples of {law['length']} tokens, {len(law['categories'])} categories + other)")
    verdicts.add(f"negative control: law at T={law['wrong_temperature']}", control.p_value < alpha,
                 f"G = {control.statistic:.1f}, p = {control.p_value:.3g} (must reject)")


def compare(sf: dict[str, Any], vl: dict[str, Any], *, rate_tol: float, tau_tol: float, alpha: float) -> Verdicts:
    if int(sf["num_speculative_tokens"]) != int(vl["num_speculative_tokens"]):
        verdicts = Verdicts()
        verdicts.add("draft length", False, f"specframe drafts {sf['num_speculative_tokens']} tokens per round, "
                                            f"vLLM {vl['num_speculative_tokens']}")
        return verdicts
    verdicts = Verdicts()
    check_outputs(sf, vl, verdicts)
    check_acceptance(sf, vl, verdicts, rate_tol=rate_tol, tau_tol=tau_tol)
    check_law(sf, vl, verdicts, alpha=alpha)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specframe", type=Path)
    ap.add_argument("vllm", type=Path)
    ap.add_argument("--rate-tol", type=float, default=0.05, help="largest per-position acceptance-rate difference")
    ap.add_argument("--tau-tol", type=float, default=0.05, help="largest relative acceptance-length difference")
    ap.add_argument("--alpha", type=float, default=1e-3, help="significance level of the law test")
    args = ap.parse_args(argv)
    sf, vl = (json.loads(p.read_text()) for p in (args.specframe, args.vllm))
    verdicts = compare(sf, vl, rate_tol=args.rate_tol, tau_tol=args.tau_tol, alpha=args.alpha)
    for name, ok, detail in verdicts.rows:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    passed = len(verdicts.rows) - verdicts.failed
    print(f"vllm-check: {passed} passed, {verdicts.failed} failed")
    return 1 if verdicts.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
