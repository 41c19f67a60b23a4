"""Shared fixtures: a tiny random Llama target and shards it generated (module-scoped, built once)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from specframe_smollm2.testing import tiny_llama, write_tiny_shards


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_target() -> Any:
    return tiny_llama()


@pytest.fixture(scope="session")
def tiny_data(tiny_target, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-data")
    write_tiny_shards(tiny_target, out, num_seqs=24, taps=(0, 1, 2))
    return out
