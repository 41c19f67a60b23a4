"""Reduced draft vocabularies: the EAGLE-3 d2t/t2d layout, its validation, and frequency-ranked subsets."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from specframe.draft_vocab import DraftVocab, frequency_ranked, load_draft_vocab, save_draft_vocab
from specframe.errors import CheckpointError, ConfigError


def test_eagle3_layout_of_a_small_subset() -> None:
    vocab = DraftVocab.from_target_ids([5, 0, 2], 6)
    assert vocab.target_ids.tolist() == [0, 2, 5]
    assert vocab.d2t.tolist() == [0, 1, 3]  # target_id = draft_id + d2t[draft_id]
    assert vocab.t2d.tolist() == [True, False, True, False, False, True]
    assert vocab.d2t.dtype == torch.int64 and vocab.t2d.dtype == torch.bool


def test_round_trip_through_a_safetensors_file(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randperm(1000, generator=gen)[:137]
    vocab = DraftVocab.from_target_ids(ids, 1000)
    path = save_draft_vocab(vocab, tmp_path / "sub" / "map.safetensors", metadata={"size": "137"})
    loaded = load_draft_vocab(path)
    assert torch.equal(loaded.target_ids, torch.sort(ids).values)
    assert loaded.target_vocab_size == 1000 and loaded.size == 137
    assert [p.name for p in path.parent.iterdir()] == ["map.safetensors"]  # no temporary file left


def _write(path: Path, **tensors: torch.Tensor) -> Path:
    save_file(tensors, str(path))
    return path


@pytest.mark.parametrize(("tensors", "needle"), [
    ({"d2t": torch.tensor([0, 1])}, "no t2d"),
    ({"d2t": torch.tensor([0, 5]), "t2d": torch.tensor([True, False, True])}, "target id 6"),  # out of range
    ({"d2t": torch.tensor([1, 0]), "t2d": torch.tensor([False, True, False])}, "appears twice"),
    ({"d2t": torch.tensor([0, 1]), "t2d": torch.tensor([True, True, False, False])}, "t2d marks 2"),  # disagree
    ({"d2t": torch.tensor([0, 0]), "t2d": torch.tensor([True, True, True, False])}, "t2d marks 3"),
    ({"d2t": torch.tensor([0.0, 1.0]), "t2d": torch.tensor([True, True])}, "d2t must be a 1-D integer"),
    ({"d2t": torch.tensor([0, 0]), "t2d": torch.tensor([1, 1])}, "t2d must be a 1-D bool"),
])
def test_bad_mappings_are_checkpoint_errors_naming_the_file(tmp_path: Path, tensors: dict, needle: str) -> None:
    path = _write(tmp_path / "bad.safetensors", **tensors)
    with pytest.raises(CheckpointError) as err:
        load_draft_vocab(path)
    assert needle in err.value.render() and str(path) in err.value.render()


def test_unreadable_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_draft_vocab(tmp_path / "nope.safetensors")
    pickled = tmp_path / "map.pt"
    torch.save({"d2t": torch.zeros(2)}, pickled)
    with pytest.raises(CheckpointError, match="safetensors"):
        load_draft_vocab(pickled)


def test_a_mapping_for_another_vocabulary_does_not_fit() -> None:
    vocab = DraftVocab.from_target_ids([0, 1, 2], 100, source="map.safetensors")
    vocab.check_target(100)
    with pytest.raises(CheckpointError, match=r"map\.safetensors.*100 tokens.*target has 512"):
        vocab.check_target(512)


def test_frequency_ranked_keeps_specials_then_the_most_frequent() -> None:
    counts = torch.tensor([0, 50, 3, 50, 7, 0, 9, 1])
    vocab = frequency_ranked(counts, 4, always=[5])
    # 5 forced; then 1 and 3 (tie at 50, lower id first), then 6 (9)
    assert vocab.target_ids.tolist() == [1, 3, 5, 6]
    assert frequency_ranked(counts, 8).size == 8
    with pytest.raises(ConfigError, match="size 9"):
        frequency_ranked(counts, 9)
    with pytest.raises(ConfigError, match="size 1"):
        frequency_ranked(counts, 1, always=[0, 2])
    with pytest.raises(ConfigError, match="id 8"):
        frequency_ranked(counts, 3, always=[8])
