"""Pipeline files: round-trip, extends, overrides, and a clear error for every kind of bad input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from specframe import PluginHost
from specframe.cli import run_cli
from specframe.config import load_pipeline_config, validate_pipeline
from specframe.errors import ConfigError

from . import fake_components

GOOD = """\
name: fake-chain
target: {type: fake_target, vocab: 8}
sampling: {temperature: 0.0}
budget: 4
drafter: {type: repeat, depth: 3}
corrector: {type: marginal}
tree_builder: {type: spine, width: 1}
pruner: {type: keep_all}
verifier: {type: auto}
"""


@pytest.fixture
def host() -> PluginHost:
    h = PluginHost(autoload=False)
    h.register(fake_components, "fake", distribution="specframe-fake", version="0.0.1")
    return h


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(path: Path, host: PluginHost, *overrides: str):  # type: ignore[no-untyped-def]
    return load_pipeline_config(str(path), overrides, host=host)[0]


def test_round_trip_dump_reload_equal(tmp_path: Path, host: PluginHost) -> None:
    config = load(write(tmp_path, "p.yaml", GOOD), host)
    assert config.verifier.type == "argmax"  # auto resolved to the greedy-only verifier at T = 0
    dumped = write(tmp_path, "dump.yaml", yaml.safe_dump(config.model_dump(mode="json")))
    assert load(dumped, host) == config


def test_extends_and_set_overrides(tmp_path: Path, host: PluginHost) -> None:
    write(tmp_path, "base.yaml", GOOD)
    child = write(tmp_path, "child.yaml", "extends: base.yaml\nbudget: 2\ndrafter: {depth: 5}\n")
    config = load(child, host, "pruner.beta=-0.5", "name=ablation")
    assert (config.budget, config.drafter.depth, config.pruner.beta, config.name) == (2, 5, -0.5, "ablation")


def test_changing_a_stage_type_replaces_its_fields(tmp_path: Path, host: PluginHost) -> None:
    base = write(tmp_path, "base.yaml", GOOD.replace("{type: spine, width: 1}", "{type: spine, width: 3}"))
    config = load(base, host, "tree_builder.type=sampled_spine", "sampling.temperature=1.0",
                  "verifier.type=lossy", "allow_lossy=true")
    assert config.tree_builder.type == "sampled_spine"


def test_env_variables_expand(tmp_path: Path, host: PluginHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECFRAME_TEST_NAME", "from-env")
    config = load(write(tmp_path, "p.yaml", GOOD.replace("fake-chain", "${SPECFRAME_TEST_NAME}")), host)
    assert config.name == "from-env"


BAD_CASES = {
    "unknown_type": (GOOD.replace("type: spine", "type: spien"),
                     ["unknown tree_builder type 'spien'", "did you mean 'spine'", "p.yaml:7", "available"]),
    "misspelt_field": (GOOD.replace("width: 1", "widht: 1"),
                       ["unknown field 'tree_builder.widht'", "did you mean 'width'", "p.yaml:7"]),
    "wrong_type": (GOOD.replace("budget: 4", "budget: many"), ["budget", "integer", "'many'", "p.yaml:4"]),
    "missing_stage": (GOOD.replace("drafter: {type: repeat, depth: 3}\n", ""), ["missing required stage 'drafter'"]),
    "malformed_yaml": (GOOD.replace("budget: 4", "budget: [4"), ["malformed YAML", "p.yaml:"]),
    "bad_value": (GOOD.replace("beta", "x").replace("{type: keep_all}", "{type: keep_all, beta: 0.5}"),
                  ["pruner.beta", "beta must be <= 0"]),
    "contradictory": (GOOD.replace("temperature: 0.0", "temperature: 0.7").replace("type: auto", "type: argmax"),
                      ["contradictory stages", "argmax", "temperature 0"]),
    "lossy_without_consent": (GOOD.replace("type: auto", "type: lossy"), ["not lossless", "allow_lossy"]),
    "regime_mismatch": (GOOD.replace("type: spine, width: 1", "type: sampled_spine"),
                        ["no lossless verifier for sampled trees"]),
    "not_a_mapping": ("- a\n- b\n", ["must be a YAML mapping"]),
    "stage_without_type": (GOOD.replace("{type: keep_all}", "{beta: 0}"), ["'pruner' has no `type:`"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_is_one_clear_error(case: str, tmp_path: Path, host: PluginHost,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    text, expected = BAD_CASES[case]
    path = write(tmp_path, "p.yaml", text)
    with pytest.raises(ConfigError) as exc:
        load(path, host)
    for fragment in expected:
        assert fragment in str(exc.value), (fragment, str(exc.value))
    # Through the CLI: status 2, the same message, no traceback, fits on a screen.
    assert run_cli(["validate", str(path)], host=host) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and expected[0] in err and len(err.splitlines()) <= 25


def test_extends_cycle_and_missing_base(tmp_path: Path, host: PluginHost) -> None:
    write(tmp_path, "a.yaml", "extends: b.yaml\n")
    write(tmp_path, "b.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load(tmp_path / "a.yaml", host)
    missing = write(tmp_path, "m.yaml", "extends: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="missing file") as exc:
        load(missing, host)
    assert "m.yaml:1" in str(exc.value)


def test_missing_pipeline_file(tmp_path: Path, host: PluginHost) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "absent.yaml", host)


def test_set_path_that_does_not_exist(tmp_path: Path, host: PluginHost) -> None:
    path = write(tmp_path, "p.yaml", GOOD)
    with pytest.raises(ConfigError) as exc:
        load(path, host, "tree_builder.depht=3")
    assert "unknown field 'tree_builder.depht'" in str(exc.value) and "--set tree_builder.depht=3" in str(exc.value)
    with pytest.raises(ConfigError, match="is a value"):
        load(path, host, "budget.size=3")
    with pytest.raises(ConfigError, match=r"key\.path=value"):
        load(path, host, "budget")


def test_in_memory_dict_validation(host: PluginHost) -> None:
    data = yaml.safe_load(GOOD)
    data.pop("target")
    with pytest.raises(ConfigError, match="missing required stage 'target'"):
        validate_pipeline(data, host)
    assert validate_pipeline(data, host, has_target_object=True).target is None


def test_env_default_and_unset_placeholder(tmp_path: Path, host: PluginHost) -> None:
    from specframe.config.loader import expand_env, unresolved_variables

    assert expand_env({"a": "${SPECFRAME_SURELY_UNSET:-/x}/y"}) == {"a": "/x/y"}
    left = expand_env({"a": ["${SPECFRAME_SURELY_UNSET}"]})
    assert unresolved_variables(left) == [("a[0]", "SPECFRAME_SURELY_UNSET")]


def test_sampled_trees_need_prefix_keeping_pruners_and_tree_capable_verifiers(
        specframe_installed_host: PluginHost) -> None:
    base = {"target": {"type": "hf", "model": "/nowhere"}, "sampling": {"temperature": 1.0},
            "drafter": {"type": "ngram"}, "tree_builder": {"type": "sampled_tree"}}
    with pytest.raises(ConfigError, match="may drop a sampled sibling"):
        validate_pipeline({**base, "pruner": {"type": "deferred_topb"}, "verifier": {"type": "tree_rejection"}},
                          specframe_installed_host)
    with pytest.raises(ConfigError, match="handles chains only"):
        validate_pipeline({**base, "verifier": {"type": "chain_rejection"}}, specframe_installed_host)
    ok = validate_pipeline({**base, "verifier": {"type": "tree_rejection"}}, specframe_installed_host)
    assert ok.pruner.type == "none"
    assert validate_pipeline({**base, "tree_builder": {"type": "sampled_chain"}},
                             specframe_installed_host).verifier.type == "chain_rejection"
    assert validate_pipeline(base, specframe_installed_host).verifier.type == "tree_rejection"
    chain = validate_pipeline({**base, "tree_builder": {"type": "chain"}}, specframe_installed_host)
    assert chain.verifier.type == "walk"
