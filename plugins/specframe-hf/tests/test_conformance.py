"""The conformance kit on every component of specframe-hf: the ``hf`` target (a tiny random Llama saved to a
directory, loaded the way pipelines load it) and the ``ngram`` / ``none`` drafters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specframe_hf.testing import tiny_causal_lm

from specframe.testing.conformance import ConformanceCase, ConformanceSuite


def saved_tiny_llama(workdir: Path) -> dict[str, Any]:
    if not (workdir / "config.json").is_file():
        tiny_causal_lm("llama", seed=0).save_pretrained(workdir)
    return {"model": str(workdir), "device": "cpu"}


class TestHFConformance(ConformanceSuite):
    plugin = "hf"
    cases = (
        ConformanceCase("target", "hf", config=saved_tiny_llama),
        ConformanceCase("target", "hf", config=lambda w: {**saved_tiny_llama(w), "attn": "eager", "taps": [1]},
                        variant="eager-taps"),
        ConformanceCase("drafter", "ngram", config={"num_speculative_tokens": 4, "max_ngram": 2}),
    )
