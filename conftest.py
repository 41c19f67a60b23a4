"""Repository-wide pytest set-up for specframe's own suite (core and first-party plugins).

Every test here works on tiny tensors, where torch's intra-op thread hand-offs cost more than the arithmetic,
and far more on a shared, busy 2-core machine; so the whole session runs torch on one thread.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

#: specframe's pytest plugin (fixtures and the conformance suite's parametrisation) is opt-in.
pytest_plugins = ["specframe.testing.pytest_plugin"]

#: The first-party plugins' packages. The suite needs every one: a broken install fails the session instead of
#: silently skipping the tests (the greedy-exactness test among them) that import it.
FIRST_PARTY = tuple(sorted(p.parent.name.replace("-", "_")
                           for p in (Path(__file__).parent / "plugins").glob("*/pyproject.toml")))


def pytest_configure(config: pytest.Config) -> None:
    missing = []
    for name in FIRST_PARTY:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    if missing:
        raise pytest.UsageError("first-party plugins are not importable: " + "; ".join(missing)
                                + "\nhint: make setup (pip install -e every plugins/* directory)")


@pytest.fixture(scope="session", autouse=True)
def single_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
