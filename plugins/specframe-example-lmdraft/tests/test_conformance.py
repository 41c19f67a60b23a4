"""specframe's conformance kit on the ``lm_draft`` drafter, with a tiny target and draft model."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from lmdraft_testkit import save_draft, target_model
from specframe_hf import HFTarget

from specframe.testing.conformance import ConformanceCase, ConformanceSuite


def tiny_target() -> Any:
    return HFTarget.from_model(target_model())


@cache
def noisy_draft(workdir: Path) -> dict[str, Any]:
    return {"model": str(save_draft(workdir, "noisy")), "num_speculative_tokens": 3, "num_candidates": 4}


class TestLMDraftConformance(ConformanceSuite):
    plugin = "lmdraft"
    cases = (ConformanceCase("drafter", "lm_draft", config=noisy_draft, target=tiny_target),)
