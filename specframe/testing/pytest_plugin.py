"""specframe's pytest plugin: fixtures for plugin authors and the parametrisation of
:class:`specframe.testing.conformance.ConformanceSuite` subclasses.

Opt-in, like pytest's own ``pytester``: a test suite that wants it names it in its top-level ``conftest.py``::

    pytest_plugins = ["specframe.testing.pytest_plugin"]

(it is not a ``pytest11`` entry point, so installing specframe adds nothing, torch included, to other projects'
pytest sessions).

Fixtures: ``specframe_plugin_host`` (a fresh host, autoload off), ``specframe_installed_host`` (every installed
plugin) and ``specframe_conformance_workdir`` (a session scratch directory where conformance cases write tiny
checkpoints).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specframe.plugins import PluginHost
from specframe.testing.marks import UNUSED_MARK


@pytest.fixture
def specframe_plugin_host() -> PluginHost:
    """A fresh plugin host with entry-point autoload off: register in-process plugins on it."""
    return PluginHost(autoload=False, allowlist=None, disabled=(), trace=False)


@pytest.fixture
def specframe_installed_host() -> PluginHost:
    """A fresh plugin host that loads every installed plugin (first- and third-party)."""
    return PluginHost(autoload=True, allowlist=None, disabled=(), trace=False)


@pytest.fixture(scope="session")
def specframe_conformance_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scratch directory shared by the conformance cases of a test session."""
    return tmp_path_factory.mktemp("specframe-conformance")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{UNUSED_MARK}: a conformance contract with no case of its kind "
                                       "(deselected)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "conformance_case" in metafunc.fixturenames and metafunc.cls is not None:
        from specframe.testing.conformance.suite import parametrize

        parametrize(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect contract methods that have no case of their stage kind in this suite."""
    unused = [item for item in items if item.get_closest_marker(UNUSED_MARK) is not None]
    if unused:
        config.hook.pytest_deselected(items=unused)
        items[:] = [item for item in items if item.get_closest_marker(UNUSED_MARK) is None]
