"""Repository-wide pytest set-up for specframe's own suite (core and first-party plugins).

Every test here works on tiny tensors, where torch's intra-op thread hand-offs cost more than the arithmetic,
and far more on a shared, busy 2-core machine; so the whole session runs torch on one thread.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def single_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
