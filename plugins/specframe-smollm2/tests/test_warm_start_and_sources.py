"""Warm starts from published checkpoints, several data sections in one run, and prompts read from files."""

from __future__ import annotations

import json

import pytest
import torch
from specframe_smollm2.testing import tiny_recipe, write_tiny_shards
from specframe_smollm2.training.dataset import load_sequences, make_batch
from specframe_smollm2.training.prompt_files import PromptFile, file_prompts
from specframe_smollm2.training.prompts import recipe_prompts, training_prompts
from specframe_smollm2.training.recipe import Recipe
from specframe_smollm2.training.trainer import build_objective, train

from specframe.errors import CheckpointError, ConfigError
from specframe.tensor_files import load_tensor_file

QUIET = {"progress": False, "log": lambda m: None}


def _drafter_outputs(objective, batch) -> torch.Tensor:
    with torch.no_grad():
        return objective.features(batch)


def test_warm_started_drafter_reproduces_the_exported_one(tmp_path, tiny_target, tiny_data) -> None:
    first = tiny_recipe("drafter", tmp_path / "a", tiny_data, steps=4)
    train(first, target_dir=tmp_path, target_model=tiny_target, **QUIET)
    seqs = load_sequences(tiny_data)
    batch = make_batch(seqs[:4], 4, 4, torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(5)
    fresh, _ = build_objective(tiny_recipe("drafter", tmp_path / "b", tiny_data), tiny_target, seqs, gen)
    warm_recipe = tiny_recipe("drafter", tmp_path / "b", tiny_data, init_from=first.output)
    warm, _ = build_objective(warm_recipe, tiny_target, seqs, torch.Generator().manual_seed(5))
    exported, _ = build_objective(tiny_recipe("drafter", tmp_path / "c", tiny_data), tiny_target, seqs,
                                   torch.Generator().manual_seed(5))
    state = load_tensor_file(tmp_path / "a" / "work-drafter" / "state.pt")
    exported.trainable.load_state_dict(state["module"])
    exported.tap_scale = state["tap_scale"]
    want = _drafter_outputs(exported, batch)
    assert torch.allclose(_drafter_outputs(warm, batch), want, atol=0.05, rtol=0.05)  # bf16 checkpoint rounding
    assert not torch.allclose(_drafter_outputs(fresh, batch), want, atol=0.05, rtol=0.05)


def test_warm_start_from_another_shape_is_refused(tmp_path, tiny_target, tiny_data) -> None:
    train(tiny_recipe("drafter", tmp_path, tiny_data, steps=1), target_dir=tmp_path, target_model=tiny_target,
          **QUIET)
    other = tiny_recipe("drafter", tmp_path / "o", tiny_data, steps=1, init_from=str(tmp_path / "out-drafter"),
                        drafter=dict(block_size=3, num_layers=2, init_layers=(2, 3), mask_token_id=1))
    with pytest.raises(CheckpointError, match="block_size 4 \\(recipe: 3\\)"):
        train(other, target_dir=tmp_path, target_model=tiny_target, **QUIET)


def test_head_warm_start_continues_the_head(tmp_path, tiny_target, tiny_data) -> None:
    train(tiny_recipe("drafter", tmp_path, tiny_data, steps=1), target_dir=tmp_path, target_model=tiny_target,
          **QUIET)
    base = tmp_path / "out-drafter"
    train(tiny_recipe("ar_head", tmp_path, tiny_data, steps=3, base=base), target_dir=tmp_path,
          target_model=tiny_target, **QUIET)
    seqs = load_sequences(tiny_data)
    warm = tiny_recipe("ar_head", tmp_path / "w", tiny_data, base=base, init_from=str(tmp_path / "out-ar_head"))
    objective, _ = build_objective(warm, tiny_target, seqs, torch.Generator().manual_seed(0))
    assert float(objective.head.embed_proj[2].weight.detach().abs().sum()) > 0  # a fresh head starts at zero here
    wrong = tiny_recipe("ar_head", tmp_path / "x", tiny_data, base=base, init_from=str(tmp_path / "out-ar_head"),
                        head=dict(gru_hidden_dim=8, emb_dim=8, markov_rank=8))
    with pytest.raises(CheckpointError, match="does not match the recipe's head"):
        build_objective(wrong, tiny_target, seqs, torch.Generator().manual_seed(0))


def test_included_sections_are_trained_on_and_held_out_too(tmp_path, tiny_target, tiny_data) -> None:
    other = tmp_path / "other-data"
    write_tiny_shards(tiny_target, other, num_seqs=16, taps=(0, 1, 2), seed=3)
    fields = tiny_recipe("drafter", tmp_path, tiny_data, steps=1).model_dump()
    fields["data"]["include"] = [dict(dir=str(other), taps=(0, 1, 2), heldout_every=4)]
    recipe = Recipe.model_validate(fields)
    logs: list[str] = []
    summary = train(recipe, target_dir=tmp_path, target_model=tiny_target, progress=False, log=logs.append)
    assert summary["train_sequences"] == 18 + 12 and summary["heldout_sequences"] == 6 + 4
    assert str(other) in logs[0]


def test_prompt_files_are_filtered_formatted_and_shuffled_in(tmp_path) -> None:
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": f"task {i}", "tests": [f"t{i}a", f"t{i}b"]}) + "\n"
                           for i in range(10)))
    pf = PromptFile(path=str(src), template="{text}\n{tests}", id_field="id", id_range=(3, 6))
    assert file_prompts(pf) == [f"task {i}\nt{i}a\nt{i}b" for i in range(3, 7)]
    mixed = recipe_prompts(5, seed=0, mix={"math": 1.0}, files=[pf])
    assert sorted(mixed) == sorted(training_prompts(5, seed=0, mix={"math": 1.0}) + file_prompts(pf))
    assert mixed == recipe_prompts(5, seed=0, mix={"math": 1.0}, files=[pf])
    assert recipe_prompts(5, seed=0, mix={"math": 1.0}) == training_prompts(5, seed=0, mix={"math": 1.0})


@pytest.mark.parametrize("template, id_range, message", [
    ("{text} {answer}", None, r"field\(s\) \['answer'\]"),
    ("{text}", (100, 200), "gives no prompts"),
    ("{text", None, "is not a format string"),
    ("{text:d}", None, "fails"),
    ("{text}", (0, 5), "needs the integer field 'name'"),
])
def test_prompt_file_problems_are_explained(tmp_path, template, id_range, message) -> None:
    src = tmp_path / "tasks.jsonl"
    src.write_text(json.dumps({"id": 1, "text": "x", "name": "one"}) + "\n")
    with pytest.raises(ConfigError, match=message):
        file_prompts(PromptFile(path=str(src), template=template, id_range=id_range,
                                id_field="name" if "integer" in message else "id"))
    with pytest.raises(ConfigError, match="not found"):
        file_prompts(PromptFile(path=str(tmp_path / "missing.jsonl"), template="{text}"))


def test_a_resumed_warm_start_does_not_read_init_from_again(tmp_path, tiny_target, tiny_data) -> None:
    import shutil

    quiet = {"target_dir": tmp_path, "target_model": tiny_target, "progress": False, "log": lambda m: None}
    first = tiny_recipe("drafter", tmp_path / "a", tiny_data, steps=1)
    train(first, **quiet)
    second = tiny_recipe("drafter", tmp_path / "b", tiny_data, steps=6, init_from=first.output)
    train(second, **quiet, stop_after=3)
    shutil.rmtree(first.output)  # the resumed run restores its own state
    assert train(second, **quiet)["steps"] == 6
