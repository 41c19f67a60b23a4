"""Fixtures for the specframe-diffusion tests: a tiny Qwen3 target (4 layers, vocab 512, hidden 64) and checkpoints.

Every test runs single-threaded (restored afterwards): the tensors are tiny, and on shared CPUs torch's intra-op
thread hand-offs cost far more than the arithmetic.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from diffusion_testkit import TARGET_LAYERS, write_published_checkpoint


@pytest.fixture(scope="session")
def tiny_qwen3() -> Any:
    """A random fp32 Qwen3ForCausalLM shared by the drafter's tests (never modified by them)."""
    from specframe_hf.testing import tiny_causal_lm

    return tiny_causal_lm("qwen3", seed=7, num_layers=TARGET_LAYERS)


@pytest.fixture
def hf_target(tiny_qwen3: Any) -> Any:
    """A fresh HFTarget around the shared tiny model (taps unset)."""
    from specframe_hf import HFTarget

    return HFTarget.from_model(tiny_qwen3)


@pytest.fixture
def make_checkpoint(tmp_path: Path, tiny_qwen3: Any) -> Callable[..., Path]:
    """``make_checkpoint(kind, **config_kwargs)`` writes a published-layout checkpoint and returns its directory."""
    counter = iter(range(1000))

    def make(kind: str, *, seed: int = 0, **kwargs: Any) -> Path:
        directory = tmp_path / f"{kind}-{next(counter)}"
        write_published_checkpoint(directory, kind, seed=seed, target=tiny_qwen3, **kwargs)
        return directory

    return make
