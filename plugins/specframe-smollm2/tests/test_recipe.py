"""Recipe validation: unknown fields and bad values are ConfigErrors naming the field; overrides merge deeply."""

from __future__ import annotations

from pathlib import Path

import pytest
from specframe_smollm2.commands import parse_overrides
from specframe_smollm2.training.recipe import load_recipe

from specframe.cli import run_cli
from specframe.errors import ConfigError
from specframe.plugins import PluginHost

RECIPES = Path(__file__).resolve().parents[3] / "recipes" / "smollm2"
BASE = "kind: drafter\nname: t\noutput: out\nwork_dir: work\n"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["drafter.yaml", "drafter-stage2.yaml", "drafter-random-init.yaml", "ar-head.yaml",
                                  "markov-head.yaml", "markov-head-vanilla.yaml"])
def test_shipped_recipes_validate(name) -> None:
    recipe = load_recipe(RECIPES / name)
    assert recipe.data.taps == (1, 7, 14, 20, 27)


@pytest.mark.parametrize("extra, field", [
    ("learning_rate: 0.1\n", "learning_rate"),
    ("optim: {stepz: 3}\n", "optim.stepz"),
    ("drafter: {block_size: 8, shift: true}\n", "drafter.shift"),
])
def test_unknown_field_is_named(tmp_path, extra, field) -> None:
    with pytest.raises(ConfigError, match=f"unknown field '{field}'"):
        load_recipe(_write(tmp_path, BASE + extra))


@pytest.mark.parametrize("extra, text", [
    ("optim: {steps: 0}\n", "optim.steps"),
    ("drafter: {num_layers: 2, init_layers: [29]}\n", "init_layers lists 1 layers"),
    ("data: {mix: {poetry: 1.0}}\n", "unknown prompt kind"),
    ("kind: ar_head\n", "needs `base:`"),
    ("seed: -1\n", "seed"),
    (f"seed: {2**63 - 1}\n", "seed"),  # seed + 1 seeds the batch order
    ("eval: {seed: 18446744073709551616}\n", "eval.seed"),
    ("data: {seed: -4}\n", "data.seed"),
])
def test_bad_values_are_explained(tmp_path, extra, text) -> None:
    base = BASE.replace("kind: drafter\n", "") if extra.startswith("kind:") else BASE
    with pytest.raises(ConfigError, match=text):
        load_recipe(_write(tmp_path, base + extra))


@pytest.mark.parametrize("text, message", [
    (BASE + "name: u\n", r"duplicate key 'name' \(lines 2 and 5\)"),
    (BASE + "optim: {steps: 3, steps: 4}\n", "duplicate key 'steps'"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcd", "bcde", strict=True)), "expands to more"),
    (BASE + 'target: "\\ud800"\n', "surrogate"),
])
def test_hostile_recipe_files_are_refused(tmp_path, text, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_recipe(_write(tmp_path, text))


def test_recipe_file_encoding_and_kind_are_checked(tmp_path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_bytes(BASE.encode("utf-16"))
    with pytest.raises(ConfigError, match="UTF-16"):
        load_recipe(path)
    with pytest.raises(ConfigError, match="is a directory"):
        load_recipe(tmp_path)
    with pytest.raises(ConfigError, match="--set"):
        parse_overrides(("optim.steps=[1",))


def test_overrides_merge_into_sections(tmp_path) -> None:
    path = _write(tmp_path, BASE + "optim: {steps: 10, lr: 0.01}\n")
    recipe = load_recipe(path, parse_overrides(("optim.steps=20", "seed=7")))
    assert recipe.optim.steps == 20 and recipe.optim.lr == 0.01 and recipe.seed == 7


def test_cli_reports_unknown_field_without_traceback(tmp_path, capsys) -> None:
    path = _write(tmp_path, BASE + "optim: {stepz: 3}\n")
    assert run_cli(["train", str(path)], host=PluginHost()) == 2
    err = capsys.readouterr().err
    assert "optim.stepz" in err and "Traceback" not in err


def test_extends_merges_sections_and_refuses_cycles(tmp_path) -> None:
    (tmp_path / "base.yaml").write_text(BASE + "optim: {steps: 10, lr: 0.01}\ndata: {seed: 4}\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nname: child\noptim: {steps: 30}\n")
    recipe = load_recipe(child)
    assert (recipe.name, recipe.optim.steps, recipe.optim.lr, recipe.data.seed) == ("child", 30, 0.01, 4)
    (tmp_path / "base.yaml").write_text(BASE + "extends: child.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_recipe(child)
    child.write_text("extends: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="names no file"):
        load_recipe(child)


@pytest.mark.parametrize("item, text", [
    ("optim.steps=[1,", "malformed YAML"),
    ("name='unterminated", "malformed YAML"),
    ("optim.steps", "not KEY=VALUE"),
    ("=5", "not a dotted field path"),
    ("optim..steps=5", "not a dotted field path"),
])
def test_malformed_set_is_one_screen(tmp_path, capsys, item, text) -> None:
    path = _write(tmp_path, BASE)
    assert run_cli(["train", str(path), "--set", item], host=PluginHost()) == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err


def test_set_of_a_field_inside_a_value_is_refused() -> None:
    with pytest.raises(ConfigError, match="was set to a value"):
        parse_overrides(("optim=3", "optim.steps=5"))


@pytest.mark.parametrize("base, text", [
    ("kind: drafter\noptim: {steps: [1,\n", "malformed YAML"),
    (b"kind: drafter\nname: \xff\xfe\n", "not UTF-8 text"),
    ("- a\n- b\n", "must hold a mapping"),
])
def test_malformed_extends_base_names_the_base(tmp_path, capsys, base, text) -> None:
    base_path = tmp_path / "base.yaml"
    if isinstance(base, bytes):
        base_path.write_bytes(base)
    else:
        base_path.write_text(base)
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nname: child\n")
    with pytest.raises(ConfigError, match=text) as info:
        load_recipe(child)
    assert "base.yaml" in info.value.render()
    assert run_cli(["train", str(child)], host=PluginHost()) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_extends_must_be_one_path(tmp_path) -> None:
    child = _write(tmp_path, "extends: [a.yaml, b.yaml]\n" + BASE)
    with pytest.raises(ConfigError, match="must be one recipe path"):
        load_recipe(child)


@pytest.mark.parametrize("field", ["output", "work_dir", "data.dir"])
def test_a_file_where_the_run_writes_a_directory_is_named(tmp_path, capsys, field) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("keep me")
    # No target and no data, so a run that got past the check would stop at once instead of generating data.
    text = BASE + f"target: '{tmp_path / 'no-target'}'\ndata: {{dir: '{tmp_path / 'no-data'}'}}\n"
    path = _write(tmp_path, text.replace(str(tmp_path / "no-data"), str(blocker)) if field == "data.dir" else text)
    args = ["train", str(path)] + ([] if field == "data.dir" else ["--set", f"{field}={blocker}"])
    assert run_cli(args, host=PluginHost()) == 2
    err = capsys.readouterr().err
    assert field in err and "not a directory" in err and "Traceback" not in err
    assert blocker.read_text() == "keep me"


@pytest.mark.parametrize("clash", ["target", "base", "data.dir"])
def test_output_that_is_an_input_is_refused(tmp_path, capsys, clash) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "model.safetensors").write_text("precious")
    (shared / "config.json").write_text("{}")  # looks like a checkpoint, so only the clash can refuse it
    fields = {"target": tmp_path / "no-target", "data.dir": tmp_path / "no-data", "work_dir": tmp_path / "work"}
    fields[clash] = shared
    text = (f"kind: {'ar_head' if clash == 'base' else 'drafter'}\nname: t\noutput: '{shared}'\n"
            f"work_dir: '{fields['work_dir']}'\ntarget: '{fields['target']}'\ndata: {{dir: '{fields['data.dir']}'}}\n"
            + (f"base: '{shared}'\n" if clash == "base" else ""))
    assert run_cli(["train", str(_write(tmp_path, text))], host=PluginHost()) == 2
    err = capsys.readouterr().err
    assert "the export would overwrite it" in err and "Traceback" not in err
    assert (shared / "model.safetensors").read_text() == "precious"


def test_output_into_a_directory_of_other_files_is_refused(tmp_path, capsys) -> None:
    out = tmp_path / "documents"
    out.mkdir()
    (out / "notes.safetensors").write_text("keep me")
    text = (f"kind: drafter\nname: t\noutput: '{out}'\nwork_dir: '{tmp_path / 'work'}'\n"
            f"target: '{tmp_path / 'no-target'}'\ndata: {{dir: '{tmp_path / 'no-data'}'}}\n")
    assert run_cli(["train", str(_write(tmp_path, text))], host=PluginHost()) == 2
    assert "that no earlier `train drafter` wrote" in capsys.readouterr().err.replace("\n", " ")
    assert (out / "notes.safetensors").read_text() == "keep me"
