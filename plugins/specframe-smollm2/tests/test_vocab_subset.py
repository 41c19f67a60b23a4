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


def _shard(directory: Path, ids: object, prompt_len: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    torch.save({"ids": ids, "prompt_len": prompt_len}, directory / "shard-00000.pt")
    return directory


GOOD_IDS = torch.tensor([1, 2, 3, 4, 5], dtype=torch.int32)


@pytest.mark.parametrize("ids, prompt_len, message", [
    ([torch.tensor([3, -4, 5])], [1], "ids[0] holds token id -4, outside the target vocabulary"),
    ([torch.tensor([3, 4, 500])], [1], "ids[0] holds token id 500"),
    ([torch.tensor([[1, 2], [3, 4]])], [1], "ids[0] is a 2-D int64 tensor"),
    ([torch.tensor([1.7, 2.2, 3.9])], [1], "ids[0] is a 1-D float32 tensor"),
    ([torch.tensor([True, False])], [1], "ids[0] is a 1-D bool tensor"),
    (["1 2 3"], [1], "ids[0] is a str"),
    ([7], [1], "ids[0] is a int"),
    (torch.tensor([[1, 2, 3]]), [1], "'ids' is a Tensor"),
    ([GOOD_IDS], [2.5], "prompt_len[0] is 2.5"),
    ([GOOD_IDS], [1e30], "prompt_len[0] is 1e+30"),
    ([GOOD_IDS], [10**30], "prompt_len[0] is 1000000000000000000000000000000"),
    ([GOOD_IDS], [-2], "prompt_len[0] is -2"),
    ([GOOD_IDS], [0], "prompt_len[0] is 0"),
    ([GOOD_IDS], [True], "prompt_len[0] is True"),
    ([GOOD_IDS], ["2"], "prompt_len[0] is '2'"),
    ([GOOD_IDS], [1, 2], "'ids' holds 1 sequences but 'prompt_len' 2"),
    ([GOOD_IDS], [5], "hold no response tokens"),
])
def test_hostile_shard_values_are_named(tmp_path: Path, ids: object, prompt_len: object, message: str) -> None:
    directory = _shard(tmp_path / "data", ids, prompt_len)
    with pytest.raises(ConfigError) as info:
        count_response_tokens([directory], TINY_VOCAB)
    shown = info.value.render()
    assert message in shown and (message.startswith("hold") or "shard-00000.pt" in shown)


def test_tensor_prompt_lengths_and_small_id_dtypes_are_read(tmp_path: Path) -> None:
    directory = _shard(tmp_path / "data", [GOOD_IDS.to(torch.int16)], [torch.tensor(2)])
    assert count_response_tokens([directory], TINY_VOCAB)[0, 3:6].tolist() == [1, 1, 1]


def _target_with_tokenizer(tmp_path: Path) -> Path:
    """A target directory whose word-level tokenizer has TINY_VOCAB tokens (EOS id 1)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    directory = tmp_path / "target"
    words = Tokenizer(models.WordLevel({f"t{i}": i for i in range(TINY_VOCAB)}, unk_token="t0"))
    PreTrainedTokenizerFast(tokenizer_object=words, eos_token="t1", unk_token="t0").save_pretrained(directory)
    (directory / "config.json").write_text(json.dumps({"vocab_size": TINY_VOCAB}))
    return directory


@pytest.mark.parametrize("vocab_size", [2.9, True, -5, "96", 10**30])
def test_a_target_vocab_size_that_is_not_a_count_is_refused(tmp_path: Path, vocab_size: object) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": vocab_size}))
    with pytest.raises(ConfigError, match="not a whole number"):
        target_vocab_size(tmp_path)


def test_every_size_is_checked_before_anything_is_written(tiny_data: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "fr64.safetensors").write_bytes(b"the user's mapping")
    (existing / "coverage.json").write_text("{}")
    target = _target_with_tokenizer(tmp_path)
    for size in ("1000000", "0", "-3"):
        code = run_cli(["vocab-subset", "--from", str(tiny_data), "--size", "64", "--size", size,
                        "-o", str(existing), "--target", str(target)])
        err = " ".join(capsys.readouterr().err.split())
        assert code == 2 and f"--size {size} must lie between" in err and "Traceback" not in err
    assert (existing / "fr64.safetensors").read_bytes() == b"the user's mapping"
    assert (existing / "coverage.json").read_text() == "{}"
    assert sorted(p.name for p in existing.iterdir()) == ["coverage.json", "fr64.safetensors"]


def test_a_failed_write_leaves_every_old_file(tiny_data: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    from specframe.files import OutputError

    counts = count_response_tokens([tiny_data], TINY_VOCAB).sum(0)
    out = tmp_path / "out"
    write_subsets(counts, [8, 16], [1], out, sources=["a"])
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls = []

    def full_on_second(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_on_second)
    with pytest.raises(OutputError, match="the file system is full"):
        write_subsets(counts, [8, 32], [1], out, sources=["b"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no new file, no temporary file


def test_the_command_writes_each_mapping_and_the_coverage(tiny_data: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    """`specframe vocab-subset --from DATA --size N -o OUT` as the README gives it, on tiny shards."""
    out = tmp_path / "vocab"
    code = run_cli(["vocab-subset", "--from", str(tiny_data), "--size", "16", "--size", "32", "-o", str(out),
                    "--target", str(_target_with_tokenizer(tmp_path))])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["coverage.json", "fr16.safetensors", "fr32.safetensors"]
    assert "covers" in capsys.readouterr().out
