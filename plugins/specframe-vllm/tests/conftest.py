"""Fixtures for the specframe-vllm tests: the diffusion plugin's tiny Qwen3 target and published-layout writer.

These tests run in the main environment (no vLLM): they check the export against specframe's drafter through a
from-scratch reading of the exported directory with vLLM's DFlash semantics. That vLLM loads and runs the export
is what ``make vllm-check`` checks, in the vLLM environment.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "specframe-diffusion" / "tests"))

from diffusion_testkit import TARGET_LAYERS


@pytest.fixture(scope="session")
def tiny_qwen3() -> Any:
    """A random fp32 Qwen3ForCausalLM (never modified by the tests)."""
    from specframe_hf.testing import tiny_causal_lm

    return tiny_causal_lm("qwen3", seed=7, num_layers=TARGET_LAYERS)


@pytest.fixture
def hf_target(tiny_qwen3: Any) -> Any:
    from specframe_hf import HFTarget

    return HFTarget.from_model(tiny_qwen3)
