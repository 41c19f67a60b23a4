"""Plugin host: discovery, registration, duplicates, broken plugins, allowlist, kill switch, tracing."""

from __future__ import annotations

import importlib.metadata as md
import json
import types
from typing import Literal

import pytest

from specframe import ComponentConfig, ComponentSpec, PluginHost, hookimpl
from specframe.errors import ConfigError, PluginError
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


# ------------------------------------------------------------------------------- hostile and broken plugins
def _raising_plugin(exc: BaseException) -> types.ModuleType:
    mod = types.ModuleType("raising_plugin")

    @hookimpl
    def specframe_pruners():  # type: ignore[no-untyped-def]
        raise exc

    mod.specframe_pruners = specframe_pruners  # type: ignore[attr-defined]
    return mod


class _ExitingEntryPoint(_EntryPoint):
    def load(self) -> object:
        raise SystemExit(3)


@pytest.mark.parametrize("exc", [RuntimeError("database offline"), SystemExit(4)])
def test_registration_hook_that_raises_is_named(monkeypatch: pytest.MonkeyPatch, capsys,
                                                exc: BaseException) -> None:
    eps = [_EntryPoint("fake", "specframe-fake", fake_components),
           _EntryPoint("bad", "specframe-bad", _raising_plugin(exc), "0.4")]
    _fake_entry_points(monkeypatch, eps)
    with pytest.raises(PluginError) as info:
        PluginHost(autoload=True, allowlist=None, disabled=()).registry  # noqa: B018
    text = info.value.render()
    assert "specframe-bad" in text and "specframe_pruners" in text and "Traceback" not in text
    assert ("database offline" if isinstance(exc, RuntimeError) else "sys.exit(4)") in text
    host = PluginHost(autoload=True, allowlist=None, disabled=(), skip_broken=True)
    assert ("pruner", "keep_all") in host.registry  # the other plugin's components are still there
    assert [(u.name, u.status) for u in host.unloaded] == [("bad", "broken")]
    from specframe.cli import run_cli

    monkeypatch.delenv("SPECFRAME_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("SPECFRAME_DISABLED_PLUGINS", raising=False)
    monkeypatch.delenv("SPECFRAME_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    assert run_cli(["plugins", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["status"]) for r in rows] == [("bad", "broken"), ("builtin", "loaded"), ("fake", "loaded")]


def test_plugin_calling_sys_exit_on_import_is_caught_and_listed(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from specframe.cli import run_cli

    eps = [_EntryPoint("fake", "specframe-fake", fake_components),
           _ExitingEntryPoint("quitter", "specframe-quitter", fake_components, "2.0")]
    _fake_entry_points(monkeypatch, eps)
    with pytest.raises(PluginError, match=r"specframe-quitter 2\.0 failed to import: called sys\.exit\(3\)"):
        PluginHost(autoload=True, allowlist=None, disabled=()).load()
    monkeypatch.delenv("SPECFRAME_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("SPECFRAME_DISABLED_PLUGINS", raising=False)
    monkeypatch.delenv("SPECFRAME_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    assert run_cli(["plugins", "--json"]) == 0
    captured = capsys.readouterr()
    rows = {r["name"]: r for r in json.loads(captured.out)}
    assert rows["fake"]["status"] == "loaded" and rows["quitter"]["status"] == "broken"
    assert "sys.exit(3)" in rows["quitter"]["reason"] and "specframe-quitter" in captured.err
    monkeypatch.setenv("SPECFRAME_LOAD_PLUGINS", "fake")
    assert run_cli(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "quitter" in out and "skipped" in out and "fake" in out


def test_allowlist_entry_matching_no_plugin_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, [_EntryPoint("fake", "specframe-fake", fake_components)])
    with pytest.raises(PluginError, match="names 'specframe-fak', which matches no installed plugin") as info:
        PluginHost(environ={"SPECFRAME_LOAD_PLUGINS": "specframe-fak"}).load()
    assert "did you mean 'specframe-fake'" in info.value.message and "fake (specframe-fake)" in info.value.hint


def test_missing_component_names_the_plugin_the_allowlist_excluded(monkeypatch: pytest.MonkeyPatch) -> None:
    from specframe.pipeline import Pipeline
    from specframe.testing.toy import ToyTarget

    eps = [_EntryPoint("fake", "specframe-fake", fake_components),
           _EntryPoint("other", "specframe-other", _plugin_with("specframe_pruners", "other_pruner"))]
    _fake_entry_points(monkeypatch, eps)
    host = PluginHost(environ={"SPECFRAME_LOAD_PLUGINS": "fake"})
    pipeline = {"drafter": {"type": "repeat"}, "tree_builder": {"type": "spine"}, "pruner": {"type": "other_pruner"},
                "verifier": {"type": "auto"}, "corrector": {"type": "marginal"}}
    with pytest.raises(ConfigError, match="unknown pruner type 'other_pruner'") as info:
        Pipeline.from_dict(pipeline, target=ToyTarget.random(vocab_size=5), host=host)
    assert "not in SPECFRAME_LOAD_PLUGINS: other (specframe-other)" in info.value.hint
    with pytest.raises(ConfigError) as info:
        host.registry.get("pruner", "other_pruner")
    assert "not in SPECFRAME_LOAD_PLUGINS" in info.value.hint


def test_raising_validation_and_command_hooks_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from specframe.pipeline import Pipeline
    from specframe.testing.toy import ToyTarget

    mod = types.ModuleType("grumpy_plugin")

    @hookimpl
    def specframe_validate_pipeline(config, registry):  # type: ignore[no-untyped-def]
        raise KeyError("drafter")

    @hookimpl
    def specframe_register_commands(cli):  # type: ignore[no-untyped-def]
        raise SystemExit(1)

    mod.specframe_validate_pipeline = specframe_validate_pipeline  # type: ignore[attr-defined]
    mod.specframe_register_commands = specframe_register_commands  # type: ignore[attr-defined]
    eps = [_EntryPoint("fake", "specframe-fake", fake_components), _EntryPoint("grumpy", "specframe-grumpy", mod)]
    _fake_entry_points(monkeypatch, eps)
    host = PluginHost(autoload=True, allowlist=None, disabled=(), skip_broken=True)
    import click

    host.register_commands(click.Group())  # a broken command hook is listed, not fatal
    assert [(u.name, u.status) for u in host.unloaded] == [("grumpy", "broken")]
    assert "specframe_register_commands" in host.unloaded[0].reason
    pipeline = {"drafter": {"type": "repeat"}, "tree_builder": {"type": "spine"}, "pruner": {"type": "keep_all"},
                "verifier": {"type": "auto"}, "corrector": {"type": "marginal"}}
    with pytest.raises(PluginError, match=r"specframe-grumpy.*specframe_validate_pipeline hook: KeyError"):
        Pipeline.from_dict(pipeline, target=ToyTarget.random(vocab_size=5), host=host)


def test_one_module_behind_two_entry_points_and_a_stale_blocklist(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    eps = [_EntryPoint("fake", "specframe-fake", fake_components),
           _EntryPoint("fake-again", "specframe-fake", fake_components)]
    _fake_entry_points(monkeypatch, eps)
    with pytest.raises(PluginError, match=r"'fake-again' from distribution specframe-fake .*cannot be registered"):
        PluginHost(autoload=True, allowlist=None, disabled=()).load()
    host = PluginHost(autoload=True, allowlist=None, disabled=("fkae",), skip_broken=True)
    assert [p.name for p in host.plugins()] == ["builtin", "fake"]
    err = capsys.readouterr().err
    assert "SPECFRAME_DISABLED_PLUGINS names 'fkae'" in err and "did you mean 'fake'" in err


def test_the_builtin_stages_come_through_specframes_own_entry_point(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The core's stages are the `builtin` entry point of specframe's distribution (pyproject.toml), loaded by
    EntryPoint.load like a third-party plugin's, and present whatever the switches say."""
    import specframe.builtin.plugin as builtin_module
    from specframe.plugins import builtin_entry_point

    ep = builtin_entry_point()
    assert (ep.group, ep.value, ep.dist.metadata["Name"]) == ("specframe", "specframe.builtin.plugin", "specframe")
    loads: list[str] = []
    real_load = md.EntryPoint.load

    def counted(self: md.EntryPoint) -> object:
        loads.append(self.name)
        return real_load(self)

    monkeypatch.setattr(md.EntryPoint, "load", counted)
    host = PluginHost(autoload=False)
    assert loads == [BUILTIN_PLUGIN] and host.pm.get_plugin(BUILTIN_PLUGIN) is builtin_module
    (info,) = host.plugins()
    assert (info.name, info.distribution) == (BUILTIN_PLUGIN, "specframe")
    for environ in ({"SPECFRAME_LOAD_PLUGINS": ""}, {"SPECFRAME_DISABLE_PLUGIN_AUTOLOAD": "1"},
                    {"SPECFRAME_DISABLED_PLUGINS": "builtin"}):
        assert [p.name for p in PluginHost(environ=environ).plugins()][:1] == [BUILTIN_PLUGIN], environ
    assert "SPECFRAME_DISABLED_PLUGINS names specframe's built-in stages" in capsys.readouterr().err


def test_another_distributions_builtin_entry_point_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(monkeypatch, [_EntryPoint("builtin", "specframe-impostor",
                                                 _plugin_with("specframe_pruners", "impostor"))])
    with pytest.raises(PluginError, match=r"specframe-impostor.*'builtin', which is specframe's own"):
        PluginHost(autoload=True, allowlist=None, disabled=()).load()
    host = PluginHost(autoload=True, allowlist=None, disabled=(), skip_broken=True)
    assert "impostor" not in host.registry.names("pruner") and host.broken


def test_without_its_entry_point_the_core_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import specframe.plugins as plugins_module

    monkeypatch.setattr(plugins_module, "CORE_DISTRIBUTION", "specframe-not-installed")
    with pytest.raises(PluginError, match=r"entry point 'builtin'.*is not installed") as exc:
        PluginHost()
    assert "pip install -e ." in exc.value.hint
