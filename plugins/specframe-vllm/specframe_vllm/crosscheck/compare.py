"""The comparer of the cross-check (main environment): reads both sides' JSON, prints the figures, exits 1 on a failure.

Checks, each counted as passed or failed (the last line reads ``vllm-check: N passed, M failed``):

1. **target numerics**, per prompt: vLLM's greedy output equals specframe's token for token, and specframe's
   equals the target's plain greedy decoding. Both engines decode the same float32 target losslessly, so this holds
   for any drafter, right or wrong: it tests that the two engines compute the same target, not the drafter;
2. **drafter rounds**, per prompt (:mod:`.rounds`): the rounds that start at the same output position in both
   engines accept the same number of drafts within the output (vLLM also counts drafts accepted past the token
   limit, specframe does not), except at a near tie of the drafter (top-two log-probability gap
   within ``2 * --logprob-tol`` in both engines); with that, the per-prompt, per-position accepted counts agree;
   and vLLM's own per-prompt counters equal the counts of its recorded rounds;
3. **drafter log-probabilities**: over every aligned round and depth, a candidate both engines list has
   log-probabilities at most ``--logprob-tol`` apart, and the best candidates agree except at near ties. The
   default 1e-3 is 20x the largest difference measured with the correct export (5.7e-5 over the 218 rounds of
   docs/benchmarks/vllm-crosscheck; float32 rounding of two engines' kernels, split by :mod:`.trace` into the
   target's taps, 2.4e-5 to 4.3e-5, and the drafter's own kernels, 1.1e-5 to 1.9e-5) and far below what a wrong
   export moves (the noise control: up to 2.1);
4. **output law at T > 0**: vLLM's sampled continuations against the target's exact law (G-test, must not reject
   at ``--alpha``), and its negative control: the same samples against the law at the wrong temperature (must
   reject).

The acceptance totals of the former check (per-position rates within 0.05, τ within 5 %) are printed for
comparison, not judged: they let an export that never accepts past depth 3 through.

``--control NAME`` judges a negative control (a wrong export, :mod:`.controls`): the law test is not run, and the
exit status is 0 when a drafter check (2 or 3) failed, the control detected, and 1 when every drafter check passed.

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
from specframe_vllm.crosscheck.rounds import compare_rounds, per_position

#: Default bound on the two engines' drafter log-probability differences (module docstring, check 3).
LOGPROB_TOL = 1e-3
#: Names of the checks that judge the drafter (a control must fail one of them).
DRAFTER_CHECKS = ("drafter rounds", "vLLM counters", "drafter log-probabilities")


@dataclass
class Verdicts:
    """Named checks and whether each passed."""

    rows: list[tuple[str, bool, str]] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.rows.append((name, ok, detail))

    @property
    def failed(self) -> int:
        return sum(1 for _, ok, _ in self.rows if not ok)

    def failed_drafter_checks(self) -> list[str]:
        return [name for name, ok, _ in self.rows if not ok and name.startswith(DRAFTER_CHECKS)]


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (or the shorter length), None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def prompt_name(s: dict[str, Any]) -> str:
    return f"{s['set']}#{s['question_id']}"


def check_target_numerics(sf: dict[str, Any], vl: dict[str, Any], verdicts: Verdicts) -> bool:
    """Check 1 (module docstring); False when the prompts do not correspond (nothing else can be compared)."""
    if len(sf["prompts"]) != len(vl["prompts"]):
        verdicts.add("prompts", False, f"specframe decoded {len(sf['prompts'])} prompts, vLLM {len(vl['prompts'])}")
        return False
    for s, v in zip(sf["prompts"], vl["prompts"], strict=True):
        name = prompt_name(s)
        lossless = first_difference(s["output_ids"], s["plain_ids"])
        verdicts.add(f"specframe lossless {name}", lossless is None,
                     f"{len(s['output_ids'])} tokens" if lossless is None else f"differs at token {lossless}")
        diff = first_difference(s["output_ids"], v["output_ids"])
        verdicts.add(f"target numerics {name}", diff is None,
                     f"vLLM's greedy output = specframe's, {len(v['output_ids'])} tokens" if diff is None else
                     f"differs at token {diff}: specframe {s['output_ids'][diff:diff + 4]}, "
                     f"vLLM {v['output_ids'][diff:diff + 4]}")
    return True


def check_drafter(sf: dict[str, Any], vl: dict[str, Any], verdicts: Verdicts, *, tol: float) -> None:
    """Checks 2 and 3 (module docstring)."""
    depth = int(sf["num_speculative_tokens"])
    worst = 0.0
    top1: list[str] = []
    print(f"per prompt, accepted per position (depth 1..{depth}), drafts within the output:")
    for s, v in zip(sf["prompts"], vl["prompts"], strict=True):
        name = prompt_name(s)
        end = len(s["output_ids"])
        found = compare_rounds(s["rounds"], v["rounds"], tol=tol, end=end)
        worst = max(worst, found.max_logprob_diff)
        top1 += [f"{name} {t}" for t in found.top1_disagreements]
        counts_sf, counts_vl = per_position(s["rounds"], depth, end), per_position(v["rounds"], depth, end)
        print(f"  {name:>24}  specframe {counts_sf} over {len(s['rounds'])} rounds, vLLM {counts_vl} over "
              f"{len(v['rounds'])}")
        detail = (f"{found.aligned} aligned rounds, {found.equal} equal; per-position counts "
                  f"{'equal' if counts_sf == counts_vl else f'specframe {counts_sf}, vLLM {counts_vl}'}")
        if found.explained:
            detail += f"; near ties: {'; '.join(found.explained)}"
        if found.unexplained:
            detail += f"; DIVERGED: {'; '.join(found.unexplained[:3])}"
            detail += f" (+{len(found.unexplained) - 3} more)" if len(found.unexplained) > 3 else ""
        if any(found.unaligned):
            detail += f"; unaligned rounds: specframe {found.unaligned[0]}, vLLM {found.unaligned[1]}"
        verdicts.add(f"drafter rounds {name}", found.ok, detail)
        own = v["acceptance"]
        derived = per_position(v["rounds"], depth)
        consistent = (own["accepted_per_pos"] == derived and own["num_drafts"] == len(v["rounds"])
                      and own["num_accepted_tokens"] == sum(r["accepted"] for r in v["rounds"]))
        verdicts.add(f"vLLM counters {name}", consistent,
                     f"counters {own['accepted_per_pos']} over {own['num_drafts']} drafts, rounds {derived} over "
                     f"{len(v['rounds'])}")
    detail = f"largest difference {worst:.3g} (tolerance {tol:g})"
    if top1:
        detail += f"; best candidates differ without a near tie {len(top1)} times, first: {top1[0]}"
    verdicts.add("drafter log-probabilities", worst <= tol and not top1, detail)


def rates(acc: dict[str, Any]) -> list[float]:
    drafts = max(int(acc["num_drafts"]), 1)
    return [c / drafts for c in acc["accepted_per_pos"]]


def tau(acc: dict[str, Any]) -> float:
    """Mean acceptance length: 1 + accepted drafts per round (the bonus token counted)."""
    return 1.0 + acc["num_accepted_tokens"] / max(int(acc["num_drafts"]), 1)


def print_totals(sf: dict[str, Any], vl: dict[str, Any]) -> None:
    """The acceptance totals and the former aggregate test's figures (printed, not judged)."""
    a, b = sf["acceptance"], vl["acceptance"]
    print(f"totals: {'depth':>5} {'specframe':>18} {'vLLM':>18}")
    for d, (x, y) in enumerate(zip(a["accepted_per_pos"], b["accepted_per_pos"], strict=True)):
        print(f"        {d + 1:>5} {x:>7} ({x / max(a['num_drafts'], 1):6.3f}) "
              f"{y:>7} ({y / max(b['num_drafts'], 1):6.3f})")
    print(f"        {'rounds':>5} {a['num_drafts']:>18} {b['num_drafts']:>18}")
    worst = max(abs(x - y) for x, y in zip(rates(a), rates(b), strict=True))
    rel = abs(tau(b) - tau(a)) / tau(a)
    passes = worst <= 0.05 and rel <= 0.05
    print(f"        tau specframe {tau(a):.3f}, vLLM {tau(b):.3f} ({100 * rel:.2f}% apart); largest rate difference "
          f"{worst:.4f}; the former aggregate test (0.05, 5%) would {'pass' if passes else 'fail'}")


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


def compare(sf: dict[str, Any], vl: dict[str, Any], *, logprob_tol: float = LOGPROB_TOL, alpha: float = 1e-3,
            law: bool = True) -> Verdicts:
    """Every check of the module docstring (``law=False``: all but the output law)."""
    verdicts = Verdicts()
    if int(sf["num_speculative_tokens"]) != int(vl["num_speculative_tokens"]):
        verdicts.add("draft length", False, f"specframe drafts {sf['num_speculative_tokens']} tokens per round, "
                                            f"vLLM {vl['num_speculative_tokens']}")
        return verdicts
    if check_target_numerics(sf, vl, verdicts):
        check_drafter(sf, vl, verdicts, tol=logprob_tol)
        print_totals(sf, vl)
    if law:
        check_law(sf, vl, verdicts, alpha=alpha)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specframe", type=Path)
    ap.add_argument("vllm", type=Path)
    ap.add_argument("--logprob-tol", type=float, default=LOGPROB_TOL,
                    help="largest drafter log-probability difference between the engines")
    ap.add_argument("--alpha", type=float, default=1e-3, help="significance level of the law test")
    ap.add_argument("--control", metavar="NAME", help="judge a negative control: it must fail a drafter check")
    args = ap.parse_args(argv)
    sf, vl = (json.loads(p.read_text()) for p in (args.specframe, args.vllm))
    verdicts = compare(sf, vl, logprob_tol=args.logprob_tol, alpha=args.alpha, law=args.control is None)
    for name, ok, detail in verdicts.rows:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    passed = len(verdicts.rows) - verdicts.failed
    if args.control is not None:
        caught = verdicts.failed_drafter_checks()
        print(f"vllm-check control '{args.control}': "
              + (f"detected ({len(caught)} drafter checks failed)" if caught else
                 "NOT detected: every drafter check passed on a wrong export"))
        return 0 if caught else 1
    print(f"vllm-check: {passed} passed, {verdicts.failed} failed")
    return 1 if verdicts.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
