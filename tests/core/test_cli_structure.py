"""How the command line is put together: a fresh group per call holding the core's commands (added by
``make_cli``) and those of every plugin's ``specframe_register_commands`` hook, ``python -m specframe``, and no
private names imported across specframe's modules."""

from __future__ import annotations

import ast
import subprocess
import sys
import types
from pathlib import Path

import click
import pytest

from specframe import PluginHost, hookimpl
from specframe.cli import CORE_COMMANDS, make_cli, run_cli
from specframe.plugins import BUILTIN_PLUGIN, REGISTRATION_HOOKS

ROOT = Path(__file__).resolve().parents[2]


def _plugin_with_command(name: str) -> types.ModuleType:
    mod = types.ModuleType(f"cmd_{name}")

    @hookimpl
    def specframe_register_commands(cli):  # type: ignore[no-untyped-def]
        @cli.command(name=name)
        def hello() -> None:
            click.echo(f"hello from {name}")

    mod.specframe_register_commands = specframe_register_commands  # type: ignore[attr-defined]
    return mod


def test_each_call_builds_a_fresh_group(capsys: pytest.CaptureFixture[str]) -> None:
    with_plugin = PluginHost(autoload=False)
    with_plugin.register(_plugin_with_command("hello-once"), "once")
    assert run_cli(["hello-once"], host=with_plugin) == 0
    assert "hello from hello-once" in capsys.readouterr().out
    assert run_cli(["hello-once"], host=PluginHost(autoload=False)) == 2  # not left behind in a global group
    assert "No such command" in capsys.readouterr().err


def test_make_cli_adds_the_core_commands_and_the_builtin_plugin_registers_stages_only() -> None:
    host = PluginHost(autoload=False)
    group = make_cli(host)
    assert set(group.commands) == {c.name for c in CORE_COMMANDS}
    assert {"run", "bench", "report", "datasets", "schema", "validate", "plugins", "components"} <= set(group.commands)
    (builtin,) = [p for p in host.plugins() if p.name == BUILTIN_PLUGIN]
    assert "specframe_register_commands" not in builtin.hooks
    assert set(builtin.hooks) <= set(REGISTRATION_HOOKS.values())


@pytest.mark.parametrize("module", ["specframe", "specframe.cli"])
def test_python_dash_m_lists_every_command(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=120).stdout
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()}
    expected = set(make_cli(PluginHost()).commands)
    assert expected <= listed and {"run", "bench", "report", "demo"} <= listed


def test_schema_rejects_json_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["schema", "--json"], host=PluginHost(autoload=False)) == 2
    assert "No such option" in capsys.readouterr().err


def test_no_module_imports_a_private_name_from_another() -> None:
    offenders = []
    for path in sorted((ROOT / "specframe").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specframe"):
                offenders += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and a.name != "__version__"]
    assert offenders == []
