"""``specframe vocab-subset``: response-token counts from shards, frequency-ranked mappings, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from specframe_smollm2.testing import TINY_VOCAB
from specframe_smollm2.vocab_subset import (
    count_response_tokens,
    heldout_coverage,
    target_vocab_size,
    write_subsets,
)

from specframe.cli import run_cli
from specframe.draft_vocab import load_draft_vocab
from specframe.errors import ConfigError


def _expected_counts(directory: Path) -> torch.Tensor:
    counts = torch.zeros(TINY_VOCAB, dtype=torch.long)
    for path in sorted(directory.glob("shard-*.pt")):
        shard = torch.load(path, weights_only=True)
        for ids, p in zip(shard["ids"], shard["prompt_len"], strict=True):
            for t in ids[int(p):].tolist():
                counts[t] += 1
    return counts


def test_counts_cover_responses_only_and_subsets_keep_the_most_frequent(tiny_data: Path, tmp_path: Path) -> None:
    per_shard = count_response_tokens([tiny_data], TINY_VOCAB)
    assert per_shard.shape == (len(list(tiny_data.glob("shard-*.pt"))), TINY_VOCAB)
    counts = per_shard.sum(0)
    assert torch.equal(counts, _expected_counts(tiny_data))
    summary = write_subsets(counts, [8, 16], [1], tmp_path / "out", sources=[str(tiny_data)])
    report = json.loads((tmp_path / "out" / "coverage.json").read_text())
    assert [s["file"] for s in report["subsets"]] == ["fr8.safetensors", "fr16.safetensors"]
    small = load_draft_vocab(tmp_path / "out" / "fr8.safetensors")
    assert small.size == 8 and small.target_vocab_size == TINY_VOCAB
    assert 1 in small.target_ids.tolist()  # the always-kept EOS, even if never counted
    others = [t for t in range(TINY_VOCAB) if t not in small.target_ids.tolist()]
    kept = [t for t in small.target_ids.tolist() if t != 1]
    assert min(counts[kept].tolist()) >= max(counts[others].tolist())
    assert summary[8]["coverage"] <= summary[16]["coverage"] <= 1.0
    one = write_subsets(counts, [8], [1], tmp_path / "one.safetensors", sources=["x"])
    assert one[8]["file"] == "one.safetensors" and load_draft_vocab(tmp_path / "one.safetensors").size == 8


def test_heldout_coverage_ranks_on_the_first_shards_and_measures_on_the_last() -> None:
    per_shard = torch.tensor([[5, 0, 1, 0, 0], [4, 1, 0, 0, 0], [0, 0, 2, 3, 0]])  # [S=3, V=5]
    # ranked from shards 0-1: token 0 (9), then 1 and 2 (1 each, lower id first); always-kept 4
    assert heldout_coverage(per_shard, [2, 3, 4], [4], heldout=1) == {2: 0.0, 3: 0.0, 4: 0.4}
    assert heldout_coverage(per_shard, [5], [], heldout=2)[5] == 1.0
    with pytest.raises(ConfigError, match="--heldout 3"):
        heldout_coverage(per_shard, [2], [], heldout=3)


def test_bad_input_is_a_one_screen_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "config.json").write_text(json.dumps({"vocab_size": TINY_VOCAB}))
    base = ["vocab-subset", "--size", "8", "-o", str(tmp_path / "o"), "--target", str(tmp_path / "target")]
    assert run_cli([*base, "--from", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no data shards" in err and "Traceback" not in err
    (tmp_path / "empty" / "shard-00000.pt").write_bytes(b"not a shard")
    assert run_cli([*base, "--from", str(tmp_path / "empty")]) == 2
    assert "cannot read data shard" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="vocab_size"):
        target_vocab_size(tmp_path / "empty")
