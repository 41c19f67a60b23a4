"""specframe's pytest plugin (registered under ``pytest11``): fixtures for plugin authors."""

from __future__ import annotations

import pytest

from specframe.plugins import PluginHost


@pytest.fixture
def plugin_host() -> PluginHost:
    """A fresh plugin host with entry-point autoload off: register in-process plugins on it."""
    return PluginHost(autoload=False, allowlist=None, disabled=(), trace=False)


@pytest.fixture
def installed_host() -> PluginHost:
    """A fresh plugin host that loads every installed plugin (first- and third-party)."""
    return PluginHost(autoload=True, allowlist=None, disabled=(), trace=False)
