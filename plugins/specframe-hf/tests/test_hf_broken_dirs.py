"""Broken or hostile target directories: one-screen CheckpointErrors naming the file, nothing unpickled."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from specframe_hf.target import HFTarget
from specframe_hf.testing import tiny_causal_lm, tiny_tokenizer

from specframe.cli import run_cli
from specframe.errors import CheckpointError


@pytest.fixture(scope="module")
def good_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-llama")
    tiny_causal_lm("llama", vocab_size=64).save_pretrained(directory)
    tiny_tokenizer([f"w{i}" for i in range(50)]).save_pretrained(directory)
    return directory


@pytest.fixture
def target_dir(good_dir: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "target"
    shutil.copytree(good_dir, directory)
    return directory


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _load_fails(directory: Path, match: str) -> CheckpointError:
    with pytest.raises(CheckpointError, match=match) as info:
        HFTarget.from_pretrained(str(directory), device="cpu")
    text = info.value.render()
    assert len(text.splitlines()) <= 6 and "Traceback" not in text
    return info.value


def test_the_intact_copy_loads(target_dir: Path) -> None:
    assert HFTarget.from_pretrained(str(target_dir), device="cpu").vocab_size == 64


def test_truncated_weights_are_named(target_dir: Path) -> None:
    weights = target_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    err = _load_fails(target_dir, "model.safetensors")
    assert "truncated" in err.hint


def test_pickle_only_weights_are_refused_unread(target_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    state = {k: v for k, v in tiny_causal_lm("llama", vocab_size=64).state_dict().items()}
    state["evil"] = _Exploit(marker)
    (target_dir / "model.safetensors").unlink()
    torch.save(state, target_dir / "pytorch_model.bin")
    err = _load_fails(target_dir, "pytorch_model.bin")
    assert "safetensors" in err.hint and not marker.exists()


def test_shard_index_pointing_outside_is_refused(target_dir: Path, tmp_path: Path) -> None:
    weights = target_dir / "model.safetensors"
    shutil.move(weights, tmp_path / "outside.safetensors")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "outside.safetensors"), framework="pt") as f:
        keys = list(f.keys())
    (target_dir / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {k: "../outside.safetensors" for k in keys}}))
    _load_fails(target_dir, "outside the checkpoint directory")


def test_weight_map_that_is_not_an_object(target_dir: Path) -> None:
    (target_dir / "model.safetensors.index.json").write_text(json.dumps({"weight_map": ["model.safetensors"]}))
    _load_fails(target_dir, "weight_map")


@pytest.mark.parametrize("text, match", [("{not json", "not valid JSON"), ("[]", "JSON list"),
                                         ('"llama"', "JSON str")])
def test_malformed_config_json(target_dir: Path, text: str, match: str) -> None:
    (target_dir / "config.json").write_text(text)
    err = _load_fails(target_dir, match)
    assert "config.json" in err.render()


def test_config_with_wrong_field_types(target_dir: Path) -> None:
    config = json.loads((target_dir / "config.json").read_text())
    config["hidden_size"] = "wide"
    (target_dir / "config.json").write_text(json.dumps(config))
    _load_fails(target_dir, "could not load a causal LM")


def test_weights_that_do_not_fit_the_config(target_dir: Path) -> None:
    save_file({"model.embed_tokens.weight": torch.zeros(3, 3)}, str(target_dir / "model.safetensors"))
    _load_fails(target_dir, "could not load a causal LM")


def test_tokenizer_of_another_model_is_refused(target_dir: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (target_dir / name).unlink(missing_ok=True)
    tiny_tokenizer(["a", "b"]).save_pretrained(target_dir)  # 8 tokens for a 64-row embedding table
    _load_fails(target_dir, "tokenizer .* belongs to another model")


def test_tokenizer_with_another_end_of_sequence_is_refused(target_dir: Path) -> None:
    config = json.loads((target_dir / "config.json").read_text())
    config["eos_token_id"] = 5
    (target_dir / "config.json").write_text(json.dumps(config))
    (target_dir / "generation_config.json").unlink(missing_ok=True)
    _load_fails(target_dir, "ends sequences with id 2")


def test_cli_run_on_a_broken_target_is_one_screen(target_dir: Path, tmp_path: Path, capsys) -> None:
    (target_dir / "model.safetensors").write_bytes(b"\x00" * 16)
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"name: p\ntarget: {{type: hf, model: '{target_dir}', device: cpu}}\nbudget: 4\n"
                        "drafter: {type: none}\ntree_builder: {type: chain}\npruner: {type: none}\n"
                        "verifier: {type: auto}\n")
    assert run_cli(["run", str(pipeline), "--prompt", "w1 w2"]) == 2
    err = capsys.readouterr().err.replace("\n", "")  # rich wraps long lines
    assert "model.safetensors" in err and "Traceback" not in err


def test_a_file_given_as_the_model_directory(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"x")
    _load_fails(tmp_path / "model.bin", "is a file, not a model directory")


def test_broken_chat_template_is_named_at_load(target_dir: Path) -> None:
    tokenizer = tiny_tokenizer([f"w{i}" for i in range(50)])
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }"  # unclosed expression
    tokenizer.save_pretrained(target_dir)
    _load_fails(target_dir, "chat template .* does not render")


def test_tokenizer_with_another_begin_of_sequence_is_refused(target_dir: Path) -> None:
    config = json.loads((target_dir / "config.json").read_text())
    config["bos_token_id"] = 7
    (target_dir / "config.json").write_text(json.dumps(config))
    (target_dir / "generation_config.json").unlink(missing_ok=True)
    _load_fails(target_dir, "begins sequences with id 1")


@pytest.mark.parametrize("field, value, match", [("num_hidden_layers", 1, "unexpected keys"),
                                                 ("num_hidden_layers", 3, "missing keys")])
def test_config_that_does_not_match_the_weights(target_dir: Path, field: str, value: int, match: str) -> None:
    config = json.loads((target_dir / "config.json").read_text())
    config[field] = value  # transformers alone would only warn and run a partly random model
    (target_dir / "config.json").write_text(json.dumps(config))
    _load_fails(target_dir, match)
