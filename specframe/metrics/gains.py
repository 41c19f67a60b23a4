"""Speedup claims as two separate gains, each with its interval, its prompt count and the file it comes from.

A speculative method's speed over transformers' ``generate()`` multiplies two gains that have nothing to do with
each other:

* the **plain loop's**: specframe's one-token-per-round loop against ``generate()`` on the same model, prompts
  and token counts (the linear kernels ``cpu_linear`` chose, and the loop's own overhead);
* **speculation's**: the method against specframe's plain loop, on the same kernels.

Quoting their product as "the speedup" credits speculation with a kernel choice (or the reverse), so every place
that claims a speedup (README, docs, the demo, the model cards) quotes the two apart, each as
``1.15× [1.04, 1.27], 10 prompts``: the aggregate speedup (Σ tokens / Σ time ratio) with its 95 % bootstrap
interval over prompts, and the script and result file that give it.

Example::

    gain = Gain("DARTree pruned, budget: auto", PLAIN_LOOP, Estimate(1.1477, 1.0378, 1.2694, 10))
    gain.format()                         # '1.15× [1.04, 1.27], 10 prompts'
    paired_gain(dart_results, plain_results)   # the same from GenerationResults paired by prompt
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specframe.metrics.records import GenerationResult
from specframe.metrics.speedup import Estimate, PairedRun, aggregate_estimate

#: What a gain is measured against.
GENERATE = "transformers' generate()"
PLAIN_LOOP = "specframe's plain loop"
#: The two headings every claim is quoted under.
KERNEL_HEADING = f"{PLAIN_LOOP} vs {GENERATE}"
SPECULATION_HEADING = f"speculation vs {PLAIN_LOOP}"


@dataclass(frozen=True)
class Gain:
    """One speedup of ``label`` over ``versus`` (:data:`GENERATE` or :data:`PLAIN_LOOP`)."""

    label: str
    versus: str
    estimate: Estimate  # aggregate speedup; NaN bounds when no interval was recorded
    note: str = ""  # e.g. how many rounds were plain
    contended: bool = False  # either side was measured while other processes loaded the machine

    @property
    def prompts(self) -> int:
        return self.estimate.n

    def format(self) -> str:
        """``1.15× [1.04, 1.27], 10 prompts`` (``no interval recorded`` when the source kept none; ``†`` when a
        side ran under contention, see :data:`CONTENDED_NOTE`)."""
        text = self.estimate.format()
        if math.isnan(self.estimate.low):
            text += " (no interval recorded)"
        return f"{text}, {self.prompts} prompt{'s' if self.prompts != 1 else ''}" + (" †" if self.contended else "")


#: What ``†`` means beside a gain.
CONTENDED_NOTE = "† measured while other processes used more than a quarter of a core (`machine_load` in the JSON)"


def paired_gain(results: Sequence[GenerationResult], base: Sequence[GenerationResult], *, resamples: int = 2000,
                seed: int = 0) -> Estimate:
    """The aggregate speedup of ``results`` over ``base`` (paired by prompt) with its 95 % bootstrap interval."""
    pairs = [PairedRun(len(r.tokens), r.total_ns / 1e9, len(b.tokens), b.total_ns / 1e9)
             for r, b in zip(results, base, strict=True)]
    return aggregate_estimate(pairs, resamples=resamples, confidence=0.95, seed=seed)


def estimate_from_json(data: Mapping[str, Any]) -> Estimate:
    """An :class:`Estimate` written as ``{"value", "low", "high", "n"}`` (a bound may be missing or null)."""
    low, high = data.get("low"), data.get("high")
    return Estimate(float(data["value"]), math.nan if low is None else float(low),
                    math.nan if high is None else float(high), int(data.get("n", 0)))


def estimate_to_json(estimate: Estimate) -> dict[str, float | int | None]:
    def rounded(x: float) -> float | None:
        return None if math.isnan(x) else round(x, 4)

    return {"value": rounded(estimate.value), "low": rounded(estimate.low), "high": rounded(estimate.high),
            "n": estimate.n}


def auto_budget_gains(report: Mapping[str, Any], scope: str) -> tuple[Gain, list[Gain]]:
    """From ``benchmarks/auto_budget.py``'s JSON: the plain loop's gain over ``generate()`` and every other
    method's gain over the plain loop, on one group (``math_code``, ``chat``) or set (``gsm8k``, ...)."""
    rows = (report["groups"].get(scope) or report["sets"][scope])["rows"]
    plain = next(r for r in rows if r["method"] == "plain decoding")
    generate = next((r for r in rows if r["method"] == "hf_generate"), {})
    kernel = Gain("plain decoding", GENERATE, estimate_from_json(plain["vs_generate"]["aggregate"]),
                  contended=bool(plain.get("contended") or generate.get("contended")))
    speculation = [Gain(r["method"], PLAIN_LOOP, estimate_from_json(r["vs_plain"]["aggregate"]),
                        note=f"τ {r['tau']:.2f}, {100 * r['plain_round_share']:.0f} % plain rounds",
                        contended=bool(r.get("contended") or plain.get("contended")))
                   for r in rows if r["method"] not in ("plain decoding", "hf_generate")]
    return kernel, speculation


def eval_gains(rows: Sequence[Mapping[str, Any]]) -> tuple[Gain | None, list[Gain]]:
    """From ``benchmarks/smollm2_eval.py``'s rows of one dataset (``checkpoints/smollm2-135m/eval.json``): the
    plain loop over ``generate()`` and each method over the plain loop. Intervals are read where the rows carry
    them (``speedup_interval``, ``vs_generate_interval``); files written before that have none."""
    def contended(*rows: Mapping[str, Any] | None) -> bool:
        return any(bool(((row or {}).get("machine_load") or {}).get("contended")) for row in rows)

    def estimate(row: Mapping[str, Any], value_key: str, interval_key: str) -> Estimate:
        interval = row.get(interval_key)
        if isinstance(interval, Mapping):
            return estimate_from_json(interval)
        return Estimate(float(row[value_key]), n=len(row.get("per_prompt_tau") or ()))

    plain = next((r for r in rows if r["method"] == "plain decoding"), None)
    generate = next((r for r in rows if r["method"] == "transformers generate()"), None)
    kernel = None
    if plain is not None and plain.get("speedup_vs_generate") is not None:
        kernel = Gain("plain decoding", GENERATE, estimate(plain, "speedup_vs_generate", "vs_generate_interval"),
                      contended=contended(plain, generate))
    speculation = [Gain(r["method"], PLAIN_LOOP, estimate(r, "speedup", "speedup_interval"),
                        contended=contended(r, plain))
                   for r in rows if r["method"] not in ("plain decoding", "transformers generate()")]
    return kernel, speculation
