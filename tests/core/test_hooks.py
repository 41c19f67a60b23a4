"""Every hook is documented and tested; a new hook without either fails here. One test per hook follows."""

from __future__ import annotations

import inspect
import sys
import types

import click
import pytest

from specframe import PluginHost, docs_gen, hookimpl, hookspecs
from specframe.config import validate_pipeline
from specframe.errors import ConfigError

from . import fake_components
from .test_config import GOOD

HOOKS = docs_gen.hook_names()


def test_hook_list_is_complete() -> None:
    assert len(HOOKS) == 8 and all(h.startswith("specframe_") for h in HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented(hook: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, hook)) or ""
    assert "Example plugin::" in doc and "versionadded:" in doc and "Returns:" in doc, hook
    page = (docs_gen.ROOT / "docs/plugins/hooks.md").read_text(encoding="utf-8")
    assert f"## {hook}\n" in page, f"{hook} has no section in docs/plugins/hooks.md"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test(hook: str) -> None:
    assert f"test_hook_{hook}" in vars(sys.modules[__name__]), f"write test_hook_{hook} in this module"


def test_generated_hook_page_is_current() -> None:
    assert docs_gen.main(["--check"]) == 0


@pytest.fixture
def host() -> PluginHost:
    h = PluginHost(autoload=False)
    h.register(fake_components, "fake", distribution="specframe-fake", version="0.0.1")
    return h


def _assert_kind(host: PluginHost, kind: str, name: str) -> None:
    rec = host.registry.get(kind, name)
    assert rec.spec.kind == kind and rec.distribution == "specframe-fake"


def test_hook_specframe_target_adapters(host: PluginHost) -> None:
    _assert_kind(host, "target", "fake_target")


def test_hook_specframe_drafters(host: PluginHost) -> None:
    _assert_kind(host, "drafter", "repeat")


def test_hook_specframe_correctors(host: PluginHost) -> None:
    _assert_kind(host, "corrector", "marginal")


def test_hook_specframe_tree_builders(host: PluginHost) -> None:
    _assert_kind(host, "tree_builder", "spine")


def test_hook_specframe_pruners(host: PluginHost) -> None:
    _assert_kind(host, "pruner", "keep_all")


def test_hook_specframe_verifiers(host: PluginHost) -> None:
    _assert_kind(host, "verifier", "argmax")


def test_hook_specframe_validate_pipeline(host: PluginHost) -> None:
    import yaml

    mod = types.ModuleType("strict_plugin")

    @hookimpl
    def specframe_validate_pipeline(config, registry):  # type: ignore[no-untyped-def]
        if config.budget > 3:
            yield "budget must be at most 3 for this plugin"

    mod.specframe_validate_pipeline = specframe_validate_pipeline  # type: ignore[attr-defined]
    host.register(mod, "strict")
    with pytest.raises(ConfigError, match="budget must be at most 3"):
        validate_pipeline(yaml.safe_load(GOOD), host)


def test_hook_specframe_register_commands(host: PluginHost) -> None:
    mod = types.ModuleType("cli_plugin")

    @hookimpl
    def specframe_register_commands(cli):  # type: ignore[no-untyped-def]
        @cli.command(name="hello-test")
        def hello() -> None:
            click.echo("hello from a plugin")

    mod.specframe_register_commands = specframe_register_commands  # type: ignore[attr-defined]
    host.register(mod, "cli")
    group = click.Group()
    host.register_commands(group)
    assert "hello-test" in group.commands
