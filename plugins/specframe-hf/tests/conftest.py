"""Shared fixtures for the specframe-hf tests: tiny random fp32 models, built once per module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from specframe_hf.testing import tiny_causal_lm

#: Seeds per family so that the Llama-shaped families do not share weights.
FAMILY_SEEDS = {"llama": 0, "qwen3": 1, "mistral": 2, "qwen2": 3}


@pytest.fixture(scope="module")
def tiny_model() -> Callable[..., Any]:
    """``tiny_model(family, attn)``: a cached tiny random model (vocab 512, hidden 64, 2 layers, fp32)."""
    built: dict[tuple[str, str], Any] = {}

    def get(family: str, attn: str = "sdpa") -> Any:
        key = (family, attn)
        if key not in built:
            built[key] = tiny_causal_lm(family, attn=attn, seed=FAMILY_SEEDS[family])  # type: ignore[arg-type]
        return built[key]

    return get
