"""Checkpoint loading and saving in the published layouts, and every checkpoint error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from diffusion_testkit import published_config, published_keys
from safetensors import safe_open
from safetensors.torch import save_file
from specframe_diffusion.checkpoint import (
    DraftModelConfig,
    build_target_layer_ids,
    load_checkpoint,
    open_checkpoint,
    save_checkpoint,
)

from specframe.errors import CheckpointError

KINDS = ["dflash", "domino", "dspark_deepseek", "dspark_zlab", "dflash_deepseek"]


def _stored(directory: Path) -> dict[str, torch.Tensor]:
    out = {}
    for path in sorted(directory.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            out |= {k: f.get_tensor(k) for k in f.keys()}
    return out


# ----------------------------------------------------------------------------------------------- config
def test_default_taps_match_the_published_ids() -> None:
    assert build_target_layer_ids(36, 5) == (1, 9, 17, 25, 33)
    assert build_target_layer_ids(36, 1) == (18,)


@pytest.mark.parametrize(
    ("kind", "family", "layout", "slots"),
    [("dflash", "dflash", "zlab", 15), ("domino", "domino", "zlab", 16),
     ("dspark_deepseek", "dspark", "deepseek", 7), ("dspark_zlab", "dspark", "zlab", 7),
     ("dflash_deepseek", "dflash", "deepseek", 7)],
)
def test_family_layout_and_slots_are_read_from_config(kind: str, family: str, layout: str, slots: int) -> None:
    cfg = DraftModelConfig.from_dict(published_config(kind, block_size=16 if kind in ("dflash", "domino") else 7))
    assert cfg.shift_label == (kind != "dflash")
    assert (cfg.family, cfg.layout, cfg.num_slots) == (family, layout, slots)
    assert cfg.target_layer_ids == (0, 2)


def test_block_size_inside_dflash_config_and_old_projector_name() -> None:
    data = published_config("domino")
    del data["block_size"]
    data["dflash_config"]["block_size"] = 8
    data["dflash_config"]["projector_type"] = "causal_v5"
    cfg = DraftModelConfig.from_dict(data)
    assert (cfg.block_size, cfg.family, cfg.num_slots, cfg.pure_draft_prefix_len) == (8, "domino", 8, 1)


def test_missing_taps_fall_back_to_the_default_rule() -> None:
    data = published_config("dflash", layers=5)
    del data["dflash_config"]["target_layer_ids"]
    data["num_target_layers"] = 36
    assert DraftModelConfig.from_dict(data).target_layer_ids == (1, 9, 17, 25, 33)


def test_unknown_projector_and_missing_fields_name_the_field() -> None:
    data = published_config("dflash")
    data["dflash_config"]["projector_type"] = "medusa"
    with pytest.raises(CheckpointError, match="projector_type is 'medusa'"):
        DraftModelConfig.from_dict(data, source="x/config.json")
    data = published_config("dflash")
    del data["dflash_config"]["mask_token_id"]
    with pytest.raises(CheckpointError, match=r"dflash_config\.mask_token_id or mask_token_id"):
        DraftModelConfig.from_dict(data)
    data = published_config("dflash")
    data["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
    with pytest.raises(CheckpointError, match="only plain RoPE"):
        DraftModelConfig.from_dict(data)


# -------------------------------------------------------------------------------------- load and save
LAYOUT_CASES = [("dflash", "vanilla"), ("domino", "vanilla"), ("dflash_deepseek", "vanilla")] + [
    (kind, head) for kind in ("dspark_deepseek", "dspark_zlab") for head in ("vanilla", "gated", "rnn")]


@pytest.mark.parametrize(("kind", "head_type"), LAYOUT_CASES)
def test_published_layout_loads_and_saves_back_identically(make_checkpoint, tmp_path: Path, kind: str,
                                                           head_type: str) -> None:
    src = make_checkpoint(kind, head_type=head_type)
    original = _stored(src)
    ckpt = load_checkpoint(src)
    out = save_checkpoint(ckpt, tmp_path / "saved" / kind)
    saved = _stored(out)
    assert set(saved) == set(original)
    for key, tensor in original.items():
        assert torch.equal(saved[key], tensor), key
    assert json.loads((out / "config.json").read_text()) == json.loads((src / "config.json").read_text())
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        assert f.metadata() == {"format": "pt"}


def test_dspark_head_keys_are_accepted_in_both_nestings(make_checkpoint, tmp_path: Path) -> None:
    src = make_checkpoint("dspark_deepseek", head_type="gated")
    tensors = _stored(src)
    flat = {k.removeprefix("markov_head."): v for k, v in tensors.items()}
    save_file(flat, str(src / "model.safetensors"))
    files = open_checkpoint(src)
    head = files.group_state("markov_head")
    assert torch.equal(head["gate_proj.bias"], tensors["markov_head.gate_proj.bias"])
    out = save_checkpoint(load_checkpoint(src), tmp_path / "flat")
    assert set(_stored(out)) == set(flat)  # saved with the spelling it was loaded with


def test_sharded_checkpoint_round_trip_and_stale_files(make_checkpoint, tmp_path: Path) -> None:
    src = make_checkpoint("domino")
    ckpt = load_checkpoint(src)
    target = tmp_path / "sharded"
    save_checkpoint(ckpt, target, max_shard_bytes=40_000)
    shards = sorted(p.name for p in target.glob("*.safetensors"))
    assert len(shards) > 1 and (target / "model.safetensors.index.json").is_file()
    again = load_checkpoint(target)
    for (group, state), (_, state2) in zip(sorted(ckpt.groups().items()), sorted(again.groups().items()),
                                           strict=True):
        assert state.keys() == state2.keys(), group
        assert all(torch.equal(state[k], state2[k]) for k in state)
    save_checkpoint(again, target)  # overwrite with a single file: old shards and index must go
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    assert not list(tmp_path.glob(".*tmp*")) and not list(target.glob(".*tmp"))


def test_save_with_dtype_records_it(make_checkpoint, tmp_path: Path) -> None:
    out = save_checkpoint(load_checkpoint(make_checkpoint("dflash")), tmp_path / "bf16", dtype=torch.bfloat16)
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert all(t.dtype == torch.bfloat16 for t in _stored(out).values())
    assert open_checkpoint(out).load_backbone(dtype=torch.float32).fc.weight.dtype == torch.float32


# ----------------------------------------------------------------------------------------------- errors
def test_missing_directory_config_and_weights_are_named(make_checkpoint, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        open_checkpoint(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match=r"checkpoint directory .*file is a file, not a directory"):
        open_checkpoint(tmp_path / "file")
    src = make_checkpoint("dflash")
    (src / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors is missing"):
        open_checkpoint(src)
    (src / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config\.json does not exist"):
        open_checkpoint(src)
    (src / "config.json").mkdir()
    with pytest.raises(CheckpointError, match=r"config\.json is a directory, not a file"):
        open_checkpoint(src)


def test_missing_shard_is_named(make_checkpoint, tmp_path: Path) -> None:
    target = tmp_path / "sharded"
    save_checkpoint(load_checkpoint(make_checkpoint("dflash")), target, max_shard_bytes=40_000)
    victim = sorted(target.glob("model-*.safetensors"))[-1]
    victim.unlink()
    with pytest.raises(CheckpointError, match=f"shard .*{victim.name}.* is missing"):
        open_checkpoint(target)


def test_missing_unexpected_and_misshaped_keys_are_listed(make_checkpoint) -> None:
    src = make_checkpoint("domino")
    tensors = _stored(src)
    del tensors["layers.1.mlp.up_proj.weight"]
    del tensors["prefix_gru.weight_hh_l0"]
    tensors["extra.bias"] = torch.zeros(3)
    tensors["fc.weight"] = torch.zeros(64, 100)
    save_file(tensors, str(src / "model.safetensors"))
    with pytest.raises(CheckpointError) as info:
        open_checkpoint(src)
    text = str(info.value)
    assert "missing keys (2): layers.1.mlp.up_proj.weight, prefix_gru.weight_hh_l0" in text
    assert "unexpected keys (1): extra.bias" in text
    assert "fc.weight: expected [64, 128], found [64, 100]" in text


def test_mask_token_outside_vocabulary(make_checkpoint) -> None:
    src = make_checkpoint("dflash", mask=600)
    with pytest.raises(CheckpointError, match="mask_token_id 600 is outside the vocabulary"):
        open_checkpoint(src)


def test_layout_tables_agree_with_the_hand_written_keys() -> None:
    from specframe_diffusion.checkpoint import checkpoint_layout

    for kind in KINDS:
        for head in ("vanilla", "gated", "rnn"):
            data = published_config(kind, head_type=head)
            cfg = DraftModelConfig.from_dict(data)
            assert {s.key: s.shape for s in checkpoint_layout(cfg)} == published_keys(data), (kind, head)


def test_shard_index_pointing_outside_the_checkpoint_is_refused(make_checkpoint, tmp_path: Path) -> None:
    target = tmp_path / "sharded"
    save_checkpoint(load_checkpoint(make_checkpoint("dflash")), target, max_shard_bytes=40_000)
    index_path = target / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    victim = sorted(target.glob("model-*.safetensors"))[-1]
    victim.rename(tmp_path / "outside.safetensors")
    index["weight_map"] = {k: ("../outside.safetensors" if v == victim.name else v)
                           for k, v in index["weight_map"].items()}
    index_path.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="outside the checkpoint directory"):
        open_checkpoint(target)
    index["weight_map"] = list(index["weight_map"])
    index_path.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match="'weight_map' is list"):
        open_checkpoint(target)


def test_exported_checkpoint_gets_ordinary_permissions(make_checkpoint, tmp_path: Path) -> None:
    import os

    old = os.umask(0o022)
    try:
        out = save_checkpoint(load_checkpoint(make_checkpoint("dflash")), tmp_path / "new")
        save_checkpoint(load_checkpoint(out), out)  # overwrite in place
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o755
    assert {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()} == {"config.json": 0o644,
                                                                         "model.safetensors": 0o644}


def test_saving_into_a_directory_of_other_files_is_refused(make_checkpoint, tmp_path: Path) -> None:
    foreign = tmp_path / "models"
    foreign.mkdir()
    (foreign / "someone-else.safetensors").write_text("keep me")
    with pytest.raises(CheckpointError, match="not a checkpoint to overwrite"):
        save_checkpoint(load_checkpoint(make_checkpoint("dflash")), foreign)
    assert (foreign / "someone-else.safetensors").read_text() == "keep me"
    save_checkpoint(load_checkpoint(make_checkpoint("dflash")), tmp_path / "empty-ok")
