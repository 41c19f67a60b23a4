"""Hostile head and drafter checkpoints (issue 39, silent wrong results and tracebacks), on copies of the shipped
SmolLM2 checkpoints (in git, so a fresh clone has them; no target model is needed to open them).

Weights that are NaN or ±inf loaded without a word and rejected every draft (τ 1.82 -> 1.00); a LiLiCorr
``lilicorr_logit_scale`` of 1e308 overflowed the same way; a tensor relabelled ``int16`` ended in a bare
``RuntimeError`` from ``load_state_dict``. Each is now a one-screen CheckpointError at load.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from specframe_diffusion.checkpoint import open_checkpoint
from specframe_diffusion.checkpoint.head_base import BASE_KEY, HeadBaseWarning, check_head_base, weights_sha256
from specframe_diffusion.draft_config import TRAINED_TAPS_KEY

from specframe.errors import CheckpointError

SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints" / "smollm2-135m"
GROUPS = {"path-selector": "path_selector", "lattice-head": "lilicorr_head", "drafter": "backbone"}


def copy_of(name: str, tmp_path: Path) -> Path:
    source = SHIPPED / name
    if not (source / "model.safetensors").is_file():
        pytest.skip(f"{source} has no weights in this checkout")
    out = tmp_path / name
    shutil.copytree(source, out)
    return out


def corrupt(directory: Path, change: str) -> str:
    """Change the first floating tensor of the weights file; return its key."""
    path = directory / "model.safetensors"
    tensors = load_file(str(path))
    key = next(k for k, t in sorted(tensors.items()) if t.is_floating_point() and t.numel() > 4)
    t = tensors[key].clone()
    if change == "nan":
        t.view(-1)[3] = float("nan")
    elif change == "inf":
        t.view(-1)[:2] = torch.tensor([float("inf"), float("-inf")])
    elif change == "other":
        t = t * 1.01  # another, healthy model
    else:
        t = t.to(torch.int16)
    tensors[key] = t
    save_file(tensors, str(path), metadata={"format": "pt"})
    return key


@pytest.mark.parametrize("name", list(GROUPS))
@pytest.mark.parametrize("change, says", [("nan", "NaN or ±inf"), ("inf", "2 ±inf"), ("int16", "int16")])
def test_corrupt_weights_are_refused_at_load(tmp_path: Path, name: str, change: str, says: str) -> None:
    directory = copy_of(name, tmp_path)
    files = open_checkpoint(directory)
    assert files.group_state(GROUPS[name])  # the healthy copy loads
    key = corrupt(directory, change)
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(directory).group_state(GROUPS[name])
    assert says in info.value.message and key in info.value.message and info.value.hint


@pytest.mark.parametrize("value", [1e308, 1e4, float("inf")])
def test_an_absurd_lattice_logit_scale_is_refused(tmp_path: Path, value: float) -> None:
    directory = copy_of("lattice-head", tmp_path)
    config = json.loads((directory / "config.json").read_text())
    config["dflash_config"]["lilicorr_logit_scale"] = value
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"lilicorr_logit_scale|Infinity is not a JSON number"):
        open_checkpoint(directory)


def test_a_head_on_its_drafter_with_reversed_taps_is_refused(tmp_path: Path) -> None:
    """The drafter's `target_layer_ids` listed in reverse (same layers) ran the path selector at τ 1.00; the
    head-only export's config records the order its base drafter tapped, and the loader compares."""
    head = copy_of("path-selector", tmp_path)
    drafter = copy_of("drafter", tmp_path)
    check_head_base(open_checkpoint(head).config, head, str(drafter), component="corrector 'path_selector'")
    config = json.loads((drafter / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"].reverse()
    del config[TRAINED_TAPS_KEY]  # a drafter exported before it recorded its own order: the head still knows
    (drafter / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"tapping target layers \[1, 7, 14, 20, 27\] in this order") as info:
        check_head_base(open_checkpoint(head).config, head, str(drafter), component="corrector 'path_selector'")
    assert "[27, 20, 14, 7, 1]" in info.value.message


@pytest.mark.parametrize("name", ["drafter", "path-selector", "markov-head"])
def test_a_checkpoint_whose_taps_were_reordered_is_refused(tmp_path: Path, name: str) -> None:
    """A drafter whose `target_layer_ids` are listed in reverse (same layers) ran at τ 1.00: its fc layer reads
    the tap blocks in the trained order. The training export records that order; the loader compares."""
    directory = copy_of(name, tmp_path)
    config = json.loads((directory / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"].reverse()
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"trained tapping \[1, 7, 14, 20, 27\] in that order") as info:
        open_checkpoint(directory)
    assert "restore target_layer_ids" in info.value.hint


@pytest.mark.parametrize("name", ["path-selector", "lattice-head"])
def test_a_shipped_head_knows_its_drafter_and_warns_on_another(tmp_path: Path, name: str) -> None:
    """A head-only export recorded nothing about its drafter, so a head ran on the wrong drafter silently."""
    head = copy_of(name, tmp_path)
    drafter = copy_of("drafter", tmp_path)
    cfg = open_checkpoint(head).config
    assert cfg.raw[BASE_KEY]["weights_sha256"] == weights_sha256(drafter)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeadBaseWarning)
        check_head_base(cfg, head, str(drafter), component="corrector")  # the shipped pair: silent
    corrupt(drafter, "other")
    with pytest.warns(HeadBaseWarning, match="has other weights"):
        check_head_base(cfg, head, str(drafter), component="corrector")
