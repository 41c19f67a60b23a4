"""Hostile or damaged work dirs and data: no code runs, nothing is lost, every problem names its file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from specframe_smollm2.testing import tiny_recipe
from specframe_smollm2.training.dataset import load_sequences
from specframe_smollm2.training.trainer import LOCK, train

from specframe.errors import CheckpointError, SpecframeError
from specframe.locking import hold_lock


class _Exploit:
    """Unpickling this object would create ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _quiet(tmp_path: Path, target) -> dict:
    return {"target_dir": tmp_path, "target_model": target, "progress": False, "log": lambda m: None}


def _one_screen(exc: SpecframeError) -> str:
    text = exc.render()
    assert len(text.splitlines()) <= 6 and "Traceback" not in text
    return text


def test_crafted_state_pickle_runs_no_code(tmp_path, tiny_target, tiny_data) -> None:
    recipe = tiny_recipe("drafter", tmp_path, tiny_data, steps=2)
    work = Path(recipe.work_dir)
    work.mkdir(parents=True)
    marker = tmp_path / "MARKER"
    torch.save({"recipe_kind": "drafter", "step": 1, "payload": _Exploit(marker)}, work / "state.pt")
    with pytest.raises(CheckpointError, match="never unpickles") as info:
        train(recipe, **_quiet(tmp_path, tiny_target))
    assert not marker.exists()
    assert str(work / "state.pt") in _one_screen(info.value)


@pytest.mark.parametrize("damage", ["truncate", "not_a_dict", "wrong_module"])
def test_damaged_state_is_named(tmp_path, tiny_target, tiny_data, damage) -> None:
    recipe = tiny_recipe("drafter", tmp_path, tiny_data, steps=4)
    train(recipe, **_quiet(tmp_path, tiny_target), stop_after=3)
    state = Path(recipe.work_dir) / "state.pt"
    if damage == "truncate":
        state.write_bytes(state.read_bytes()[:500])
    elif damage == "not_a_dict":
        torch.save([1, 2, 3], state)
    else:
        torch.save({"recipe_kind": "drafter", "module": {"x": torch.ones(1)}, "step": 3}, state)
    with pytest.raises(CheckpointError) as info:
        train(recipe, **_quiet(tmp_path, tiny_target))
    assert str(state) in _one_screen(info.value)


def test_damaged_metrics_line_is_named_and_a_cut_last_line_is_dropped(tmp_path, tiny_target, tiny_data) -> None:
    recipe = tiny_recipe("drafter", tmp_path, tiny_data, steps=6)
    train(recipe, **_quiet(tmp_path, tiny_target), stop_after=3)
    metrics = Path(recipe.work_dir) / "metrics.jsonl"
    good = metrics.read_text()
    metrics.write_text(good + '{"step": 4, "lo')  # a write cut by a crash: dropped on resume
    assert train(recipe, **_quiet(tmp_path, tiny_target))["steps"] == 6
    assert all(json.loads(line) for line in metrics.read_text().splitlines())
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join([lines[0], "not json", *lines[1:]]) + "\n")
    with pytest.raises(CheckpointError, match="not a metrics entry") as info:
        train(recipe, **_quiet(tmp_path, tiny_target))
    assert info.value.where == f"{metrics}:2"
    _one_screen(info.value)


def test_final_evaluation_is_recorded_once(tmp_path, tiny_target, tiny_data) -> None:
    recipe = tiny_recipe("drafter", tmp_path, tiny_data, steps=4, eval={"every": 2, "seqs": 4, "anchors": 4})
    train(recipe, **_quiet(tmp_path, tiny_target))
    train(recipe, **_quiet(tmp_path, tiny_target))  # a finished run started again adds no line either
    entries = [json.loads(line) for line in (Path(recipe.work_dir) / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in entries if "eval_tau" in e] == [2, 4]


def test_a_second_run_on_the_same_work_dir_is_refused(tmp_path, tiny_target, tiny_data) -> None:
    recipe = tiny_recipe("drafter", tmp_path, tiny_data, steps=2)
    work = Path(recipe.work_dir)
    work.mkdir(parents=True)
    held = hold_lock(work / LOCK)  # the first run
    try:
        with pytest.raises(SpecframeError, match="another `specframe train` is using work_dir") as info:
            train(recipe, **_quiet(tmp_path, tiny_target))
        _one_screen(info.value)
        assert not (work / "state.pt").exists()
    finally:
        held.close()
    assert train(recipe, **_quiet(tmp_path, tiny_target))["steps"] == 2  # released: the run goes ahead


def test_export_and_state_get_ordinary_permissions(tmp_path, tiny_target, tiny_data) -> None:
    recipe = tiny_recipe("drafter", tmp_path, tiny_data, steps=2)
    old = os.umask(0o022)
    try:
        train(recipe, **_quiet(tmp_path, tiny_target))
    finally:
        os.umask(old)
    out = Path(recipe.output)
    assert out.stat().st_mode & 0o777 == 0o755
    assert {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()} == {"config.json": 0o644,
                                                                         "model.safetensors": 0o644,
                                                                         ".specframe-output.json": 0o644}
    work = Path(recipe.work_dir)
    assert (work / "state.pt").stat().st_mode & 0o777 == 0o644
    assert not [p.name for p in work.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("damage", ["truncate", "pickle", "missing_key", "ragged"])
def test_corrupt_data_shard_is_named(tmp_path, tiny_data, damage) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    shard = sorted(data.glob("shard-*.pt"))[1]
    marker = tmp_path / "MARKER"
    if damage == "truncate":
        shard.write_bytes(shard.read_bytes()[:300])
    elif damage == "pickle":
        torch.save({"ids": _Exploit(marker)}, shard)
    else:
        content = torch.load(shard, weights_only=True)
        if damage == "missing_key":
            del content["taps"]
        else:
            content["prompt_len"] = content["prompt_len"][:-1]
        torch.save(content, shard)
    with pytest.raises(CheckpointError, match="data shard") as info:
        load_sequences(data)
    assert str(shard) in _one_screen(info.value) and not marker.exists()


def test_a_second_data_generation_into_one_directory_is_refused(tmp_path) -> None:
    from specframe_smollm2.training.generate_data import generate_dataset

    out = tmp_path / "data"
    out.mkdir()
    held = hold_lock(out / ".lock")
    try:
        with pytest.raises(SpecframeError, match="another run is generating data"):
            generate_dataset(tmp_path / "no-model", out, ["p"], {"m": 1}, batch_size=1, max_new_tokens=1,
                             taps=(0,), topk=1)
    finally:
        held.close()
    assert not (out / "meta.json").exists()
