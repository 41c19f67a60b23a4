"""Shared fixtures for the specframe-trees tests; makes ``trees_testkit`` importable (import-mode importlib)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module", autouse=True)
def single_thread() -> Iterator[None]:
    """Tiny tensors run fastest on one thread, especially on a shared, busy CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
