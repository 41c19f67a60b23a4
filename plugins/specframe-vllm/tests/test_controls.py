"""The cross-check's negative controls (specframe_vllm/crosscheck/controls.py) on a small export written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from specframe_vllm.crosscheck.controls import MARKER, main, write_control

from specframe.errors import CheckpointError


def fake_export(directory: Path, layers: int = 2) -> dict[str, torch.Tensor]:
    """An exported drafter's layout: bfloat16 weights, two decoder layers, an int64 d2t."""
    gen = torch.Generator().manual_seed(3)
    tensors = {"fc.weight": torch.randn(16, 32, generator=gen).bfloat16(), "norm.weight": torch.ones(16).bfloat16(),
               "d2t": torch.arange(8, dtype=torch.int64)}
    for i in range(layers):
        tensors[f"layers.{i}.self_attn.q_proj.weight"] = torch.randn(16, 16, generator=gen).bfloat16()
        tensors[f"layers.{i}.input_layernorm.weight"] = (1 + i + torch.zeros(16)).bfloat16()
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"architectures": ["DFlashDraftModel"]}))
    save_file(tensors, str(directory / "model.safetensors"))
    return tensors


def test_noise_is_relative_seeded_and_float32(tmp_path: Path) -> None:
    src = fake_export(tmp_path / "export")
    out = load_file(write_control("noise", tmp_path / "export", tmp_path / "noise", sigma=0.03, seed=5)
                    / "model.safetensors")
    ratio = torch.cat([(out[k] / src[k].float() - 1).flatten() for k in src if src[k].is_floating_point()])
    assert out["fc.weight"].dtype == torch.float32
    assert 0.025 < float(ratio.std()) < 0.035 and abs(float(ratio.mean())) < 0.005
    assert torch.equal(out["d2t"], src["d2t"])
    again = load_file(write_control("noise", tmp_path / "export", tmp_path / "noise", sigma=0.03, seed=5)
                      / "model.safetensors")
    assert all(torch.equal(again[k], out[k]) for k in out)
    assert json.loads((tmp_path / "noise" / MARKER).read_text())["sigma"] == 0.03


def test_swap_exchanges_the_two_layers_and_keeps_the_rest(tmp_path: Path) -> None:
    src = fake_export(tmp_path / "export")
    out = load_file(write_control("swap", tmp_path / "export", tmp_path / "swap") / "model.safetensors")
    assert set(out) == set(src)
    for name in ("self_attn.q_proj.weight", "input_layernorm.weight"):
        assert torch.equal(out[f"layers.0.{name}"], src[f"layers.1.{name}"])
        assert torch.equal(out[f"layers.1.{name}"], src[f"layers.0.{name}"])
    assert torch.equal(out["fc.weight"], src["fc.weight"]) and out["fc.weight"].dtype == torch.bfloat16
    assert (tmp_path / "swap" / "config.json").read_text() == (tmp_path / "export" / "config.json").read_text()


def test_swap_needs_two_layers(tmp_path: Path) -> None:
    fake_export(tmp_path / "export", layers=1)
    with pytest.raises(CheckpointError, match="no matching layers 0 and 1"):
        write_control("swap", tmp_path / "export", tmp_path / "swap")
    assert not (tmp_path / "swap").exists()


def test_an_existing_directory_that_is_no_control_is_left_alone(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    fake_export(tmp_path / "export")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["noise", str(tmp_path / "export"), str(tmp_path / "mine")]) == 2
    assert "is not a control directory" in capsys.readouterr().out
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
