"""Sweep expansion: grids over dotted keys, their validation, and the methods they produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from specframe.bench import build_methods, expand_sweep, parse_cli_sweep, parse_sweep
from specframe.builtin.baseline import BASELINE_STAGES
from specframe.errors import ConfigError

from .toy_plugin import toy_host, write_pipeline


def test_grid_is_the_cartesian_product_in_key_order() -> None:
    points = expand_sweep(parse_sweep({"pruner.budget": [16, 32], "tree_builder.width": [4, 8, 12]}))
    assert len(points) == 6
    assert points[0].values == {"pruner.budget": 16, "tree_builder.width": 4}
    assert points[-1].values == {"pruner.budget": 32, "tree_builder.width": 12}
    assert points[1].overrides() == ["pruner.budget=16", "tree_builder.width=8"]
    assert points[1].label == "pruner.budget=16,tree_builder.width=8"


def test_no_sweep_is_one_empty_point_and_scalars_are_lists_of_one() -> None:
    assert [p.values for p in expand_sweep({})] == [{}]
    assert parse_sweep({"pruner.beta": -0.2}) == {"pruner.beta": [-0.2]}
    assert parse_sweep(None) == {}


def test_values_round_trip_through_overrides() -> None:
    point = expand_sweep({"a.b": ["x y", [1, 2], True, -0.15]})
    assert [p.overrides()[0] for p in point] == ['a.b="x y"', "a.b=[1, 2]", "a.b=true", "a.b=-0.15"]
    assert point[0].label == "a.b=x y"


@pytest.mark.parametrize("bad, match", [
    ([1, 2], "must map dotted keys"),
    ({"a..b": [1]}, "not a dotted field path"),
    ({"a.b": []}, "empty list"),
    ({"a.b": [1, 1]}, "repeats a value"),
])
def test_bad_sweeps_are_config_errors(bad: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_sweep(bad)


def test_cli_sweep_parsing() -> None:
    assert parse_cli_sweep(["pruner.budget=[16,32]", "tree_builder.width=8"]) == {
        "pruner.budget": [16, 32], "tree_builder.width": [8]}
    with pytest.raises(ConfigError, match="KEY="):
        parse_cli_sweep(["pruner.budget"])


def test_sweep_in_a_file_builds_one_method_per_point_on_one_target(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path / "p.yaml", extra="sweep:\n  drafter.depth: [1, 2, 3]\n  budget: [2, 8]\n")
    methods = build_methods([path], host=toy_host())
    assert [m.name for m in methods] == ["autoregressive"] + [f"toy-spec[drafter.depth={d},budget={b}]"
                                                   for d in (1, 2, 3) for b in (2, 8)]
    assert methods[0].baseline and methods[0].pipeline.stages.drafter.__class__.__name__ == "NoDrafter"
    target = methods[1].pipeline.target
    assert all(m.pipeline.target is target for m in methods)
    assert methods[3].pipeline.config.drafter.depth == 2 and methods[3].pipeline.config.budget == 2
    assert len({m.pipeline.config_hash for m in methods}) == len(methods)
    assert methods[4].sweep == {"drafter.depth": 2, "budget": 8} and methods[4].base_name == "toy-spec"


def test_cli_sweep_replaces_the_file_key_and_names_must_be_unique(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path / "p.yaml", extra="sweep: {drafter.depth: [1, 2]}\n")
    methods = build_methods([path], host=toy_host(), cli_sweep={"drafter.depth": [3]}, baseline_name=None)
    assert [m.name for m in methods] == ["toy-spec[drafter.depth=3]"]
    other = write_pipeline(tmp_path / "q.yaml")
    with pytest.raises(ConfigError, match="two methods are named 'toy-spec'"):
        build_methods([other, other], host=toy_host())


def test_methods_must_share_the_target(tmp_path: Path) -> None:
    a = write_pipeline(tmp_path / "a.yaml", name="a")
    b = tmp_path / "b.yaml"
    b.write_text(write_pipeline(tmp_path / "b0.yaml", name="b").read_text().replace("seed: 3", "seed: 4"))
    with pytest.raises(ConfigError, match="different target"):
        build_methods([a, b], host=toy_host())


def test_baseline_needs_its_components(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pipeline(tmp_path / "p.yaml")
    monkeypatch.setitem(BASELINE_STAGES, "tree_builder", {"type": "chain_not_installed"})
    with pytest.raises(ConfigError, match="cannot build the autoregressive baseline") as info:
        build_methods([path], host=toy_host())
    assert "--no-baseline" in info.value.hint
    assert [m.name for m in build_methods([path], host=toy_host(), baseline_name=None)] == ["toy-spec"]


def test_stages_are_shared_only_between_methods_with_the_same_drafter(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path / "p.yaml", extra="sweep:\n  drafter.depth: [1, 2]\n  budget: [2, 8]\n")
    _, d1_b2, d1_b8, d2_b2, _ = build_methods([path], host=toy_host())
    assert d1_b8.pipeline.stages.drafter is d1_b2.pipeline.stages.drafter  # budget sweep: drafter built once
    assert d2_b2.pipeline.stages.drafter is not d1_b8.pipeline.stages.drafter
    assert d2_b2.pipeline.stages.corrector is not d1_b8.pipeline.stages.corrector  # may depend on the drafter


def test_a_bad_sweep_value_is_named_as_the_sweep_point_it_is(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path / "toy.yaml", extra="sweep: {budget: [4, 0]}\n")
    with pytest.raises(ConfigError) as info:
        build_methods([path], host=toy_host(), cli_sweep=parse_cli_sweep(["drafter.depth=[2]"]))
    shown = info.value.render()
    assert shown.startswith(f"{path}:7 (sweep: budget=0): budget:") and "--set" not in shown
    assert shown.count("got 0") == 1  # the validator's own "got 0", not repeated
    with pytest.raises(ConfigError) as info:
        build_methods([path], host=toy_host(), cli_sweep=parse_cli_sweep(["budget=[0]"]))
    assert info.value.render().startswith("--sweep budget=0: budget:")
