"""Model cards list every training stage with its steps, held-out τ, data and CPU time."""

from __future__ import annotations

import json

import yaml
from specframe_smollm2.testing import tiny_recipe
from specframe_smollm2.training.model_card import write_model_card
from specframe_smollm2.training.trainer import train


def test_two_stage_card(tmp_path, tiny_target, tiny_data) -> None:
    quiet = {"target_dir": tmp_path, "target_model": tiny_target, "progress": False, "log": lambda m: None}
    first = tiny_recipe("drafter", tmp_path / "s1", tiny_data, steps=2)
    second = tiny_recipe("drafter", tmp_path / "s2", tiny_data, steps=3, init_from=first.output,
                         output=first.output)
    paths = []
    for i, recipe in enumerate((first, second)):
        train(recipe, **quiet)
        path = tmp_path / f"stage{i + 1}.yaml"
        path.write_text(yaml.safe_dump(json.loads(recipe.model_dump_json())))
        paths.append((path, recipe.work_dir))
    card = write_model_card(tmp_path / "s1" / "out-drafter", [(p, type(p)(w)) for p, w in paths]).read_text()
    assert "### Stage 1" in card and "### Stage 2" in card
    assert f"warm-started from `{first.output}`" in card
    assert "2 steps" in card and "3 steps" in card
    assert "shards written outside `specframe train`" in card
    assert "training: " in card and "CPU-hours" in card

    # A later session without the first stage's run directory keeps the card's record of that stage.
    (type(paths[0][0])(first.work_dir) / "summary.json").unlink()
    again = write_model_card(tmp_path / "s1" / "out-drafter", [(p, type(p)(w)) for p, w in paths]).read_text()
    assert again == card
