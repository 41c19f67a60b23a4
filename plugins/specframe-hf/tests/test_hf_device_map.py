"""A target split by accelerate's device_map (CPU plus disk offload here): trees, commits and greedy outputs equal
the single-device target's; devices that do not exist are one-screen errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from specframe_hf.device_map import DeviceMap
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, random_tree_parents, tiny_causal_lm

from specframe.errors import ConfigError
from specframe.pipeline import Pipeline
from specframe.tree import DraftTree

SPLIT = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
         "model.layers.2": "disk", "model.norm": "cpu", "lm_head": "cpu"}
NGRAM = {"sampling": {"temperature": 0.0}, "budget": 4, "drafter": {"type": "ngram", "num_speculative_tokens": 4},
         "corrector": {"type": "identity"}, "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
         "verifier": {"type": "auto"}}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    tiny_causal_lm("llama", seed=4, num_layers=3).save_pretrained(folder)
    return folder


def load(path: Path, placement: DeviceMap | None = None, taps: tuple[int, ...] = ()) -> HFTarget:
    return HFTarget.from_pretrained(str(path), device="cpu", placement=placement, taps=taps)


@pytest.mark.parametrize("placement", ["explicit", "auto"])
def test_offloaded_target_equals_the_single_device_target(saved: Path, tmp_path: Path, placement: str) -> None:
    spec = DeviceMap(SPLIT, offload_folder=str(tmp_path)) if placement == "explicit" else \
        DeviceMap("auto", max_memory={"cpu": "300KB"}, offload_folder=str(tmp_path))
    whole, split = load(saved, taps=(0, 2)), load(saved, spec, taps=(0, 2))
    assert "disk" in split.model.hf_device_map.values()  # part of the model really is on disk
    assert split.device == torch.device("cpu") and split.devices == ()
    prompt = torch.tensor([random_ids(9, seed=3)])
    a, b = whole.prefill(prompt), split.prefill(prompt)
    torch.testing.assert_close(b.logits, a.logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(b.hidden, a.hidden, rtol=0, atol=1e-5)
    gen = torch.Generator().manual_seed(0)
    moved = 0
    for r in range(5):  # random trees (tree mask, positions) and accepted paths off the block's prefix (compaction)
        n = 8
        tree = DraftTree.from_lists(random_ids(n, seed=10 + r), random_tree_parents(n, seed=10 + r))
        a, b = whole.forward_tree(tree), split.forward_tree(tree)
        torch.testing.assert_close(b.logits, a.logits, rtol=0, atol=1e-5)
        path = tree.path_to(0, int(torch.randint(1, n, (1,), generator=gen)))
        moved += path != list(range(len(path)))
        accepted = torch.full((1, n), -1, dtype=torch.long)
        accepted[0, : len(path)] = torch.tensor(path)
        whole.commit(tree, accepted)
        split.commit(tree, accepted)
    assert moved >= 2 and split.cache_len == whole.cache_len
    # Greedy decoding through the whole pipeline: token for token the single-device output.
    whole.set_taps(())
    split.set_taps(())
    ids = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 9]
    ours = Pipeline.from_dict(NGRAM, target=split).generate(ids, 16)
    assert ours.tokens == Pipeline.from_dict(NGRAM, target=whole).generate(ids, 16).tokens
    assert any(r.accepted for r in ours.rounds)


def test_device_map_through_a_pipeline_file_section(saved: Path, tmp_path: Path) -> None:
    target = {"type": "hf", "model": str(saved), "device": "cpu", "device_map": SPLIT,
              "offload_folder": str(tmp_path)}
    pipe = Pipeline.from_dict({**NGRAM, "target": target})
    assert pipe.target.model.hf_device_map["model.layers.2"] == "disk"
    assert pipe.generate([5, 6, 7, 5, 6, 7], 6).tokens == Pipeline.from_dict(
        NGRAM, target=load(saved)).generate([5, 6, 7, 5, 6, 7], 6).tokens


@pytest.mark.parametrize(("placement", "message"), [
    (DeviceMap({**SPLIT, "model.layers.1": "cuda:3"}), "target.device_map['model.layers.1'] names CUDA device 3"),
    (DeviceMap({**SPLIT, "model.layers.1": 5}), "names CUDA device 5, but this machine has"),
    (DeviceMap({**SPLIT, "model.layers.1": "tpu"}), "unknown or unavailable device 'tpu'"),
    (DeviceMap("auto", max_memory={"7": "1GiB"}), "target.max_memory['7'] names CUDA device 7"),
    (DeviceMap(SPLIT), "offload_folder is not set"),
    (DeviceMap(None, max_memory={"cpu": "1GiB"}), "max_memory is set but target.device_map is not"),
])
def test_a_device_map_naming_a_missing_device_is_a_clear_error(saved: Path, placement: DeviceMap,
                                                               message: str) -> None:
    if torch.cuda.device_count() > 3:
        pytest.skip("this machine has the devices the test names as missing")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load(saved, placement)


def _escaped(message: str) -> str:
    return message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")


@pytest.mark.parametrize(("placement", "message"), [
    (DeviceMap("auto", max_memory={"cpu": 1000}), "target.max_memory['cpu'] is 1000 (1000 bytes), less than the "
                                                  "model's largest block (model.layers.0"),
    (DeviceMap("auto", max_memory={"cpu": "2KiB"}), "less than the model's largest block"),
    (DeviceMap("auto", max_memory={"cpu": -1}), "target.max_memory['cpu']: -1 is not a memory limit"),
    (DeviceMap("auto", max_memory={"cpu": 0}), "0 is not a memory limit"),
    (DeviceMap("auto", max_memory={"cpu": "lots"}), "'lots' is not a size"),
    (DeviceMap("auto", max_memory={"cpu": "2XB"}), "'2XB' is not a size"),
    (DeviceMap("auto", max_memory={"cpu": True}), "True is not a size"),
    (DeviceMap({**SPLIT, "model.layer.1": "cpu"}), "target.device_map names 'model.layer.1', which is not a module"),
    (DeviceMap({k: v for k, v in SPLIT.items() if k != "lm_head"}), "target.device_map places no device for 1 "
                                                                     "weights, in lm_head"),
])
def test_device_map_values_are_checked_and_blamed_on_their_field(saved: Path, tmp_path: Path,
                                                                 placement: DeviceMap, message: str) -> None:
    placement = DeviceMap(placement.device_map, placement.max_memory, offload_folder=str(tmp_path))
    with pytest.raises(ConfigError, match=_escaped(message)) as info:
        load(saved, placement)
    assert "config.json" not in info.value.render() and len(info.value.render()) < 800


def test_an_unknown_module_lists_the_valid_names(saved: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(saved, DeviceMap({**SPLIT, "decoder": "cpu"}, offload_folder=str(tmp_path)))
    assert "lm_head" in info.value.hint and "model.layers.N" in info.value.hint and "N = 0 .. 2" in info.value.hint


def test_a_max_memory_value_is_refused_when_the_pipeline_is_validated(saved: Path) -> None:
    target = {"type": "hf", "model": str(saved), "device_map": "auto", "max_memory": {"cpu": "-1GiB"}}
    with pytest.raises(ConfigError, match=_escaped("target.max_memory: max_memory['cpu']: '-1GiB'")):
        Pipeline.from_dict({**NGRAM, "target": target})


def test_a_bad_offload_folder_is_named(saved: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine")
    with pytest.raises(ConfigError, match=r"target\.offload_folder") as info:
        load(saved, DeviceMap(SPLIT, offload_folder=str(tmp_path / "file" / "sub")))
    assert "is a file" in info.value.render() and (tmp_path / "file").read_text() == "mine"


def test_a_placement_the_loader_refuses_names_the_placement_fields(saved: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    def refuse(*args: object, **kwargs: object) -> None:
        raise ValueError("offload_index does not match the weights")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)
    with pytest.raises(ConfigError, match=r"target\.device_map / max_memory / offload_folder") as info:
        load(saved, DeviceMap(SPLIT, offload_folder=str(tmp_path)))
    assert "needs the config.json" not in info.value.render()
