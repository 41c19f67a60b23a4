"""Test set-up: ``lmdraft_testkit`` importable (import-mode importlib), tiny models run single-threaded."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module", autouse=True)
def single_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, especially on a shared CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
