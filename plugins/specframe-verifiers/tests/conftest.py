"""Test set-up for specframe-verifiers: the shared scenario module on ``sys.path``, single-threaded torch.

The statistical tests run many tiny tensor operations; on shared CPUs torch's intra-op thread hand-offs cost far
more than the arithmetic, so each test here runs with one thread (restored afterwards).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _single_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
