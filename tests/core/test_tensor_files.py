"""The one tensor loader: no unpickled code, no weight file outside its directory, damaged files named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from specframe.errors import CheckpointError
from specframe.tensor_files import (
    INDEX_FILE,
    check_model_directory,
    load_tensor_file,
    safetensors_key_files,
    save_tensor_file,
)


class _Exploit:
    """Unpickling this object would run ``os.system('touch MARKER')``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _one_screen(exc: CheckpointError) -> str:
    text = exc.render()
    assert len(text.splitlines()) <= 6 and "Traceback" not in text
    return text


def test_crafted_pickle_runs_no_code_and_is_named(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    path = tmp_path / "state.pt"
    torch.save({"step": 3, "evil": _Exploit(marker)}, path)
    with pytest.raises(CheckpointError, match="never unpickles") as info:
        load_tensor_file(path, what="training state")
    assert not marker.exists()
    assert str(path) in _one_screen(info.value)


@pytest.mark.parametrize("cut", [0, 10, 200])
def test_truncated_or_empty_tensor_file_is_named(tmp_path: Path, cut: int) -> None:
    whole = tmp_path / "whole.pt"
    torch.save({"x": torch.arange(1000)}, whole)
    path = tmp_path / "shard-00000.pt"
    path.write_bytes(whole.read_bytes()[:cut])
    with pytest.raises(CheckpointError, match="truncated or corrupt") as info:
        load_tensor_file(path, what="data shard")
    assert str(path) in _one_screen(info.value)


def test_saved_state_round_trips_with_plain_values(tmp_path: Path) -> None:
    module = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(module.parameters())
    module(torch.ones(1, 3)).sum().backward()
    opt.step()
    state = {"module": module.state_dict(), "optimizer": opt.state_dict(),
             "gen": torch.Generator().manual_seed(1).get_state(), "step": 4, "kind": "drafter"}
    path = tmp_path / "state.pt"
    save_tensor_file(state, path)
    back = load_tensor_file(path)
    assert back["step"] == 4 and torch.equal(back["gen"], state["gen"])
    torch.optim.AdamW(module.parameters()).load_state_dict(back["optimizer"])


def test_save_is_atomic_and_gets_an_ordinary_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "state.pt"
        save_tensor_file({"a": torch.ones(2)}, path)
        save_tensor_file({"a": torch.zeros(2)}, path)
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pt"]  # no temporary left behind
    assert torch.equal(load_tensor_file(path)["a"], torch.zeros(2))


def _weights_dir(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    save_file({"a": torch.ones(4)}, str(directory / "model-1.safetensors"))
    save_file({"b": torch.ones(2)}, str(directory / "model-2.safetensors"))
    (directory / "config.json").write_text("{}")
    return directory


def _index(directory: Path, weight_map: object) -> None:
    (directory / INDEX_FILE).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def test_sharded_index_maps_keys_to_files(tmp_path: Path) -> None:
    ckpt = _weights_dir(tmp_path / "ckpt")
    _index(ckpt, {"a": "model-1.safetensors", "b": "model-2.safetensors"})
    assert {k: p.name for k, p in safetensors_key_files(ckpt).items()} == {"a": "model-1.safetensors",
                                                                           "b": "model-2.safetensors"}


@pytest.mark.parametrize("escape", ["../outside.safetensors", "ABSOLUTE", "link.safetensors"])
def test_shard_outside_the_directory_is_refused(tmp_path: Path, escape: str) -> None:
    ckpt = _weights_dir(tmp_path / "ckpt")
    outside = tmp_path / "outside.safetensors"
    save_file({"b": torch.ones(2)}, str(outside))
    if escape == "ABSOLUTE":
        escape = str(outside)
    if escape == "link.safetensors":
        (ckpt / escape).symlink_to(outside)
    _index(ckpt, {"a": "model-1.safetensors", "b": escape})
    with pytest.raises(CheckpointError, match="outside the checkpoint directory") as info:
        safetensors_key_files(ckpt)
    _one_screen(info.value)


def test_symlinked_single_file_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"a": torch.ones(2)}, str(tmp_path / "secret.safetensors"))
    (ckpt / "model.safetensors").symlink_to(tmp_path / "secret.safetensors")
    with pytest.raises(CheckpointError, match="outside the checkpoint directory"):
        safetensors_key_files(ckpt)


@pytest.mark.parametrize("weight_map, message", [
    (["model-1.safetensors"], "weight_map' is list"),
    ("model-1.safetensors", "weight_map' is str"),
    (None, "weight_map' is missing"),
    ({"a": 3}, "values must be file names"),
    ({"a": ["model-1.safetensors"]}, "values must be file names"),
    ({"a": "model-1.safetensors", "zzz": "model-1.safetensors"}, "does not contain zzz"),
    ({"a": "pytorch_model.bin"}, "missing"),
])
def test_malformed_weight_map_is_a_clear_error(tmp_path: Path, weight_map: object, message: str) -> None:
    ckpt = _weights_dir(tmp_path / "ckpt")
    _index(ckpt, weight_map)
    with pytest.raises(CheckpointError, match=message) as info:
        safetensors_key_files(ckpt)
    _one_screen(info.value)


def test_index_that_is_not_json_names_the_line(tmp_path: Path) -> None:
    ckpt = _weights_dir(tmp_path / "ckpt")
    (ckpt / INDEX_FILE).write_text('{\n  "weight_map": {\n')
    with pytest.raises(CheckpointError, match="not valid JSON") as info:
        safetensors_key_files(ckpt)
    assert f"{INDEX_FILE}:3" in info.value.where


def test_truncated_safetensors_is_named(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"a": torch.ones(1000)}, str(ckpt / "model.safetensors"))
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors") as info:
        safetensors_key_files(ckpt)
    assert "truncated" in info.value.hint


def test_pickle_only_weights_are_refused_with_a_conversion_hint(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    torch.save({"w": _Exploit(marker)}, ckpt / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="only pickle weights") as info:
        check_model_directory(ckpt)
    assert "safe_serialization=True" in info.value.hint and not marker.exists()


@pytest.mark.parametrize("text, message", [("{'a': 1", "not valid JSON"), ("[1, 2]", "JSON list"),
                                           ("", "not valid JSON"), ("\xff\xfe", "not valid JSON")])
def test_config_json_must_be_a_json_object(tmp_path: Path, text: str, message: str) -> None:
    ckpt = _weights_dir(tmp_path / "ckpt")
    (ckpt / "config.json").write_text(text)
    with pytest.raises(CheckpointError, match=message) as info:
        check_model_directory(ckpt, role="target.model")
    assert "config.json" in _one_screen(info.value)
