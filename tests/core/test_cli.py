"""The CLI against the installed first-party plugins: components, plugins, schema, validate."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specframe import PluginHost
from specframe.cli import run_cli
from specframe.registry import STAGE_KINDS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.yaml") if "broken" not in p.parts)
FIRST_PARTY = {re.search(r'^name = "([^"]+)"', p.read_text(encoding="utf-8"), re.M).group(1)  # type: ignore[union-attr]
               for p in (ROOT / "plugins").glob("*/pyproject.toml")}


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> object:
    assert run_cli([*args, "--json"], host=PluginHost()) == 0
    return json.loads(capsys.readouterr().out)


def test_components_json_lists_every_stage_kind(capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "components")
    assert set(data) == set(STAGE_KINDS)
    for kind in STAGE_KINDS:
        assert data[kind], f"no {kind} registered"
        for item in data[kind]:
            assert item["summary"] and item["distribution"] in {*FIRST_PARTY, "specframe"} and "capabilities" in item


def test_plugins_json_shows_first_party_distributions_with_versions(capsys: pytest.CaptureFixture[str]) -> None:
    data = cli_json(capsys, "plugins")
    by_dist = {p["distribution"]: p for p in data}
    assert {"specframe-trees", "specframe-verifiers", "specframe-hf", "specframe-diffusion"} <= FIRST_PARTY
    assert FIRST_PARTY <= set(by_dist)
    for dist in FIRST_PARTY:  # each adds stages, or commands (specframe-vllm adds `vllm-export` and no stage)
        entry = by_dist[dist]
        assert entry["version"] and entry["hooks"]
        assert entry["components"] or entry["hooks"] == ["specframe_register_commands"], entry


def test_schema_includes_plugin_components(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["schema"], host=PluginHost()) == 0
    text = capsys.readouterr().out
    schema = json.loads(text)
    assert {"drafter", "tree_builder", "pruner", "verifier"} <= set(schema["properties"])
    for name in ("dartree", "deferred_topb", "ngram", "greedy"):
        assert f'"{name}"' in text


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_example_pipelines_validate(path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Examples validate once the variables they document are set (the Qwen3 ones name local model copies)."""
    for folder in {path.parent, path.parent.parent}:
        for other in folder.glob("*.yaml"):
            for var in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", other.read_text(encoding="utf-8")):
                monkeypatch.setenv(var, f"/models/{var.lower()}")
    assert run_cli(["validate", str(path)], host=PluginHost()) == 0, capsys.readouterr().err


def test_validate_refuses_an_unset_variable_as_run_does(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QWEN3_4B_DIR", raising=False)
    monkeypatch.setenv("DFLASH_4B_DIR", "/models/dflash")
    path = ROOT / "examples/qwen3/4b/dflash-chain.yaml"
    assert run_cli(["validate", str(path)], host=PluginHost()) == 2
    err = capsys.readouterr().err
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("target:"))
    assert "QWEN3_4B_DIR" in err and f"dflash-chain.yaml:{line}" in err and "not set" in err


def test_broken_example_is_rejected_with_line_and_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["validate", str(ROOT / "examples/broken/misspelt-field.yaml")], host=PluginHost()) == 2
    err = capsys.readouterr().err
    assert "misspelt-field.yaml:4" in err and "num_speculativ_tokens" in err and "did you mean" in err
    assert "Traceback" not in err
