"""Plugin host: discovery, registration, duplicates, broken plugins, allowlist, kill switch, tracing."""

from __future__ import annotations

import importlib.metadata as md
import types
from typing import Literal

import pytest

from specframe import ComponentConfig, ComponentSpec, PluginHost, hookimpl
from specframe.errors import PluginError
from specframe.plugins import BUILTIN_PLUGIN, REGISTRATION_HOOKS

from . import fake_components


class _Dist:
    def __init__(self, name: str, version: str) -> None:
        self.metadata = {"Name": name}
        self.version = version


class _EntryPoint:
    """Stands in for an importlib.metadata entry point of an installed distribution."""

    def __init__(self, name: str, dist: str, module: object | Exception, version: str = "1.2.3") -> None:
        self.name = name
        self.dist = _Dist(dist, version)
        self._module = module
        self.group = "specframe"

    def load(self) -> object:
        if isinstance(self._module, Exception):
            raise self._module
        return self._module


def _fake_entry_points(monkeypatch: pytest.MonkeyPatch, eps: list[_EntryPoint]) -> None:
    monkeypatch.setattr(md, "entry_points", lambda group=None: [e for e in eps if group == e.group])


def _plugin_with(kind_hook: str, name: str) -> types.ModuleType:
    cfg = type(f"Cfg_{name}", (ComponentConfig,), {"__annotations__": {"type": Literal[name]}, "type": name})
    mod = types.ModuleType(f"plugin_{name}")

    def hook():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="pruner", name=name, config=cfg, factory=lambda c, x: None, summary=name)

    hook.__name__ = kind_hook
    setattr(mod, kind_hook, hookimpl(hook))
    return mod


def test_in_process_plugin_registered_and_found(specframe_plugin_host: PluginHost) -> None:
    specframe_plugin_host.register(fake_components, "fake")
    registry = specframe_plugin_host.registry
    assert registry.names("drafter") == ["none", "repeat"]  # the built-in `none` and the plugin's own
    assert registry.get("drafter", "none").plugin == BUILTIN_PLUGIN
    rec = registry.get("verifier", "argmax")
    assert rec.plugin == "fake" and rec.spec.capabilities.greedy_only
    info = {p.name: p for p in specframe_plugin_host.plugins()}["fake"]
    assert set(info.hooks) == set(REGISTRATION_HOOKS.values())


def test_entry_point_discovery_reports_distribution_and_version(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, [_EntryPoint("fake", "specframe-fake", fake_components, "9.9")])
    host = PluginHost(autoload=True, allowlist=None, disabled=())
    rec = host.registry.get("tree_builder", "spine")
    assert (rec.distribution, rec.version) == ("specframe-fake", "9.9")
    assert [p.distribution for p in host.plugins()] == ["specframe", "specframe-fake"]


def test_loading_is_lazy_and_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class Counting(_EntryPoint):
        def load(self) -> object:
            calls.append(1)
            return super().load()

    _fake_entry_points(monkeypatch, [Counting("fake", "specframe-fake", fake_components)])
    host = PluginHost(autoload=True, allowlist=None, disabled=())
    assert calls == []
    host.load()
    host.load()
    assert host.registry is host.registry
    assert calls == [1]


def test_duplicate_component_names_rejected_naming_both_distributions(specframe_plugin_host: PluginHost) -> None:
    specframe_plugin_host.register(_plugin_with("specframe_pruners", "topb"), "first", distribution="dist-one")
    specframe_plugin_host.register(_plugin_with("specframe_pruners", "topb"), "second", distribution="dist-two")
    with pytest.raises(PluginError) as exc:
        specframe_plugin_host.registry  # noqa: B018
    assert "dist-one" in str(exc.value) and "dist-two" in str(exc.value) and "'topb'" in str(exc.value)


def test_broken_plugin_reported_with_distribution_and_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, [_EntryPoint("broken", "specframe-broken", ImportError("no module named x"))])
    with pytest.raises(PluginError) as exc:
        PluginHost(autoload=True, allowlist=None, disabled=()).load()
    text = str(exc.value)
    assert "specframe-broken" in text and "ImportError" in text and "no module named x" in text
    host = PluginHost(autoload=True, allowlist=None, disabled=(), skip_broken=True)
    host.load()
    assert host.broken and "specframe-broken" in host.broken[0]


def test_allowlist_and_kill_switch_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [_EntryPoint("fake", "specframe-fake", fake_components),
           _EntryPoint("other", "specframe-other", _plugin_with("specframe_pruners", "other_pruner"))]
    _fake_entry_points(monkeypatch, eps)
    host = PluginHost(environ={"SPECFRAME_LOAD_PLUGINS": "specframe-other"})
    assert [p.name for p in host.plugins()] == [BUILTIN_PLUGIN, "other"]
    host = PluginHost(environ={"SPECFRAME_LOAD_PLUGINS": ""})
    assert [p.name for p in host.plugins()] == [BUILTIN_PLUGIN]  # the core's own stages stay
    host = PluginHost(environ={"SPECFRAME_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert [p.name for p in host.plugins()] == [BUILTIN_PLUGIN]
    host = PluginHost(environ={"SPECFRAME_DISABLED_PLUGINS": "fake"})
    assert [p.name for p in host.plugins()] == [BUILTIN_PLUGIN, "other"]


def test_misspelt_hook_fails_loudly(specframe_plugin_host: PluginHost) -> None:
    mod = types.ModuleType("typo_plugin")

    @hookimpl
    def specframe_drafter():  # type: ignore[no-untyped-def]  (missing "s")
        return []

    mod.specframe_drafter = specframe_drafter  # type: ignore[attr-defined]
    with pytest.raises(PluginError) as exc:
        specframe_plugin_host.register(mod, "typo")
    assert "specframe_drafter" in str(exc.value)


def test_wrong_kind_from_registration_hook_rejected(specframe_plugin_host: PluginHost) -> None:
    specframe_plugin_host.register(_plugin_with("specframe_drafters", "not_a_drafter"), "wrong")
    with pytest.raises(PluginError, match="specframe_pruners"):
        specframe_plugin_host.registry  # noqa: B018


def test_trace_prints_hook_calls(capsys: pytest.CaptureFixture[str]) -> None:
    host = PluginHost(autoload=False, trace=True)
    host.register(fake_components, "fake")
    host.registry  # noqa: B018
    err = capsys.readouterr().err
    assert "[specframe trace] specframe_drafters" in err


def test_first_party_plugins_are_discovered_through_entry_points(specframe_installed_host: PluginHost) -> None:
    dists = {p.distribution for p in specframe_installed_host.plugins()}
    assert {"specframe-trees", "specframe-verifiers", "specframe-hf"} <= dists
    for rec in specframe_installed_host.registry:
        assert rec.distribution.startswith("specframe-") or rec.plugin == BUILTIN_PLUGIN, rec
