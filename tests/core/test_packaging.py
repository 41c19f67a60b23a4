"""What installing specframe does to other projects: nothing to their pytest sessions."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_pytest_plugin_is_opt_in() -> None:
    """No ``pytest11`` entry point: specframe's plugin (and torch) load only where a conftest names it."""
    assert "pytest11" not in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert not [ep for ep in md.distribution("specframe").entry_points if ep.group == "pytest11"]
    conftest = (ROOT / "conftest.py").read_text(encoding="utf-8")
    assert 'pytest_plugins = ["specframe.testing.pytest_plugin"]' in conftest
